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
from pathlib import Path
from typing import Any, Protocol

from sparktui.adapters.endpoints import Endpoints, resolve_endpoints
from sparktui.adapters.homeassistant import (
    HomeAssistant,
    SwitchState,
    TokenError,
    open_home_assistant,
    plug_power_source,
)
from sparktui.adapters.ping import LivenessCheck, check_liveness, tcp_alive
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

PORT_CHECK_TIMEOUT_S = 3.0
"""A port that does not accept a TCP connection within this long is free enough."""


class NodeLink(Protocol):
    """What workflows need of a node connection (adapters/ssh.NodeConnection)."""

    async def run(self, cmd: str, timeout: float) -> CommandResult: ...

    async def read(self, cmd: str, timeout: float) -> CommandResult:
        """A short read-only command in the node's long-lived reader shell."""

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
    port_open: Callable[[str, int], Awaitable[bool]] | None = None
    """Does (node, port) answer a TCP connect on the node's API address (port guard)."""
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


@dataclass
class Runtime:
    """The composition root's product: the fleet links, Home Assistant, the poller
    and the ops context over them. The console's service, the workflow commands and
    `health` all build it with `open_runtime`."""

    config: Config
    endpoints: Endpoints
    links: LinkSource
    power: Power | None
    poller: Poller
    ops: OpsContext
    ha: HomeAssistant | None
    """The Home Assistant adapter this runtime opened (None when ``power`` was
    injected or the token is missing): the night desk's phone."""


class LinkSource(Protocol):
    """Node name -> connection (adapters/ssh.Fleet, or a test's fake)."""

    def get(self, name: str) -> Any: ...


@asynccontextmanager
async def open_runtime(config: Config, *, emit: Emit = ignore, clock: Clock | None = None,
                       endpoints: Endpoints | None = None, links: LinkSource | None = None,
                       power: Power | None = None,
                       liveness: LivenessCheck = check_liveness,
                       state_dir: Path | None = None,
                       lane_watchers: LaneWatchers | None = None) -> AsyncIterator[Runtime]:
    """The one place production wires the fleet, Home Assistant, the poller and the
    ops context; everything it opens is closed when the block ends. ``links`` and
    ``power`` may be injected (tests, benchmarks): then they are not opened or closed
    here. With the simulator, its own token file is used (a real token in the
    environment is never sent to it). Raises `EndpointError` when the endpoints
    cannot be resolved."""
    clock = clock or SystemClock()
    endpoints = endpoints or resolve_endpoints(config)
    state = state_dir or config.state_dir()
    ha: HomeAssistant | None = None
    power_error = ""
    if power is None:
        try:
            ha = open_home_assistant(config, endpoints, clock=clock)
            power = ha
        except TokenError as exc:  # the message never holds the token (see load_token)
            power_error = str(exc)
    fleet: Fleet | None = None
    if links is None:
        fleet = Fleet.from_config(config, endpoints, clock=clock)
        links = fleet
    entities = {n.name: n.switch for n in config.nodes.values()}
    poller = Poller(config, links, endpoints, clock=clock, liveness=liveness,
                    power=plug_power_source(power, entities) if power else None)
    timeout = config.liveness.timeout_s

    async def snapshot(names: Sequence[str]) -> ClusterSnapshot:
        await asyncio.gather(*(poller.poll_node(n) for n in names))
        return poller.snapshot().select(list(names))

    async def alive(name: str) -> bool:
        return await liveness(endpoints.node(name), timeout)

    async def port_open(name: str, port: int) -> bool:
        return await tcp_alive(endpoints.node(name).api_host, port, PORT_CHECK_TIMEOUT_S)

    ctx = OpsContext(
        config=config, link=links.get, power=power, power_error=power_error,
        snapshot=snapshot, alive=alive, api_host=lambda n: endpoints.node(n).api_host,
        journal=Journal.in_state_dir(state, clock), locks=RunLocks.in_state_dir(state),
        clock=clock, emit=emit,
        fingerprints=(lambda names: host_key_fingerprints(fleet, names)) if fleet else None,
        pipe_image=ssh_image_pipe(fleet) if fleet else None, port_open=port_open,
        lane_watchers=lane_watchers)
    try:
        yield Runtime(config, endpoints, links, power, poller, ctx, ha)
    finally:
        await poller.stop()
        if fleet is not None:
            await fleet.close()
        if ha is not None:
            await ha.aclose()


@asynccontextmanager
async def open_context(config: Config, *, emit: Emit = ignore, clock: Clock | None = None,
                       endpoints: Endpoints | None = None) -> AsyncIterator[OpsContext]:
    """The production ops context alone (the workflow commands)."""
    async with open_runtime(config, emit=emit, clock=clock, endpoints=endpoints) as rt:
        yield rt.ops
