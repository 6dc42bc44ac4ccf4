"""Thrash rules: levels with their evidence and runbook step; kernel lines
never alarm alone; a normal heavy load never alarms; the seed's signature
(ping answers, SSH does not, memory exhausted just before) is thrash."""

from __future__ import annotations

import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.config import ThrashConfig
from sparktui.core.logsig import classify
from sparktui.core.thrash import NodeSample, ThrashLevel, ThrashRules

TOTAL = 127_600_748  # GB10 MemTotal kB
GIB = 1024 * 1024
NVRM = ("2026-11-29T01:02:03.456789+0000 dgx1 kernel: NVRM: nvCheckOkFailedNoLog: Check failed: "
        "Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned from "
        "_memdescAllocInternal(pMemDesc) @ mem_desc.c:1359")
PRESSURE = ("2026-11-29T01:02:03.456789+0000 dgx1 systemd-journald[412]: Under memory "
            "pressure, flushing caches.")
STALL_STATS = ("(APIServer pid=1) INFO 11-29 01:02:03 [loggers.py:1] Engine 000: Avg prompt "
               "throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 1 "
               "reqs, Waiting: 0 reqs, GPU KV cache usage: 90.0%, Prefix cache hit rate: 0.0%")


def sample(at: float, *, ok: bool = True, ping: bool | None = True, some: float = 0.0,
           full: float = 0.0, total_us: int = 0, avail_gib: float = 60.0,
           uptime: float | None = None) -> NodeSample:
    """A sample taken at ``at``; the node's uptime is ``at`` too unless told
    (the watcher and the node on one clock)."""
    return NodeSample(at, ok, ping, some, full, total_us, int(avail_gib * GIB), TOTAL,
                      uptime_s=at if uptime is None else uptime)


def add(rules: ThrashRules, at: float, line: str) -> None:
    ev = classify(line)
    assert ev is not None
    rules.add_event(at, ev)


def test_idle_node_is_ok() -> None:
    r = ThrashRules("dgx1")
    r.add_sample(sample(0))
    v = r.verdict(0)
    assert v.level is ThrashLevel.OK and v.evidence == () and v.next_step == ""


def test_normal_heavy_load_with_nvrm_lines_never_alarms() -> None:
    """Healthy cold load: MemAvailable falls to ~10 GiB, some PSI, NVRM bursts."""
    r = ThrashRules("dgx1")
    for i in range(60):
        t = i * 2.0
        r.add_sample(sample(t, some=6.0, full=1.0, total_us=int(t * 0.01e6),
                            avail_gib=60 - i * 0.8))
        if i % 5 == 0:
            add(r, t, NVRM)
        v = r.verdict(t)
        assert v.level is ThrashLevel.OK, v
    assert any("NVRM" in e for e in v.evidence)


def test_kernel_lines_alone_never_raise_the_level() -> None:
    r = ThrashRules("dgx1")
    r.add_sample(sample(0))
    for i in range(50):
        add(r, i, NVRM)
        add(r, i, PRESSURE)
    v = r.verdict(50)
    assert v.level is ThrashLevel.OK
    assert any("Under memory pressure" in e for e in v.evidence)


def test_pressure_from_psi_some() -> None:
    r = ThrashRules("dgx1")
    r.add_sample(sample(0, some=12.0))
    v = r.verdict(0)
    assert v.level is ThrashLevel.PRESSURE
    assert v.evidence == ("PSI some avg10 12.0% >= 10%",)
    assert "long prompts" in v.next_step


def test_low_mem_and_kernel_lines_stay_pressure_until_full_stalls() -> None:
    """The 22:45 lane idling at 4.7 GiB free with journald flushing: tight, not thrashing."""
    r = ThrashRules("dgx1")
    r.add_sample(sample(0, avail_gib=3.0))
    add(r, 1, PRESSURE)
    add(r, 1, NVRM)
    v = r.verdict(1)
    assert v.level is ThrashLevel.PRESSURE
    assert "MemAvailable 3.0 GiB < 4 GiB (2.5% < 5%)" in v.evidence
    assert any("Under memory pressure" in e for e in v.evidence)
    r.add_sample(sample(2, avail_gib=3.0, some=25.0))
    assert r.verdict(2).level is ThrashLevel.PRESSURE
    r.add_sample(sample(4, avail_gib=3.0, some=45.0, full=21.0))
    v = r.verdict(4)
    assert v.level is ThrashLevel.SUSPECTED
    assert "3 SSH retries ~30 s apart" in v.next_step


