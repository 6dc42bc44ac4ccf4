"""The poller against scripted node transports, on the simulator's manual clock."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sparktui.adapters.endpoints import Endpoints, NodeEndpoint
from sparktui.adapters.homeassistant import SwitchState
from sparktui.adapters.ssh import AuthError, HostKeyError, LoginStalled, ProbeStalled
from sparktui.core.config import (
    ClusterConfig,
    Config,
    ConsoleConfig,
    HomeAssistantConfig,
    NodeConfig,
)
from sparktui.core.errors import RemoteError
from sparktui.core.state import NodeSnapshot, NodeState, ProbeTier
from sparktui.core.thrash import ThrashLevel, ThrashRules
from sparktui.sim.clock import SimClock
from sparktui.watch.poller import Poller
from sparktui.watch.thrash import node_verdict, sample_of


def probe_output(avail_kib: int, full_avg10: float = 0.0) -> str:
    return (
        "@@meminfo\nMemTotal:       127600748 kB\n"
        f"MemAvailable:   {avail_kib} kB\n@@rc 0\n"
        "@@psi\nsome avg10=1.00 avg60=0.00 avg300=0.00 total=5\n"
        f"full avg10={full_avg10:.2f} avg60=0.00 avg300=0.00 total=3\n@@rc 0\n@@end\n"
    )


SLOW_OUTPUT = ("@@kernel\n6.17.0-1031-nvidia\n@@rc 0\n@@mounts\n@@rc 0\n@@df\n@@rc 0\n"
               '@@containers\n{"Names":"vllm_x","State":"running","Status":"Up 5 minutes"}\n'
               "@@rc 0\n@@images\n@@rc 0\n@@end\n")


def make_config(names: list[str], interval: float = 2.0) -> Config:
    nodes = {
        n: NodeConfig(
            name=n, rank=i, host=n, user="op", ib_ip="10.0.0.1", switch=f"switch.{n}", role="test"
        )
        for i, n in enumerate(names)
    }
    return Config(
        path=Path("config.toml"),
        nodes=nodes,
        clusters={"all": ClusterConfig("all", tuple(names))},
        switches={},
        nccl={},
        home_assistant=HomeAssistantConfig(url="http://127.0.0.1:1"),
        console=ConsoleConfig(poll_interval_s=interval, probe_timeout_s=3.0),
    )


def make_endpoints(names: list[str]) -> Endpoints:
    return Endpoints(
        {
            n: NodeEndpoint(n, "127.0.0.1", 22, "op", "kh", (), (), "tcp", "127.0.0.1", 1, "x")
            for n in names
        },
        "http://127.0.0.1:1",
        "token",
        simulated=True,
    )


class FakeNode:
    """A node transport whose behaviour the test switches; time passes on the clock."""

    def __init__(self, clock: SimClock, name: str) -> None:
        self.clock = clock
        self.name = name
        self.mode = "ok"
        self.duration = 0.1
        self.avail_kib = 60_000_000
        self.calls = 0
        """Fast-tier probes (one per tick)."""
        self.slow_calls = 0
        self.in_flight = 0
        self.max_in_flight = 0

    async def probe(self, script: str, timeout: float) -> str:
        assert script.startswith(": sparktui-probe")
        slow = "@@containers" in script
        if slow:
            self.slow_calls += 1
        else:
            self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.mode == "stall" or (slow and self.mode == "docker-hangs"):
                await self.clock.sleep(timeout)
                raise ProbeStalled(self.name, "probe", f"shell did not answer within {timeout} s")
            await self.clock.sleep(self.duration)
            if self.mode == "refused":
                raise RemoteError(self.name, "connect", "ConnectionRefusedError")
            if self.mode == "hostkey":
                raise HostKeyError(self.name, "changed", "HOST KEY CHANGED")
            if self.mode == "login-stalls":
                raise LoginStalled(self.name, "connect", "the login shell did not start")
            if self.mode == "auth":
                raise AuthError(self.name, "connect", "authentication refused")
            return SLOW_OUTPUT if slow else probe_output(self.avail_kib)
        finally:
            self.in_flight -= 1


class FakeFleet:
    def __init__(self, clock: SimClock, names: list[str]) -> None:
        self.nodes = {n: FakeNode(clock, n) for n in names}

    def get(self, name: str) -> FakeNode:
        return self.nodes[name]


class World:
    def __init__(self, names: list[str], **poller_kw: object) -> None:
        self.clock = SimClock()
        self.fleet = FakeFleet(self.clock, names)
        self.alive = dict.fromkeys(names, True)
        self.powered: dict[str, bool | None] = dict.fromkeys(names, True)

        async def liveness(ep: NodeEndpoint, timeout: float) -> bool:
            return self.alive[ep.name]

        async def power(name: str) -> SwitchState | None:
            on = self.powered[name]
            return SwitchState(f"switch.{name}", "unavailable" if on is None
                               else "on" if on else "off", "2026-11-29T22:00:00+00:00")

        self.poller = Poller(
            make_config(names),
            self.fleet,
            make_endpoints(names),
            clock=self.clock,
            liveness=liveness,
            power=power,
            **poller_kw,  # type: ignore[arg-type]
        )

    async def round(self) -> dict[str, NodeSnapshot]:
        task = asyncio.create_task(self.poller.poll_round())
        while not task.done():
            await self.clock.advance(0.5)
        return {s.node: s for s in task.result().nodes}


NAMES = ["dgx1", "dgx2", "dgx3", "dgx4", "dgx5"]


async def test_each_state_is_classified() -> None:
    w = World(NAMES)
    w.fleet.nodes["dgx2"].mode = "stall"  # thrash: ping answers, shell does not
    w.fleet.nodes["dgx3"].mode = "refused"
    w.alive["dgx3"] = False
    w.fleet.nodes["dgx4"].mode = "refused"
    w.powered["dgx4"] = False
    w.fleet.nodes["dgx5"].mode = "hostkey"
    snaps = await w.round()
    assert {n: s.state for n, s in snaps.items()} == {
        "dgx1": NodeState.ONLINE,
        "dgx2": NodeState.STARVED,
        "dgx3": NodeState.UNREACHABLE,
        "dgx4": NodeState.POWERED_OFF,
        "dgx5": NodeState.UNKNOWN,
    }
    assert snaps["dgx1"].probe is not None and snaps["dgx1"].probe.meminfo is not None
    assert snaps["dgx1"].probe_latency_s == pytest.approx(0.1)
    assert snaps["dgx2"].stalled and "did not answer" in snaps["dgx2"].error
    assert snaps["dgx5"].error == "dgx5: 'connect': HOST KEY CHANGED"
    assert all(s.taken_at >= w.clock.epoch for s in snaps.values())


async def test_one_failed_login_with_ping_is_not_starved_two_are() -> None:
    """Starved means a stalled established shell, or failures in a row: a
    single connect/login failure (a slow .bashrc, a refused connect) is not."""
    w = World(["dgx1"])
    w.fleet.nodes["dgx1"].mode = "refused"
    first = (await w.round())["dgx1"]
    assert first.state is NodeState.UNKNOWN and not first.stalled
    assert "ConnectionRefusedError" in first.error
    second = (await w.round())["dgx1"]
    assert second.state is NodeState.STARVED and second.consecutive_failures == 2


async def test_a_session_whose_login_shell_never_answers_is_starved() -> None:
    w = World(["dgx1"])
    w.fleet.nodes["dgx1"].mode = "login-stalls"
    snap = (await w.round())["dgx1"]
    assert snap.state is NodeState.STARVED and "login shell" in snap.error


async def test_auth_failure_is_unknown_not_starved() -> None:
    w = World(["dgx1"])
    w.fleet.nodes["dgx1"].mode = "auth"
    assert (await w.round())["dgx1"].state is NodeState.UNKNOWN


async def test_answering_node_is_online_even_if_plug_says_off() -> None:
    w = World(["dgx1"])
    w.powered["dgx1"] = False
    snap = (await w.round())["dgx1"]
    assert snap.state is NodeState.ONLINE and snap.powered is False


async def test_power_source_failure_means_unknown_power() -> None:
    w = World(["dgx1"])

    async def broken(name: str) -> SwitchState | None:
        raise OSError("HA unreachable")

    w.poller._power = broken
    w.fleet.nodes["dgx1"].mode = "stall"
    snap = (await w.round())["dgx1"]
    assert snap.powered is None and snap.state is NodeState.STARVED


async def test_failures_counted_and_last_ok_kept_until_recovery() -> None:
    w = World(["dgx1"])
    ok = (await w.round())["dgx1"]
    w.fleet.nodes["dgx1"].mode = "stall"
    first = (await w.round())["dgx1"]
    second = (await w.round())["dgx1"]
    assert (first.consecutive_failures, second.consecutive_failures) == (1, 2)
    assert second.last_ok_at == ok.taken_at
    w.fleet.nodes["dgx1"].mode = "ok"
    back = (await w.round())["dgx1"]
    assert back.state is NodeState.ONLINE and back.consecutive_failures == 0
    assert back.last_ok_at == back.taken_at


async def test_loops_never_overlap_and_a_slow_node_delays_only_itself() -> None:
    w = World(["fast", "slow"])
    w.fleet.nodes["slow"].duration = 5.0  # longer than the 2 s interval
    w.poller.start()
    try:
        await w.clock.advance(20.0, step=0.25)
    finally:
        await w.poller.stop()
    fast, slow = w.fleet.nodes["fast"], w.fleet.nodes["slow"]
    assert fast.max_in_flight == 1 and slow.max_in_flight == 1
    # each poll schedules the next when it ends: 20 s / 2 s ticks, and probes
    # of 5 s each (a tick that reads the slow tier too makes two)
    assert 10 <= fast.calls <= 11
    assert 4 <= slow.calls + slow.slow_calls <= 5
    # the slow tier: on the first tick, then every slow_probe_interval_s (15 s)
    assert fast.slow_calls == 2 and slow.slow_calls >= 1


async def test_stop_cancels_every_loop() -> None:
    w = World(NAMES)
    w.poller.start()
    await w.clock.advance(1.0)
    await w.poller.stop()
    calls = sum(n.calls for n in w.fleet.nodes.values())
    await w.clock.advance(10.0)
    assert sum(n.calls for n in w.fleet.nodes.values()) == calls
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("poll:")]


async def test_history_is_bounded_and_only_from_good_probes() -> None:
    w = World(["dgx1"], history_len=3)
    for avail in (50, 40, 30, 20):
        w.fleet.nodes["dgx1"].avail_kib = avail
        await w.round()
    w.fleet.nodes["dgx1"].mode = "stall"
    await w.round()
    points = w.poller.history("dgx1")
    assert [p.mem_available_kib for p in points] == [40, 30, 20]
    assert points[-1].psi_full_avg10 == 0.0 and points[-1].psi_some_avg10 == 1.0
    assert points[0].t < points[-1].t


async def test_subscribers_get_every_snapshot_and_a_full_queue_keeps_the_newest() -> None:
    w = World(["dgx1", "dgx2"])
    q = w.poller.subscribe()
    small = w.poller.subscribe(maxsize=2)
    await w.round()
    await w.round()
    got = [q.get_nowait() for _ in range(q.qsize())]
    assert sorted(s.node for s in got) == ["dgx1", "dgx1", "dgx2", "dgx2"]
    newest = [small.get_nowait() for _ in range(small.qsize())]
    assert newest == got[-2:]


async def test_snapshot_before_first_poll_is_unknown() -> None:
    w = World(["dgx1", "dgx2"])
    snap = w.poller.snapshot()
    assert [s.state for s in snap.nodes] == [NodeState.UNKNOWN, NodeState.UNKNOWN]
    assert snap.get("dgx2") is not None and snap.get("nope") is None


async def test_a_round_during_the_loops_never_doubles_a_probe() -> None:
    w = World(["dgx1"])
    w.fleet.nodes["dgx1"].duration = 1.5
    w.poller.start()
    try:
        await w.clock.advance(0.5)
        await w.round()
        await w.clock.advance(5.0)
    finally:
        await w.poller.stop()
    assert w.fleet.nodes["dgx1"].max_in_flight == 1


async def test_liveness_that_cannot_run_is_unknown_and_says_why() -> None:
    w = World(["dgx1"])

    async def no_ping(ep: NodeEndpoint, timeout: float) -> bool:
        raise OSError("cannot run 'ping': install iputils-ping")

    w.poller._liveness = no_ping
    w.fleet.nodes["dgx1"].mode = "stall"
    snap = (await w.round())["dgx1"]
    assert snap.state is NodeState.UNKNOWN and snap.liveness is None
    assert snap.error.endswith("liveness check failed: cannot run 'ping': install iputils-ping")
    w.fleet.nodes["dgx1"].mode = "ok"
    assert (await w.round())["dgx1"].state is NodeState.ONLINE  # SSH answering is enough


async def test_fast_ticks_carry_the_slow_tier_read_every_interval() -> None:
    w = World(["dgx1"])
    w.poller.start()
    snaps: list[NodeSnapshot] = []
    queue = w.poller.subscribe()
    try:
        await w.clock.advance(17.0, step=0.25)
    finally:
        await w.poller.stop()
    while not queue.empty():
        snaps.append(queue.get_nowait())
    tiers = [s.probe.tier for s in snaps if s.probe]
    assert tiers[0] is ProbeTier.FULL and tiers.count(ProbeTier.FULL) == 2
    assert all(s.probe and [c.name for c in s.probe.containers] == ["vllm_x"] for s in snaps)
    assert all(s.probe and s.probe.kernel == "6.17.0-1031-nvidia" for s in snaps)
    assert all(s.probe and not any(p.startswith(("slow tier", "kernel", "containers"))
                                   for p in s.probe.problems) for s in snaps)


async def test_the_plug_and_liveness_are_asked_with_the_slow_tier_and_when_the_node_stops_answering(
        ) -> None:
    """An answering node's fast ticks carry the last plug state and liveness
    (no Home Assistant request, no ping); the tick on which it stops answering
    asks both, so a node switched off shows as powered off on that very tick."""
    w = World(["dgx1"])
    asked: list[float] = []
    pinged: list[float] = []
    ask, ping = w.poller._power, w.poller._liveness

    async def counted(name: str) -> bool | None:
        asked.append(w.clock.monotonic())
        return await ask(name)  # type: ignore[misc]

    async def counted_ping(ep: NodeEndpoint, timeout: float) -> bool:
        pinged.append(w.clock.monotonic())
        return await ping(ep, timeout)

    w.poller._power = counted
    w.poller._liveness = counted_ping
    w.poller.start()
    queue = w.poller.subscribe()
    try:
        await w.clock.advance(17.0, step=0.25)  # ~9 ticks, two of them slow
        ticks = queue.qsize()
        assert len(asked) == 2 and pinged == asked and ticks >= 8, (asked, pinged, ticks)
        while not queue.empty():
            snap = queue.get_nowait()
            assert snap.powered is True and snap.liveness is True  # carried on the fast ticks
        w.fleet.nodes["dgx1"].mode = "refused"
        w.alive["dgx1"] = False
        w.powered["dgx1"] = False
        while queue.empty():
            await w.clock.advance(0.25)
        snap = queue.get_nowait()
        assert snap.state is NodeState.POWERED_OFF and snap.powered is False
        assert snap.liveness is False
        assert len(asked) == 3 and len(pinged) == 3
        await w.clock.advance(4.0, step=0.25)  # still down: asked beside each probe
        assert len(asked) >= 4 and len(pinged) == len(asked)
    finally:
        await w.poller.stop()


async def test_a_node_that_stops_answering_is_classified_when_its_probe_times_out(
        ) -> None:
    """The plug and liveness of a node that answered its last poll are asked
    once the probe is late, and overlap the rest of its wait: a slow Home
    Assistant or ping does not delay the starved verdict past the probe
    timeout."""
    w = World(["dgx1"])
    ask, ping = w.poller._power, w.poller._liveness

    async def slow(name: str) -> bool | None:
        await w.clock.sleep(2.0)
        return await ask(name)  # type: ignore[misc]

    async def slow_ping(ep: NodeEndpoint, timeout: float) -> bool:
        await w.clock.sleep(1.0)
        return await ping(ep, timeout)

    await w.round()  # answering, plug read (slow tier)
    w.poller._power = slow
    w.poller._liveness = slow_ping
    w.fleet.nodes["dgx1"].mode = "stall"
    started = w.clock.monotonic()
    task = asyncio.create_task(w.poller.poll_node("dgx1", ProbeTier.FAST))
    while not task.done():
        await w.clock.advance(0.25)
    snap = task.result()
    assert snap.state is NodeState.STARVED and snap.powered is True
    assert w.clock.monotonic() - started <= w.poller.probe_timeout_s + 0.25


async def test_a_hanging_docker_is_not_a_starved_node() -> None:
    """The slow tier runs as its own script after the fast one answered: a
    docker that hangs keeps the node online with the last slow fields."""
    w = World(["dgx1"])
    first = (await w.round())["dgx1"]
    w.fleet.nodes["dgx1"].mode = "docker-hangs"
    snap = (await w.round())["dgx1"]
    assert snap.state is NodeState.ONLINE and not snap.stalled
    assert snap.probe is not None and snap.probe.tier is ProbeTier.FAST
    assert snap.probe.containers == first.probe.containers  # type: ignore[union-attr]
    assert any(p.startswith("slow tier: shell did not answer") for p in snap.probe.problems)
    verdict = node_verdict(snap)
    assert verdict.level is ThrashLevel.OK and verdict.failed_probes == 0
    rules = ThrashRules("dgx1")
    sample = sample_of(snap)
    assert sample is not None and sample.probe_ok and sample.slow_tier_error
    rules.add_sample(sample)
    assert any("not an SSH stall" in e for e in rules.verdict(snap.taken_at).evidence)


async def test_refresh_reads_the_slow_tier_on_the_next_tick() -> None:
    w = World(["dgx1"])
    w.poller.start()
    try:
        await w.clock.advance(5.0, step=0.25)
        assert w.fleet.nodes["dgx1"].slow_calls == 1
        w.poller.refresh("dgx1")
        w.poller.refresh("not-a-node")
        await w.clock.advance(2.5, step=0.25)
    finally:
        await w.poller.stop()
    assert w.fleet.nodes["dgx1"].slow_calls == 2


async def test_a_poll_asked_for_during_a_failing_one_takes_its_answer() -> None:
    """The node's loop is waiting out a stalled shell when a workflow's check
    (a recover confirm) polls it: the check gets that poll's verdict when it
    ends, not a second wait of its own; a node that answers is read again."""
    w = World(["dgx1"])
    node = w.fleet.nodes["dgx1"]
    node.mode = "stall"
    first = asyncio.create_task(w.poller.poll_node("dgx1"))
    await w.clock.advance(1.0)  # the first probe is waiting out its 3 s timeout
    second = asyncio.create_task(w.poller.poll_node("dgx1"))
    while not second.done():
        await w.clock.advance(0.25)
    assert first.done() and second.result() is first.result()
    assert second.result().state is NodeState.STARVED
    assert node.calls == 1 and w.clock.monotonic() < 5.0  # one 3 s timeout, not two
    node.mode = "ok"
    first = asyncio.create_task(w.poller.poll_node("dgx1"))
    await w.clock.advance(0.05)
    second = asyncio.create_task(w.poller.poll_node("dgx1"))
    while not second.done():
        await w.clock.advance(0.25)
    assert first.result().state is second.result().state is NodeState.ONLINE
    assert node.calls == 3 and second.result() is not first.result()


async def test_a_poll_asked_for_after_a_workflow_step_reads_the_node_again() -> None:
    """A power cycle's re-check once SSH answered: the loop's poll in flight
    began while the node was still off, and its failure says nothing of the
    node now. The step on the node (`refresh`) makes the check read it anew."""
    w = World(["dgx1"])
    node = w.fleet.nodes["dgx1"]
    node.mode = "stall"  # no answer until the probe's timeout
    w.powered["dgx1"] = False
    first = asyncio.create_task(w.poller.poll_node("dgx1"))
    await w.clock.advance(1.0)  # the poll has read the plug (off), its probe waits
    w.powered["dgx1"] = True  # the cycle's plug on, the node boots, SSH answers
    node.mode = "ok"  # (the probe in flight still waits out its timeout)
    w.poller.refresh("dgx1")  # the workflow's step finished on it
    second = asyncio.create_task(w.poller.poll_node("dgx1"))
    while not second.done():
        await w.clock.advance(0.25)
    assert first.result().state is NodeState.POWERED_OFF
    assert second.result().state is NodeState.ONLINE


async def test_a_carried_container_list_keeps_the_time_it_was_asked_for() -> None:
    """A fast tick carries the slow tier's containers, and with them the time
    that list was asked for, not its own: a lane another process stopped is
    listed running until the next slow read, and a list from before a rank's
    exit must not read as one taken after it (a stopped lane then looked
    served again, and its new watcher took the stop's exits for deaths)."""
    w = World(["dgx1"])
    w.fleet.nodes["dgx1"].duration = 0.5
    w.poller.start()
    queue = w.poller.subscribe()
    try:
        await w.clock.advance(20.0, step=0.25)
    finally:
        await w.poller.stop()
    snaps = []
    while not queue.empty():
        snaps.append(queue.get_nowait())
    full = [s for s in snaps if s.probe and s.probe.tier is ProbeTier.FULL]
    fast = [s for s in snaps if s.probe and s.probe.tier is ProbeTier.FAST]
    assert len(full) >= 2 and fast
    for s in full:  # asked after the fast script answered, before its own answer came
        assert s.containers_at is not None
        assert s.taken_at - 0.5 - 1e-6 <= s.containers_at < s.taken_at
    for s in fast:
        carried = max(f.containers_at for f in full if f.taken_at <= s.taken_at)  # type: ignore[type-var]
        assert s.containers_at == carried and s.listed_since() < s.taken_at - 1.0
