"""The thrash detector over real snapshot objects and journal lines."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.state import MemInfo, NodeSnapshot, NodeState, ProbeResult, Psi, PsiLine
from sparktui.core.thrash import RETURN_GRACE_S, ThrashLevel, ThrashVerdict
from sparktui.watch.thrash import ThrashDetector, assess_nodes, node_verdict, sample_of

TOTAL = 127_600_748
GIB = 1024 * 1024
NVRM = ("2026-11-29T14:37:01.000001+0000 dgx1 kernel: NVRM: nvCheckOkFailedNoLog: Check failed: "
        "Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned from "
        "_memdescAllocInternal(pMemDesc) @ mem_desc.c:1359\n")
PRESSURE = ("2026-11-29T14:37:02.000001+0000 dgx1 systemd-journald[412]: Under memory pressure, "
            "flushing caches.\n")


class Clock:
    def __init__(self, t: float = 1.8e9) -> None:
        self.t = t

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += seconds
        await asyncio.sleep(0)


def online(node: str, t: float, *, avail_gib: float = 60, some: float = 0.0, full: float = 0.0,
           total_us: int = 0) -> NodeSnapshot:
    probe = ProbeResult(
        meminfo=MemInfo(TOTAL, int(avail_gib * GIB)),
        psi=Psi(PsiLine(some, some, some, total_us * 2), PsiLine(full, full, full, total_us)),
        docker_ok=True, uptime_s=1000.0 + t,
    )
    return NodeSnapshot(node, NodeState.ONLINE, t, probe=probe, liveness=True)


def starved(node: str, t: float) -> NodeSnapshot:
    return NodeSnapshot(node, NodeState.STARVED, t, error="probe: shell did not answer",
                        liveness=True, stalled=True, consecutive_failures=1)


def test_sample_of_reads_meminfo_and_psi() -> None:
    s = sample_of(online("dgx1", 5.0, avail_gib=2, some=30, full=12, total_us=999))
    assert s is not None and s.probe_ok and s.ping_ok
    assert (s.mem_available_kib, s.mem_total_kib) == (2 * GIB, TOTAL)
    assert (s.psi_some_avg10, s.psi_full_avg10, s.psi_full_total_us) == (30, 12, 999)
    assert s.uptime_s == 1005.0
    s2 = sample_of(starved("dgx1", 7.0))
    assert s2 is not None and not s2.probe_ok and s2.ping_ok
    assert sample_of(NodeSnapshot("dgx1", NodeState.UNKNOWN, 1.0, error="auth")) is None


def test_boot_d_signature_flags_thrash_on_the_first_starved_poll() -> None:
    clock = Clock()
    changes: list[ThrashVerdict] = []
    det = ThrashDetector(clock=clock, on_change=changes.append)
    nodes = ["dgx1", "dgx2", "dgx3", "dgx4"]
    for i in range(10):  # eager load eats memory
        clock.t += 2
        for n in nodes:
            det.on_snapshot(online(n, clock.t, avail_gib=40 - i * 4, some=3.0 * i, full=i))
    for n in nodes:
        det.on_line(n, NVRM)
        det.on_line(n, PRESSURE)
    clock.t += 2
    verdicts = [det.on_snapshot(starved(n, clock.t)) for n in nodes]
    assert all(v.level is ThrashLevel.THRASH for v in verdicts)
    assert {v.node for v in changes if v.level is ThrashLevel.THRASH} == set(nodes)
    v = det.verdict("dgx3")
    assert any("ping answers, SSH probe failed" in e for e in v.evidence)
    assert any("Under memory pressure" in e for e in v.evidence)
    assert "SSH retry 1/3" in v.next_step


def test_normal_load_on_a_node_does_not_alarm() -> None:
    clock = Clock()
    det = ThrashDetector(clock=clock)
    for i in range(100):
        clock.t += 2
        det.on_snapshot(online("dgx5", clock.t, avail_gib=max(12.0, 100 - i), some=4.0,
                               total_us=i * 10_000))
        if i % 10 == 0:
            det.on_line("dgx5", NVRM)
    assert det.verdict("dgx5").level is ThrashLevel.OK


def test_powered_off_starts_fresh() -> None:
    clock = Clock()
    det = ThrashDetector(clock=clock)
    det.on_snapshot(online("dgx6", clock.t, avail_gib=0.5))
    det.on_snapshot(starved("dgx6", clock.t + 2))
    assert det.verdict("dgx6").level is ThrashLevel.THRASH
    det.on_snapshot(NodeSnapshot("dgx6", NodeState.POWERED_OFF, clock.t + 40, powered=False))
    clock.t += 100
    det.on_snapshot(online("dgx6", clock.t))
    assert det.verdict("dgx6").level is ThrashLevel.OK


def test_a_node_coming_back_from_a_power_cycle_is_no_thrash_evidence() -> None:
    """After every plug cycle the node pings before its sshd answers, and the
    SSH reconnect backs off: that is a boot, not 'thrash suspected' (the
    night's 3-of-3 false alarm). Its first good probe ends the grace; a node
    silent long past a boot is starved again."""
    clock = Clock()
    changes: list[ThrashVerdict] = []
    det = ThrashDetector(clock=clock, on_change=changes.append)
    t0 = clock.t

    def at(dt: float, snap: NodeSnapshot) -> ThrashVerdict:
        clock.t = t0 + dt
        det.on_snapshot(snap)
        return det.verdict("dgx3")

    at(0, online("dgx3", t0))
    at(5, NodeSnapshot("dgx3", NodeState.POWERED_OFF, t0 + 5, powered=False))
    for dt in (60, 63, 66, 70, 75):
        v = at(dt, starved("dgx3", t0 + dt))
        assert v.level is ThrashLevel.OK, v
        assert "back from a power cycle" in v.evidence[-1]
    assert changes == []
    at(80, online("dgx3", t0 + 80))
    assert at(90, starved("dgx3", t0 + 90)).level is ThrashLevel.SUSPECTED  # booted
    at(100, NodeSnapshot("dgx3", NodeState.POWERED_OFF, t0 + 100, powered=False))
    late = 100 + RETURN_GRACE_S + 10
    assert at(late, starved("dgx3", t0 + late)).level is ThrashLevel.SUSPECTED  # long silent


def test_a_cycle_no_poll_saw_off_is_read_from_the_plug() -> None:
    """Both polls read the plug on, but its ``last_changed`` moved and the node
    pings without SSH: a short cycle between them (a sentinel on wall time
    beside a simulator at 60x), a boot and no thrash. A plug that only went
    unavailable and back moves it too, and a node that answers meanwhile was
    not cycled: its history (here its pressure) stands."""
    clock = Clock()
    det = ThrashDetector(clock=clock)

    def plug(snap: NodeSnapshot, changed: str) -> NodeSnapshot:
        return dataclasses.replace(snap, powered=True, plug_changed=changed)

    det.on_snapshot(plug(online("dgx3", clock.t), "22:00"))
    clock.t += 5
    quiet = det.on_snapshot(plug(starved("dgx3", clock.t), "22:00"))  # no cycle: silent
    assert quiet.level is ThrashLevel.SUSPECTED
    clock.t += 5
    v = det.on_snapshot(plug(starved("dgx3", clock.t), "22:01"))
    assert v.level is ThrashLevel.OK and "back from a power cycle" in v.evidence[-1]
    clock.t += 5
    det.on_snapshot(plug(online("dgx3", clock.t, avail_gib=0.5, some=40), "22:01"))
    clock.t += 5
    assert det.on_snapshot(plug(online("dgx3", clock.t, avail_gib=0.5, some=40), "22:02")
                           ).level is ThrashLevel.PRESSURE  # the plug blipped, the node ran
    clock.t += 2
    assert det.on_snapshot(plug(starved("dgx3", clock.t), "22:02")).level is ThrashLevel.THRASH


def test_assess_nodes_for_the_health_command() -> None:
    now = 1.8e9
    snaps = [online("dgx1", now - 4), online("dgx6", now - 4, avail_gib=0.3, some=40),
             starved("dgx6", now - 2), online("dgx7", now - 2, some=15)]
    v = assess_nodes(snaps, now=now, lines={"dgx6": [PRESSURE]})
    assert v["dgx1"].level is ThrashLevel.OK
    assert v["dgx6"].level is ThrashLevel.THRASH
    assert v["dgx7"].level is ThrashLevel.PRESSURE


async def test_follow_journals_feeds_lines_and_is_cancellable() -> None:
    class Link:
        def __init__(self) -> None:
            self.cmds: list[str] = []

        async def stream(self, cmd: str) -> AsyncIterator[bytes]:
            self.cmds.append(cmd)
            yield NVRM.encode()
            yield PRESSURE.encode()
            await asyncio.Event().wait()  # journalctl -f never ends by itself
            yield b""  # pragma: no cover

    clock = Clock()
    det = ThrashDetector(clock=clock)
    link = Link()
    task = asyncio.create_task(det.follow_journals({"dgx1": link}))
    for _ in range(20):
        await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    ev = det.verdict("dgx1").evidence
    assert any("NVRM" in e for e in ev) and any("Under memory pressure" in e for e in ev)
    assert link.cmds == ["journalctl -b -f -o short-iso-precise --no-pager -n 0 "
        "_TRANSPORT=kernel + SYSLOG_IDENTIFIER=systemd-journald 2>&1"]


def test_node_verdict_from_one_snapshot() -> None:
    assert node_verdict(online("dgx1", 1.8e9)).level is ThrashLevel.OK
    v = node_verdict(online("dgx2", 1.8e9, avail_gib=2.0, some=15.0))
    assert v.level is ThrashLevel.PRESSURE and len(v.evidence) == 2
    v = node_verdict(starved("dgx3", 1.8e9))
    assert v.level is ThrashLevel.SUSPECTED
    assert v.evidence == ("ping answers, SSH probe failed 1x in a row",)


@settings(max_examples=150, deadline=None)
@given(speed=st.floats(0.3, 100.0), poll=st.floats(0.5, 5.0), boot=st.floats(0.0, 1e6))
def test_the_boot_grace_is_measured_on_the_nodes_clock(speed: float, poll: float,
                                                       boot: float) -> None:
    """RETURN_GRACE_S is of the node's time: a node seen off is coming back for
    600 of its seconds, whatever clock the watcher runs on (a sentinel on wall
    time beside a 60x simulator waited 600 wall s, ten simulated hours, before
    a node that never came back was evidence again). The node cannot be read
    while it boots: its pace is its uptime's over the watcher's clock before
    the cycle."""
    clock = Clock()
    det = ThrashDetector(clock=clock)
    t0 = clock.t

    def at(dt: float, snap: NodeSnapshot) -> ThrashVerdict:
        clock.t = t0 + dt
        det.on_snapshot(snap)
        return det.verdict("dgx3")

    for i in range(5):  # the node's uptime passes `speed` times the watcher's clock
        snap = online("dgx3", t0 + i * poll)
        probe = dataclasses.replace(snap.probe, uptime_s=boot + i * poll * speed)
        at(i * poll, dataclasses.replace(snap, probe=probe))
    off = 5 * poll
    at(off, NodeSnapshot("dgx3", NodeState.POWERED_OFF, t0 + off, powered=False))
    soon = off + 0.9 * RETURN_GRACE_S / speed
    v = at(soon, starved("dgx3", t0 + soon))
    assert v.level is ThrashLevel.OK and "back from a power cycle" in v.evidence[-1], v
    late = off + 1.1 * RETURN_GRACE_S / speed
    assert at(late, starved("dgx3", t0 + late)).level is ThrashLevel.SUSPECTED