def test_low_mem_fraction_threshold_is_config() -> None:
    r = ThrashRules("dgx1", ThrashConfig(mem_available_low_gib=1.0, mem_available_low_frac=0.10))
    r.add_sample(sample(0, avail_gib=10.0))  # 8.2 % < 10 %
    assert r.verdict(0).level is ThrashLevel.PRESSURE


def test_psi_full_suspect_and_sustained_thrash() -> None:
    r = ThrashRules("dgx1")
    r.add_sample(sample(0, full=25.0, total_us=0))
    assert r.verdict(0).level is ThrashLevel.SUSPECTED
    # full total grows 70 % of wall time for 30 s: systemd-oomd would act
    for i in range(1, 16):
        t = i * 2.0
        r.add_sample(sample(t, full=70.0, total_us=int(t * 0.7e6)))
    v = r.verdict(30)
    assert v.level is ThrashLevel.THRASH
    assert any("systemd-oomd" in e for e in v.evidence)


@settings(max_examples=200, deadline=None)
@given(stall=st.floats(0.0, 1.0), speed=st.floats(0.3, 100.0),
       poll=st.floats(0.5, 5.0), boot=st.floats(0.0, 1e6))
def test_psi_full_rate_is_taken_on_the_nodes_clock(stall: float, speed: float, poll: float,
                                                   boot: float) -> None:
    """PSI's full total is microseconds of the node's time: its share is taken
    over the node's uptime, whatever clock the watcher stamps samples on (a
    sentinel on wall time beside a simulator at 60x read "1419 % of wall
    time"; a 60x console on a loaded host the other way round)."""
    r = ThrashRules("dgx1")
    n = max(3, math.ceil(32 / (poll * speed)) + 1)  # over 30 s of the node's time
    for i in range(n):
        node_t = i * poll * speed  # the node's seconds pass `speed` times the watcher's
        r.add_sample(sample(i * poll, full=stall * 100, total_us=int(node_t * stall * 1e6),
                            uptime=boot + node_t))
    v = r.verdict((n - 1) * poll)
    sustained = [e for e in v.evidence if "PSI full total grew" in e]
    if stall >= 0.61:
        assert v.level is ThrashLevel.THRASH
        assert sustained == [f"PSI full total grew {stall:.0%} of the node's time over 30 s of "
                             "its uptime (>= 60%, systemd-oomd)"]
    elif stall <= 0.59:
        assert sustained == [] and v.level < ThrashLevel.THRASH, v


def test_psi_and_memory_rates_do_not_span_a_reboot() -> None:
    """Uptime that went back is a new boot: its counters start again, and
    the samples before it are not the same clock's."""
    r = ThrashRules("dgx1")
    for i in range(16):
        r.add_sample(sample(i * 2.0, total_us=int(i * 2.0 * 0.9e6), avail_gib=60 - i * 3,
                            uptime=5000 + i * 2.0))
    assert r._full_stall_fraction() is not None and r._mem_fall_gib_per_min() is not None
    r.add_sample(sample(34.0, total_us=0, avail_gib=100, uptime=1.0))
    assert r._full_stall_fraction() is None and r._mem_fall_gib_per_min() is None


def test_memory_fall_rate_is_per_minute_of_the_nodes_time() -> None:
    r = ThrashRules("dgx1")
    for i in range(16):  # 1 GiB per node minute; the watcher sees 60 node s per 1 s
        r.add_sample(sample(i * 0.5, avail_gib=3.0 - i * 0.5, some=20.0, uptime=i * 30.0))
    assert r._mem_fall_gib_per_min() == 1.0


