"""Consoles attached to the sentinel, against the simulator (manual clock):
the sentinel alone lives through the 22:45 long prompt (thrash alert,
recording, phone alert); two consoles started afterwards show the night's
history and the live state with no second poller (the simulated sshd sees
one probe shell per node, and one poller's worth of probes), both with the
same alerts; a sentinel that dies is said so, and the console then polls
the nodes itself."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sparktui.adapters.endpoints import resolve_endpoints
from sparktui.core.state import NodeState
from sparktui.service.attach import socket_path
from sparktui.service.cluster import ClusterService
from sparktui.service.events import (
    AlertRaised,
    LaneChanged,
    NodeSampled,
    ServiceEvent,
)
from sparktui.service.recorded import read_recording
from sparktui.service.recording import RECORDING_DIR
from sparktui.service.sentinel import Sentinel

from .simnight import (
    PACE,
    advance_until,
    boot_unwatched,
    night,
    phase,
    sentinel_process,
    state_in,
    with_phone,
)

LANE = "glm53-mxfp4-fp8-4x-r39-196k"
ROOT = Path(__file__).resolve().parents[2]


class Console:
    def __init__(self, service: ClusterService) -> None:
        self.service = service
        self.events: list[ServiceEvent] = []

    def alerts(self, prefix: str) -> list[AlertRaised]:
        return [e for e in self.events
                if isinstance(e, AlertRaised) and e.alert.key.startswith(prefix)]

    def samples(self) -> int:
        return sum(isinstance(e, NodeSampled) for e in self.events)


async def delivered_alike(consoles: list[Console], real_s: float = 5.0) -> None:
    """Wait (real time) until every console has read the same samples off its
    socket: the sentinel writes to each client in turn, so at any instant one
    console may be a sample ahead of the other."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + real_s
    while len({c.samples() for c in consoles}) > 1 and loop.time() < deadline:
        await asyncio.sleep(0.01)


