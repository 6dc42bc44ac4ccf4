"""What a workflow needs from the world, in one object.

Production builds it with `open_context` (the SSH fleet, Home Assistant, the
poller, the liveness check, the journal and runlocks in the state dir); tests
build it from fakes or from the simulator's endpoints. Workflows only go
through these protocols, so the same workflow code runs against both.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol

from sparktui.adapters.endpoints import Endpoints, resolve_endpoints
from sparktui.adapters.homeassistant import (
    HomeAssistant,
    SwitchState,
    TokenError,
    open_home_assistant,
)
from sparktui.adapters.ping import check_liveness
from sparktui.adapters.ssh import CommandResult, Fleet
from sparktui.core.clock import Clock, SystemClock
from sparktui.core.config import Config
from sparktui.core.state import ClusterSnapshot
from sparktui.ops.events import Emit, ignore
from sparktui.ops.imagesync import ssh_image_pipe
from sparktui.ops.journal import Journal
from sparktui.ops.runlocks import RunLocks
from sparktui.watch.lane import LaneWatchers
from sparktui.watch.poller import Poller


class NodeLink(Protocol):
    """What workflows need of a node connection (adapters/ssh.NodeConnection)."""

    async def run(self, cmd: str, timeout: float) -> CommandResult: ...

    def stream(self, cmd: str) -> AsyncIterator[bytes]: ...


class Power(Protocol):
    """What workflows need of Home Assistant (adapters/homeassistant.HomeAssistant)."""

    async def state(self, entity: str) -> SwitchState: ...

    async def turn(self, entity: str, on: bool) -> SwitchState: ...


ImagePipe = Callable[[str, str, str, Callable[[int], None]], Awaitable[int]]
"""``await pipe(image, source, target, progress) -> bytes``: ``docker save`` on the
source streamed into ``docker load`` on the target (ops/imagesync.py)."""


@dataclass
class OpsContext:
    config: Config
    link: Callable[[str], NodeLink]
    """Node name -> its connection."""
    power: Power | None
    """None when Home Assistant is not configured or its token is missing."""
    power_error: str
    """Why ``power`` is None."""
    snapshot: Callable[[Sequence[str]], Awaitable[ClusterSnapshot]]
    """Poll these nodes once, now."""
    alive: Callable[[str], Awaitable[bool]]
    """Does the node answer the liveness check (ICMP or TCP)."""
    api_host: Callable[[str], str]
    journal: Journal
    locks: RunLocks
    clock: Clock = field(default_factory=SystemClock)
    emit: Emit = ignore
    fingerprints: Callable[[Sequence[str]], Awaitable[dict[str, str]]] | None = None
    """Host-key fingerprints of the nodes that answered (duplicate-key guard)."""
    pipe_image: ImagePipe | None = None
    lane_watchers: LaneWatchers | None = None
    """The process's lane watchers (the console's): a serve shares its lane's."""


async def host_key_fingerprints(fleet: Fleet, names: Sequence[str]) -> dict[str, str]:
    async def one(name: str) -> tuple[str, str | None]:
        try:
            async with asyncio.timeout(10.0):
                conn = await fleet.get(name).connection()
            key = conn.get_server_host_key()
            return name, key.get_fingerprint() if key is not None else None
        except Exception:
            return name, None

    pairs = await asyncio.gather(*(one(n) for n in names))
    return {n: fp for n, fp in pairs if fp is not None}


@asynccontextmanager
async def open_context(config: Config, *, emit: Emit = ignore, clock: Clock | None = None,
                       endpoints: Endpoints | None = None) -> AsyncIterator[OpsContext]:
    """The production context: everything it opens is closed when the block ends.

    With the simulator, its own token file is used (a real token in the
    environment is never sent to it)."""
    clock = clock or SystemClock()
    endpoints = endpoints or resolve_endpoints(config)
    state = config.state_dir()
    ha: HomeAssistant | None = None
    power_error = ""
    try:
        ha = open_home_assistant(config, endpoints, clock=clock)
    except TokenError as exc:  # the message never holds the token (see load_token)
        power_error = str(exc)
    fleet = Fleet.from_config(config, endpoints, clock=clock)
    entities = {n.name: n.switch for n in config.nodes.values()}
    poller = Poller(config, fleet, endpoints, clock=clock,
                    power=ha.power_source(entities) if ha else None)

    async def snapshot(names: Sequence[str]) -> ClusterSnapshot:
        await asyncio.gather(*(poller.poll_node(n) for n in names))
        return poller.snapshot().select(list(names))

    async def alive(name: str) -> bool:
        return await check_liveness(endpoints.node(name), config.liveness.timeout_s)

    try:
        yield OpsContext(
            config=config, link=fleet.get, power=ha, power_error=power_error,
            snapshot=snapshot, alive=alive, api_host=lambda n: endpoints.node(n).api_host,
            journal=Journal.in_state_dir(state, clock), locks=RunLocks.in_state_dir(state),
            clock=clock, emit=emit,
            fingerprints=lambda names: host_key_fingerprints(fleet, names),
            pipe_image=ssh_image_pipe(fleet),
        )
    finally:
        await fleet.close()
        if ha is not None:
            await ha.aclose()