def test_short_psi_spike_is_not_sustained_thrash() -> None:
    r = ThrashRules("dgx1")
    for i in range(0, 20):
        t = i * 2.0
        grown = 0.9e6 * min(t, 6.0)  # 6 s spike then nothing
        r.add_sample(sample(t, full=0.0, total_us=int(grown)))
    assert r.verdict(38).level is ThrashLevel.OK


def test_seed_signature_ping_alive_ssh_dead_after_memory_exhaustion_is_thrash() -> None:
    r = ThrashRules("dgx6")
    r.add_sample(sample(0, some=35.0, full=22.0, avail_gib=0.4))
    add(r, 1, NVRM)
    add(r, 1, PRESSURE)
    r.add_sample(sample(2, ok=False, ping=True))
    v = r.verdict(2)
    assert v.level is ThrashLevel.THRASH
    assert "ping answers, SSH probe failed 1x in a row" in v.evidence
    assert "SSH retry 1/3" in v.next_step and "dgx6 only" in v.next_step
    for i in range(3, 6):
        r.add_sample(sample(i * 30.0, ok=False, ping=True))
    v = r.verdict(5 * 30.0)
    assert v.failed_probes == 4
    assert "plug-cycle dgx6 only" in v.next_step and "re-check" in v.next_step


def test_runbook_retries_are_counted_in_time_not_in_polls() -> None:
    """3 s polls failing for 14 s are one runbook retry, not "3 retries failed":
    the runbook (and `recover`) means retries ~30 s apart."""
    r = ThrashRules("dgx6")
    r.add_sample(sample(0, some=35.0, full=22.0, avail_gib=0.4))
    for t in range(3, 18, 3):                      # 5 failed polls, 12 s after onset
        r.add_sample(sample(float(t), ok=False, ping=True))
    v = r.verdict(15.0)
    assert v.failed_probes == 5
    assert "SSH retry 1/3" in v.next_step and "retries failed" not in v.next_step
    for t in range(18, 34, 3):
        r.add_sample(sample(float(t), ok=False, ping=True))
    assert "SSH retry 2/3" in r.verdict(33.0).next_step       # onset + 30 s
    for t in range(36, 63, 3):
        r.add_sample(sample(float(t), ok=False, ping=True))
    assert "SSH retry 2/3" in r.verdict(60.0).next_step       # onset + 57 s
    r.add_sample(sample(63.0, ok=False, ping=True))
    assert "3 SSH retries failed: plug-cycle dgx6 only" in r.verdict(63.0).next_step


def test_ssh_failure_without_memory_evidence_is_only_suspected() -> None:
    r = ThrashRules("dgx1")
    r.add_sample(sample(0))
    r.add_sample(sample(2, ok=False, ping=True))
    assert r.verdict(2).level is ThrashLevel.SUSPECTED


def test_no_ping_no_ssh_is_not_thrash() -> None:
    r = ThrashRules("dgx1")
    r.add_sample(sample(0, avail_gib=0.5))
    r.add_sample(sample(2, ok=False, ping=False))
    v = r.verdict(2)
    assert v.level is ThrashLevel.PRESSURE
    assert any("node down" in e for e in v.evidence)


def test_recovery_resets_failed_probes() -> None:
    r = ThrashRules("dgx1")
    r.add_sample(sample(0, ok=False, ping=True))
    r.add_sample(sample(2))
    v = r.verdict(2)
    assert v.level is ThrashLevel.OK and v.failed_probes == 0


def test_engine_stall_with_pressure_is_suspected() -> None:
    r = ThrashRules("dgx7")
    r.add_sample(sample(0, some=15.0))
    add(r, 0, STALL_STATS)
    assert r.verdict(0).level is ThrashLevel.PRESSURE  # one stats line is not a stall
    add(r, 10, STALL_STATS)
    v = r.verdict(10)
    assert v.level is ThrashLevel.SUSPECTED
    assert any("prompt throughput 0.0" in e for e in v.evidence)


def test_old_evidence_expires() -> None:
    r = ThrashRules("dgx1")
    r.add_sample(sample(0, avail_gib=1.0))
    add(r, 0, PRESSURE)
    r.add_sample(sample(150))  # healthy again
    r.add_sample(sample(300, ok=False, ping=True))
    v = r.verdict(300)
    assert v.level is ThrashLevel.SUSPECTED and not any("kernel" in e for e in v.evidence)