async def test_consoles_attach_to_the_sentinel_instead_of_polling(tmp_path: Path) -> None:
    async with night(tmp_path, "long-prompt", "4nodes-switch-b", start=False,
                     poll_interval_s=20.0) as n:
        with_phone(n)
        nodes = list(n.config.nodes)
        state_dir = n.config.state_dir()
        lines: list[str] = []
        sentinel = Sentinel(n.config, n.service, clock=n.sim.clock,
                            emit=lambda p, text: lines.append(text))
        await boot_unwatched(n, LANE)
        stop = asyncio.Event()
        task = asyncio.create_task(sentinel.run(stop))
        consoles: list[Console] = []
        try:
            # -- the night with no console ------------------------------------------
            await advance_until(n, lambda: phase(n, LANE) == "serving", step=5.0,
                                max_sim_s=120, why=lambda: phase(n, LANE))
            assert oct(socket_path(state_dir).stat().st_mode & 0o777) == "0o600"
            n.sim.run_prompt(LANE, 150_000)
            await advance_until(n, lambda: any(t.startswith("ALERT thrash") for t in lines)
                                and phase(n, LANE) == "failed", step=2.0, max_sim_s=900,
                                pace=PACE,
                                why=lambda: "\n".join(lines[-10:]))
            assert n.sim.ha is not None
            await advance_until(n, lambda: bool(n.sim.ha.notifications), step=2.0,  # type: ignore[union-attr]
                                max_sim_s=120)

            # -- two consoles attach ------------------------------------------------
            shells = {node: n.sim.nodes[node].probe_shells for node in nodes}
            probes = {node: n.sim.nodes[node].probes for node in nodes}
            assert all(shells.values()), shells  # the sentinel's poller
            endpoints = resolve_endpoints(n.config)
            for _ in range(2):
                c = Console(ClusterService(n.config, clock=n.sim.clock, endpoints=endpoints,
                                           sentinel=socket_path(state_dir)))
                await c.service.start(c.events.append)
                consoles.append(c)
            first, second = consoles
            assert first.service.attached.startswith("attached to sentinel (pid ")
            # what the sentinel saw after the consoles' snapshot (a rank's container
            # exiting) reaches them as events: the same lane once delivered
            await advance_until(n, lambda: all(
                c.alerts("thrash:") and LANE in c.service.lanes()
                and c.service.lanes()[LANE].ranks == n.service.lanes()[LANE].ranks
                for c in consoles), step=1.0, max_sim_s=10)
            # the incident's history, as the sentinel saw it (phone alert marked)
            for c in consoles:
                keys = {e.alert.key for e in c.alerts("thrash:")}
                assert keys <= {f"thrash:{node}" for node in nodes} and keys, keys
                assert c.service.lanes()[LANE].ranks == n.service.lanes()[LANE].ranks
                assert c.service.lanes()[LANE].phase == "failed"
                assert any(e.alert.notified for e in c.alerts(""))
                assert {a.key for a in c.service.alerts()} == \
                    {a.key for a in n.service.alerts()}
                assert all(s.state is not NodeState.UNKNOWN
                           for s in c.service.snapshot().nodes)
                assert c.service.history(nodes[0])
            # the live state, with no second poller
            await delivered_alike(consoles)
            before = [c.samples() for c in consoles]
            window = 100.0
            t0 = n.sim.clock.monotonic()
            while n.sim.clock.monotonic() - t0 < window:
                await n.sim.clock.advance(5.0, step=5.0)
                await asyncio.sleep(0.02)
            assert all(c.samples() > b for c, b in zip(consoles, before, strict=True))
            answering = [node for node in nodes if not n.sim.nodes[node].thrashing
                         and n.sim.nodes[node].power == "on"]
            assert answering
            console = n.config.console
            one_poller = window / console.poll_interval_s + window / console.slow_probe_interval_s
            for node in answering:
                assert n.sim.nodes[node].probe_shells == shells[node], node
                polled = n.sim.nodes[node].probes - probes[node]
                assert 1 <= polled <= one_poller + 2, (node, polled, one_poller)
            await delivered_alike(consoles)  # a sample still on its way to one of them
            assert first.samples() - before[0] == second.samples() - before[1]

            # -- the sentinel dies --------------------------------------------------
            assert sentinel.hub._server is not None
            sentinel.hub._server.close()  # nobody answers at the socket any more
            for client in list(sentinel.hub._clients.values()):
                client.writer.transport.abort()  # killed: no goodbye
            await advance_until(n, lambda: all(c.alerts("sentinel:") for c in consoles),
                                step=1.0, max_sim_s=10)
            lost = first.alerts("sentinel:")[0].alert
            assert "closed its socket" in lost.evidence[0]
            assert "polls the nodes itself" in lost.evidence[0]
            assert not first.service.attached
            polled_alone = first.samples()
            await advance_until(n, lambda: first.samples() > polled_alone + len(answering),
                                step=5.0, max_sim_s=120)
            for node in answering:
                assert n.sim.nodes[node].probe_shells > shells[node]  # its own poller now
        finally:
            for c in consoles:
                await c.service.stop()
            stop.set()
            await asyncio.wait_for(task, 60)
        recorded = [ev for path in (state_dir / RECORDING_DIR).glob("*.jsonl.gz")
                    for _, ev in read_recording(path)]
        assert any(isinstance(ev, AlertRaised) and ev.alert.key.startswith("thrash:")
                   for ev in recorded)
        assert any(isinstance(ev, LaneChanged) for ev in recorded)


async def test_a_killed_sentinel_process_is_said_so_and_the_console_polls(
        tmp_path: Path, config_copy) -> None:  # type: ignore[no-untyped-def]
    """`sparktui sentinel` as its own process, SIGKILLed (no goodbye): the
    attached console says so at once and starts its own poller."""
    async with sentinel_process(tmp_path, config_copy(state_in(tmp_path))) as sp:
        config, sim, proc = sp.config, sp.sim, sp.proc
        assert proc.stdout is not None
        c = Console(ClusterService(config, clock=sim.clock, endpoints=resolve_endpoints(config),
                                   sentinel=socket_path(config.state_dir())))
        try:
            async with asyncio.timeout(60):
                while "consoles attach at" not in (await proc.stdout.readline()).decode():
                    pass
            await c.service.start(c.events.append)
            assert c.service.attached == f"attached to sentinel (pid {proc.pid})"
            async with asyncio.timeout(30):
                while not c.samples():
                    await asyncio.sleep(0.05)
            shells = {n: sim.nodes[n].probe_shells for n in config.nodes}
            proc.kill()
            await proc.wait()
            async with asyncio.timeout(10):
                while not c.alerts("sentinel:"):
                    await asyncio.sleep(0.05)
            lost = c.alerts("sentinel:")[0].alert
            assert lost.evidence[0].startswith(f"the sentinel (pid {proc.pid}) closed its socket")
            assert not c.service.attached
            async with asyncio.timeout(30):
                while not all(sim.nodes[n].probe_shells > shells[n] for n in config.nodes):
                    await asyncio.sleep(0.05)  # its own poller opened its own shells
        finally:
            await c.service.stop()
