"""The simulated cluster: nodes, their sshd and liveness listeners, engines'
HTTP servers, Home Assistant, one clock and one event scheduler.

Everything that changes over simulated time runs in the scheduler
(deterministic, event-ordered); the network side follows it through small
I/O tasks that the simulator owns and cancels on stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import random
import secrets
import socket
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from aiohttp import web

from ..adapters.endpoints import SimEndpointsFile, SimNodeEntry
from ..ops.private import open_private, private_dir
from .catalog import ModelInfo
from .clock import DEFAULT_EPOCH, SimClock, count_thread_hops
from .engine import Engine, Request
from .engine_http import build_app
from .ha import HomeAssistant
from .journal import FLUSHING, NVRM_ASSERT, NVRM_IOVA, NVRM_NO_MEMORY, oom_kill_lines
from .keys import host_keys, make_client_key, write_known_hosts
from .node import Node
from .scenarios import apply_scenario, place_stale_containers
from .scheduler import Proc, Process, Scheduler
from .spec import SimSpec, rng_for
from .ssh_server import NodeSshd

_PREFIXES_IN_USE: dict[str, socket.socket | None] = {}
"""Prefix -> the claim that keeps other processes off it (see `_claim_prefix`)."""
SHUTDOWN_SECONDS = 8.0
"""``systemctl poweroff``: units stop, filesystems unmount, then the OS is off."""


def _claim_prefix() -> str:
    """A random 127.A.B prefix no other simulator holds, in this process or
    (on Linux: an abstract socket named after it) another one, e.g. a parallel
    test worker whose engines listen on the same addresses and ports."""
    net = random.SystemRandom()
    while True:
        prefix = f"127.{net.randint(1, 254)}.{net.randint(1, 254)}"
        if prefix in _PREFIXES_IN_USE:
            continue
        claim: socket.socket | None = None
        if sys.platform == "linux":
            claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                claim.bind(f"\0sparktui-sim-{prefix}")
            except OSError:
                claim.close()
                continue
        _PREFIXES_IN_USE[prefix] = claim
        return prefix


def _release_prefix(prefix: str) -> None:
    claim = _PREFIXES_IN_USE.pop(prefix, None)
    if claim is not None:
        claim.close()


_NAMES = ("admiring", "brave", "clever", "eager", "focused", "keen", "quirky", "tender")
_SURNAMES = ("turing", "hopper", "lovelace", "shannon", "noether", "curie", "dijkstra", "knuth")


class Sim:
    def __init__(self, spec: SimSpec, *, workdir: Path, speed: float | None = None,
                 epoch: float = DEFAULT_EPOCH, scenario: str | None = None) -> None:
        self._pristine = copy.deepcopy(spec)
        """The world before any scenario, for `set_scenario`."""
        apply_scenario(spec, scenario or spec.scenario or "normal")
        self.spec = spec
        self.workdir = workdir
        self.clock = SimClock(speed=speed, epoch=epoch)
        self.sched = Scheduler()
        self.catalog = spec.catalog
        self.usable_gib = spec.usable_gib
        self.rng = rng_for(spec, "ids")
        self._journal_rng = rng_for(spec, "journal")
        self.api_prefix = _claim_prefix()
        self.nodes: dict[str, Node] = {}
        for ns in spec.nodes:
            node = Node(ns, usable_gib=spec.usable_gib, catalog=spec.catalog, now=self.wall,
                        mono=lambda: self.sched.t)
            node.api_host = f"{self.api_prefix}.{ns.index}"
            node.boot_t = self.wall() - 3600.0 - 97.0 * ns.index
            node.journal.boot(node.boot_t, ns.kernel)
            self.nodes[ns.name] = node
        self.sshd: dict[str, NodeSshd] = {}
        self.liveness_ports: dict[str, int] = {}
        self._liveness: dict[str, asyncio.AbstractServer] = {}
        self._http: dict[tuple[str, int], tuple[Engine, web.AppRunner]] = {}
        self._memwatch: dict[str, Proc] = {}
        self._thrashing: set[str] = set()
        self._io: set[asyncio.Task[Any]] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        self._changed: asyncio.Event | None = None
        self._ticker: asyncio.Task[None] | None = None
        self.ha: HomeAssistant | None = None
        self._ha_runner: web.AppRunner | None = None
        self.ha_port = 0
        self.token_file = workdir / "ha_token"
        self.client_key_path = workdir / "keys" / "id_ed25519"
        self.known_hosts_path = workdir / "known_hosts"
        self.clock.on_advance(self._on_advance)

    # --- time -------------------------------------------------------------------
    def wall(self) -> float:
        return self.clock.epoch + self.sched.t

    def sync(self) -> None:
        """Bring the cluster to the clock's present (speed mode; manual mode advances)."""
        if not self.clock.manual:
            self._run_to(self.clock.monotonic())

    def _run_to(self, t: float) -> None:
        before = self.sched.steps
        self._after_step()  # memory may have changed outside the scheduler (tests, HTTP)
        self.sched.run_until(t, before=self._memory_to, after=self._after_step)
        if self.sched.steps != before:
            self.notify()

    def _memory_to(self, t: float) -> None:
        for node in self.nodes.values():
            node.memory.advance(t)

    def _after_step(self) -> None:
        for node in self.nodes.values():
            if node.thrashing:
                self._thrashing.add(node.name)
            elif node.name in self._thrashing:
                self._thrashing.discard(node.name)
                if node.up:  # recovered by itself: sshd answers its backlog at last
                    self.spawn_io(self.sshd[node.name].release_held())
            if not node.up or node.name in self._memwatch:
                continue
            some, _ = node.memory.targets()
            if some >= 10.0:
                self._memwatch[node.name] = self.sched.spawn(f"{node.name}/memwatch",
                                                             self._watch_memory(node))

    def _watch_memory(self, node: Node) -> Process:
        """The kernel's and journald's voice while memory is short."""
        rng = self._journal_rng
        try:
            while node.up:
                some, _ = node.memory.targets()
                if node.memory.thrashing:
                    if node.thrash_onset is None:
                        node.thrash_onset = self.sched.t
                    limit = node.spec.oom_kill_after_s
                    if limit is not None and self.sched.t - node.thrash_onset >= limit:
                        self._oom_kill(node)
                        continue
                    node.journal.journald(self.wall(), FLUSHING)
                    for line in rng.sample([NVRM_NO_MEMORY, NVRM_IOVA, NVRM_ASSERT],
                                           k=rng.randint(2, 3)):
                        node.journal.kernel(self.wall() + rng.random() * 0.01, line)
                    yield rng.uniform(20.0, 40.0)
                elif some >= 10.0:
                    node.journal.journald(self.wall(), FLUSHING)
                    yield 60.0
                else:
                    return
        finally:
            self._memwatch.pop(node.name, None)

    def _oom_kill(self, node: Node) -> None:
        victims = [c for c in node.docker.running() if isinstance(c.engine, Engine)]
        if not victims:
            return
        victim = max(victims, key=lambda c: node.memory.holdings.get(c.id, 0.0))
        rss_kb = int(node.memory.holdings.get(victim.id, 0.0) / 1024)
        for line in oom_kill_lines(victim.id, victim.pid, rss_kb):
            node.journal.kernel(self.wall(), line)
        assert isinstance(victim.engine, Engine)
        victim.engine.oom_killed()
        node.thrash_onset = None

    async def _on_advance(self, now: float) -> None:
        self._run_to(now)
        self.notify()
        await self.settle()

    async def advance(self, seconds: float) -> None:
        """Manual mode: let `seconds` of simulated time pass."""
        await self.clock.advance(seconds, step=max(1.0, seconds / 500.0))

    def notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = asyncio.Event()

    async def wait_change(self, timeout: float | None = None) -> None:
        if self._changed is None:
            self._changed = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._changed.wait()

    async def wait_until(self, pred: Callable[[], bool]) -> None:
        self.sync()
        while not pred():
            await self.wait_change()
            self.sync()

    # --- I/O tasks ----------------------------------------------------------------
    def spawn_io(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._io.add(task)
        task.add_done_callback(self._io.discard)

    async def settle(self) -> None:
        """Wait for every pending network change (listeners opened or closed)."""
        while self._io:
            await asyncio.gather(*list(self._io), return_exceptions=True)

    def _lock(self, name: str) -> asyncio.Lock:
        return self._locks.setdefault(name, asyncio.Lock())

    # --- start / stop ---------------------------------------------------------------
    async def start(self) -> None:
        self._changed = asyncio.Event()
        if self.clock.manual:
            count_thread_hops(asyncio.get_running_loop())
        private_dir(self.workdir)
        keys = make_client_key(self.workdir / "keys")
        hkeys = host_keys(list(self.nodes), shared=self.spec.shared_host_key)
        for name, node in self.nodes.items():
            self.sshd[name] = NodeSshd(self, node, hkeys[name], keys.authorized)
        await asyncio.gather(*(self._open_node(n) for n in self.nodes))
        write_known_hosts(self.known_hosts_path,
                          [(self.sshd[n].port, hkeys[n]) for n in self.nodes])
        fd = open_private(self.token_file, os.O_WRONLY | os.O_TRUNC)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32))
        self.ha = HomeAssistant(self, self.token_file.read_text(), rng_for(self.spec, "ha"))
        self.ha.fault = self.spec.ha_fault
        self._ha_runner = web.AppRunner(self.ha.app(), handle_signals=False, access_log=None,
                                        shutdown_timeout=0.5)
        await self._ha_runner.setup()
        site = web.TCPSite(self._ha_runner, "127.0.0.1", 0)
        await site.start()
        self.ha_port = self._ha_runner.addresses[0][1]
        for ent in self.spec.entities.values():
            if ent.node and ent.state == "off":
                self.nodes[ent.node].power_off()
                await self._close_node(ent.node)
        place_stale_containers(self)
        if not self.clock.manual:
            self._ticker = asyncio.create_task(self._tick())

    async def _tick(self) -> None:
        while True:
            try:
                self.sync()
            except Exception as exc:  # recorded; the clock keeps the cluster moving
                self.sched.errors.append(("tick", exc))
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        await self.settle()
        await asyncio.gather(*(self._close_node(n) for n in self.nodes))
        if self._ha_runner is not None:
            await self._ha_runner.cleanup()
        _release_prefix(self.api_prefix)

    async def _open_node(self, name: str) -> None:
        async with self._lock(name):
            node = self.nodes[name]
            await self.sshd[name].open()

            async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                writer.close()

            server = await asyncio.start_server(accept, node.api_host,
                                                self.liveness_ports.get(name, 0))
            self._liveness[name] = server
            self.liveness_ports[name] = server.sockets[0].getsockname()[1]

    async def _close_node(self, name: str) -> None:
        async with self._lock(name):
            await self.sshd[name].close()
            server = self._liveness.pop(name, None)
            if server is not None:
                server.close()
                await server.wait_closed()
            for key in [k for k in self._http if k[0] == name]:
                _, runner = self._http.pop(key)
                await runner.cleanup()

    def endpoints(self) -> dict[str, Any]:
        """The endpoints JSON of docs/CONTRACTS.md, written against the reader's own
        definition (adapters/endpoints.SimEndpointsFile)."""
        return SimEndpointsFile(
            nodes={n: SimNodeEntry("127.0.0.1", self.sshd[n].port, self.liveness_ports[n],
                                   self.nodes[n].api_host) for n in self.nodes},
            ha_url=f"http://127.0.0.1:{self.ha_port}", ha_token_file=str(self.token_file),
            client_key=str(self.client_key_path), known_hosts=str(self.known_hosts_path),
            pid=os.getpid()).to_json()

    # --- power ------------------------------------------------------------------------
    def set_power(self, name: str, on: bool) -> None:
        node = self.nodes[name]
        if not on:
            if node.power == "off":
                return
            if node.power == "halted":  # shut down already: the cut is clean
                node.power_off()
                self.notify()
                return
            watch = self._memwatch.pop(name, None)
            self.sched.cancel(watch)
            node.power_off()
            self.spawn_io(self._close_node(name))
        elif node.power == "off":
            node.begin_boot()
            self.sched.spawn(f"{name}/boot", self._boot(node))
        self.notify()

    def _boot(self, node: Node) -> Process:
        yield node.spec.boot_seconds
        if node.power != "booting":
            return
        node.finish_boot()
        self.spawn_io(self._open_node(node.name))

    def shutdown(self, name: str, *, reboot: bool) -> None:
        """``systemctl poweroff`` / ``reboot`` on the node: its SSH and liveness
        go dark after ``SHUTDOWN_SECONDS``; a reboot then boots again."""
        node = self.nodes[name]
        if node.power == "on":
            self.sched.spawn(f"{name}/shutdown", self._shutdown(node, reboot))

    def _shutdown(self, node: Node, reboot: bool) -> Process:
        yield SHUTDOWN_SECONDS
        if node.power != "on":
            return
        self.sched.cancel(self._memwatch.pop(node.name, None))
        node.halt()
        self.spawn_io(self._close_node(node.name))
        if reboot:
            node.begin_boot()
            self.sched.spawn(f"{node.name}/boot", self._boot(node))
        self.notify()

    async def power(self, name: str, on: bool) -> None:
        """Control API: flip the node's plug as Home Assistant would."""
        node = self.nodes[name]
        entity = next((e for e in self.spec.entities.values() if e.node == name), None)
        if entity is not None and self.ha is not None:
            self.ha.switch(entity.entity_id, on)
        else:
            self.set_power(node.name, on)
        await self.settle()

    # --- what engines ask the world -----------------------------------------------------
    def engines(self) -> list[Engine]:
        return [c.engine for n in self.nodes.values() for c in n.docker.containers.values()
                if isinstance(c.engine, Engine)]

    def model_for(self, lane: str, repo: str) -> ModelInfo | None:
        """The model as the NAS has it, with the lane's measured envelope when known."""
        if repo not in self.catalog:
            return None
        profile = self.spec.profiles.get(lane)
        return profile if profile is not None and profile.repo == repo else self.catalog[repo]

    def lane_engines(self, engine: Engine) -> list[Engine]:
        lane = engine.container.labels.get("sparktui.lane")
        cluster = engine.container.labels.get("sparktui.cluster")
        if lane is None:
            return [engine]
        return [e for e in self.engines()
                if e.container.labels.get("sparktui.lane") == lane
                and e.container.labels.get("sparktui.cluster") == cluster]

    def fabric_fault(self, engine: Engine) -> tuple[str, str] | None:
        """Why this lane's NCCL would fail now: a blocking switch off, a bad kernel."""
        cluster = engine.container.labels.get("sparktui.cluster", "")
        for entity in self.spec.cluster_switches.get(cluster, ()):
            ent = self.spec.entities.get(entity)
            if ent is not None and ent.state != "on":
                return ("NET/IB : Got completion from peer with error 12, opcode 0, len 0, "
                        "vendor err 129 (Recv) hca rocep1s0f0",
                        "remote process exited or there was a network error")
        for e in self.lane_engines(engine):
            pinned = e.env.get("NCCL_IB_GID_INDEX")
            if pinned is not None and pinned != str(e.node.spec.gid_index):
                return (f"Call to ibv_modify_qp failed with 61 No data available, on dev "
                        f"rocep1s0f0:1, curr state INIT, next state RTR, local GID index {pinned}",
                        "unhandled system error (run with NCCL_DEBUG=INFO for details)")
            if any(e.node.spec.kernel.startswith(bad) for bad in self.spec.kernel_bad):
                return ("Call to ibv_modify_qp failed with 61 No data available, on dev "
                        "rocep1s0f0:1, curr state INIT, next state RTR, local GID index 3",
                        "unhandled system error (run with NCCL_DEBUG=INFO for details)")
        return None

    def nfs_rate_bytes_per_s(self, engine: Engine) -> float:
        loading = sum(1 for e in self.engines() if e.phase == "loading" and e.node.up)
        mbps = min(self.spec.nfs_link_mbps, self.spec.nas_aggregate_mbps / max(1, loading))
        return mbps * 1e6

    def nvrm_noise(self, node: Node) -> None:
        """NV_ERR_NO_MEMORY lines also appear in successful GB10 engine starts."""
        if self._journal_rng.random() < 0.5:
            node.journal.kernel(self.wall(), NVRM_NO_MEMORY)

    def schedule_http_start(self, engine: Engine) -> None:
        self.spawn_io(self._start_http(engine))

    def schedule_http_stop(self, engine: Engine, *, delay: float) -> None:
        def later() -> Process:
            yield delay
            self.spawn_io(self._stop_http(engine))

        if delay <= 0:
            self.spawn_io(self._stop_http(engine))
        else:
            self.sched.spawn(f"{engine.container.name}/http-stop", later())

    async def _start_http(self, engine: Engine) -> None:
        node = engine.node
        async with self._lock(node.name):
            if not node.up or engine.phase != "ready":
                return
            runner = web.AppRunner(build_app(engine, self.wait_until), handle_signals=False,
                                   shutdown_timeout=0.5,
                                   access_log=None)
            await runner.setup()
            try:
                await web.TCPSite(runner, node.api_host, engine.args.port).start()
            except OSError as exc:
                await runner.cleanup()
                engine.log(f"ERROR:    [Errno {exc.errno}] error while attempting to bind on "
                           f"address ('{engine.args.host}', {engine.args.port}): "
                           "address already in use", "stderr")
                engine.stop(kill=True)
                return
            self._http[(node.name, engine.args.port)] = (engine, runner)

    async def _stop_http(self, engine: Engine) -> None:
        async with self._lock(engine.node.name):
            key = (engine.node.name, engine.args.port)
            entry = self._http.get(key)
            if entry is not None and entry[0] is engine:
                del self._http[key]
                await entry[1].cleanup()

    def new_container_id(self) -> str:
        return "".join(self.rng.choice("0123456789abcdef") for _ in range(64))

    def random_name(self) -> str:
        return f"{self.rng.choice(_NAMES)}_{self.rng.choice(_SURNAMES)}"

    # --- control API for tests -------------------------------------------------------------
    def lane_rank0(self, lane: str) -> Engine:
        for e in self.engines():
            if e.container.labels.get("sparktui.lane") == lane and e.rank == 0 \
                    and e.container.status == "running":
                return e
        raise KeyError(f"no running rank 0 of lane {lane!r}")

    def run_prompt(self, lane: str, prompt_tokens: int, max_tokens: int = 16) -> Request:
        """Send a prompt of `prompt_tokens` tokens to the lane (as a chat request would)."""
        req = self.lane_rank0(lane).submit(prompt_tokens, max_tokens)
        self.notify()
        return req

    def set_scenario(self, name: str) -> None:
        """Turn the running world into another scenario's: kernels, cache paths,
        NAS mounts, images, system memory, shared switches, NAS speed, leftovers.
        Node power and running containers stay; a shared host key cannot change live."""
        fresh = apply_scenario(copy.deepcopy(self._pristine), name)
        for ns in fresh.nodes:
            node = self.nodes[ns.name]
            old = node.spec
            node.spec = ns
            node.memory.os_gib += ns.extra_os_gib - old.extra_os_gib
            node.docker.images = {img.ref: img for img in ns.images}
            node.rebuild_fs()
        for entity, ent in fresh.entities.items():
            if not ent.node:
                self.spec.entities[entity].state = ent.state
        self.spec.nas_aggregate_mbps = fresh.nas_aggregate_mbps
        self.spec.engine_core_dies_after_s = fresh.engine_core_dies_after_s
        self.spec.engine_core_exits_after_s = fresh.engine_core_exits_after_s
        self.spec.reclaim_stall_s = fresh.reclaim_stall_s
        self.spec.garbling = fresh.garbling
        self.spec.dialect = fresh.dialect  # engines started from now on speak it
        self.spec.stale_containers = fresh.stale_containers
        self.spec.scenario = name
        place_stale_containers(self)
        self.notify()

    def inject(self, fault: str, target: str = "") -> None:
        """Faults that are not consequences of the model: ``ha-500``, ``ha-hang``,
        ``ha-502-echo`` (a proxy echoing the request headers),
        ``ha-ok``, ``unavailable`` (entity), ``available`` (entity)."""
        assert self.ha is not None
        if fault in ("ha-500", "ha-hang", "ha-502-echo", "ha-ok"):
            self.ha.fault = {"ha-500": "500", "ha-hang": "hang", "ha-502-echo": "502-echo",
                             "ha-ok": ""}[fault]
        elif fault in ("unavailable", "available"):
            self.spec.entities[target].state = "unavailable" if fault == "unavailable" else "on"
        else:
            raise ValueError(f"unknown fault {fault!r}")
        self.notify()