def test_a_dark_node_is_judged_on_what_led_up_to_it() -> None:
    """However long the probe took to time out, the last good sample and the
    lines just before it stay the evidence while the node stays dark."""
    r = ThrashRules("dgx6")
    r.add_sample(sample(0, some=30.0, avail_gib=0.5))
    add(r, 1, NVRM)
    r.add_sample(sample(600, ok=False, ping=True))
    v = r.verdict(900)
    assert v.level is ThrashLevel.THRASH
    assert any("NVRM" in e for e in v.evidence) and any("MemAvailable" in e for e in v.evidence)


def test_level_labels() -> None:
    assert [lv.label for lv in ThrashLevel] == ["ok", "pressure", "thrash suspected", "thrash"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from([True, False, None]),
                          st.floats(0, 100), st.floats(0, 100), st.integers(0, 10**12),
                          st.integers(0, 130_000_000)), max_size=30))
def test_fuzz_rules_never_raise(
    rows: list[tuple[bool, bool | None, float, float, int, int]],
) -> None:
    r = ThrashRules("n")
    for i, (ok, ping, some, full, tot, avail) in enumerate(rows):
        r.add_sample(NodeSample(i * 2.0, ok, ping, some, full, tot, avail, TOTAL))
        r.verdict(i * 2.0)


def test_falling_memory_is_reported_once_under_pressure() -> None:
    r = ThrashRules("dgx1")
    for i in range(16):  # 40 -> 2.5 GiB, 2.5 GiB every 2 s = 75 GiB/min
        r.add_sample(sample(i * 2.0, avail_gib=40 - 2.5 * i))
    v = r.verdict(30)
    assert v.level is ThrashLevel.PRESSURE
    assert "MemAvailable falling 75.0 GiB/min" in v.evidence
    quiet = ThrashRules("dgx2")
    for i in range(16):
        quiet.add_sample(sample(i * 2.0, avail_gib=60 - i))
    assert quiet.verdict(30).evidence == ()  # falling, but no pressure: nothing said


COMPARISON = re.compile(r"(\d+(?:\.\d+)?) ?(GiB|%) < (\d+(?:\.\d+)?) ?(GiB|%)")


@given(avail_kib=st.integers(0, TOTAL), low_gib=st.integers(0, 128).map(lambda n: n / 2),
       low_frac=st.integers(0, 200).map(lambda n: n / 400))
@settings(max_examples=300, deadline=None)
def test_low_memory_evidence_names_only_thresholds_it_is_below(
        avail_kib: int, low_gib: float, low_frac: float) -> None:
    """Each ``a < b`` in the MemAvailable evidence is true as printed, and
    names a threshold that fired: "MemAvailable 4.9 GiB (4.0%) < 4 GiB or 5%"
    read as false (issue 28 item 7); it is "4.9 GiB (4.0% < 5%)"."""
    r = ThrashRules("dgx1", ThrashConfig(mem_available_low_gib=low_gib,
                                         mem_available_low_frac=low_frac))
    r.add_sample(NodeSample(0.0, True, True, 0.0, 0.0, 0, avail_kib, TOTAL, uptime_s=0.0))
    evidence = [e for e in r.verdict(0.0).evidence if e.startswith("MemAvailable ")]
    gib_low, frac_low = avail_kib / GIB < low_gib, avail_kib / TOTAL < low_frac
    assert bool(evidence) == (gib_low or frac_low)
    for text in evidence:
        found = COMPARISON.findall(text)
        assert {unit for _, unit, _, _ in found} == (
            {"GiB"} if gib_low else set()) | ({"%"} if frac_low else set()), text
        for a, unit, b, unit_b in found:
            assert unit == unit_b and float(a) < float(b), text


def test_low_memory_share_alone_reads_true() -> None:
    r = ThrashRules("dgx1")
    r.add_sample(sample(0, avail_gib=4.9))   # 4.0 % of MemTotal, above 4 GiB
    assert "MemAvailable 4.9 GiB (4.0% < 5%)" in r.verdict(0).evidence
