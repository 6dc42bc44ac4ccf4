"""Exit 137 paired with the node kernel's oom-killer report (core/oomkill.py):
the report's lines as the kernel prints them (tests/fixtures/kernel_oom.py, with
their sources in Linux mm/oom_kill.c), the pairing by cgroup, by pid and in
time, the event a paired kill makes and how the tracker takes it."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from sparktui.core.advice import fatal_next_step
from sparktui.core.failure import GENERIC_FATAL
from sparktui.core.logsig import Kind, container_exit, parse_timestamp
from sparktui.core.oomkill import (
    AFTER_EXIT_S,
    OomKill,
    container_kill,
    oom_exit,
    parse_oom_kills,
)
from sparktui.core.phases import PhaseTracker
from sparktui.sim.journal import oom_kill_lines

from ..fixtures.kernel_oom import CID, OTHER, T0, report, stamp

SYSTEMD = f"/system.slice/docker-{CID}.scope"
CGROUPFS = f"/docker/{CID}"


def test_a_report_gives_one_kill_with_its_cgroup_and_rss() -> None:
    (kill,) = parse_oom_kills(report(T0, 4242, SYSTEMD))
    assert (kill.pid, kill.task, kill.anon_rss_kib, kill.host, kill.memcg) == (
        4242, "python3", 103_809_024, True, SYSTEMD)
    assert kill.at == T0 and kill.stamp == stamp(T0)
    assert kill.evidence() == "python3 (pid 4242), anon-rss 99.0 GiB"


def test_the_older_offset_and_a_memcg_oom_read_the_same() -> None:
    lines = [ln.replace(stamp(T0), stamp(T0, colon=False)) for ln in
             report(T0, 77, SYSTEMD, host=False)]
    (kill,) = parse_oom_kills(lines)
    assert kill.at == T0 and not kill.host and kill.memcg == SYSTEMD


def test_a_rate_limited_report_has_no_summary_and_no_cgroup() -> None:
    """dump_header (and its summary) is rate-limited; the Killed line is not."""
    lines = [ln for ln in report(T0, 4242, SYSTEMD, summary=False)
             if "Killed process" in ln]
    (kill,) = parse_oom_kills(lines)
    assert kill.memcg is None and kill.pid == 4242


def test_a_summary_pairs_only_with_its_own_pid() -> None:
    first = report(T0, 100, f"/system.slice/docker-{OTHER}.scope")
    second = report(T0 + 1, 200, SYSTEMD, summary=False)
    kills = parse_oom_kills(first + second)
    assert [(k.pid, k.memcg) for k in kills] == [
        (100, f"/system.slice/docker-{OTHER}.scope"), (200, None)]


def test_the_simulators_lines_are_the_kernels_format() -> None:
    """sim/journal.oom_kill_lines reads as the kernel's own report."""
    (kill,) = parse_oom_kills(oom_kill_lines(CID, 4242, 1_048_576))
    assert (kill.pid, kill.task, kill.anon_rss_kib, kill.host) == (4242, "python3", 1_048_576,
                                                                    True)
    assert kill.memcg == SYSTEMD


def pair(kills: list[OomKill], *, pids: tuple[int, ...] = (), cid: str | None = CID,
         started: float | None = T0 - 3600, until: float | None = T0 + 1) -> OomKill | None:
    return container_kill(kills, container_id=cid, pids=pids, started=started, until=until)


def test_paired_by_cgroup_with_either_driver() -> None:
    for memcg in (SYSTEMD, CGROUPFS, f"{SYSTEMD}/init.scope"):
        kills = parse_oom_kills(report(T0, 4343, memcg))
        assert pair(kills) == kills[0], memcg


def test_paired_by_pid_only_without_a_summary() -> None:
    kills = parse_oom_kills(report(T0, 4242, SYSTEMD, summary=False))
    assert pair(kills, pids=(4242,)) == kills[0]
    assert pair(kills, pids=(4243,)) is None
    assert pair(kills) is None  # neither cgroup nor pid: not this container's


def test_another_containers_kill_is_not_this_ones() -> None:
    kills = parse_oom_kills(report(T0, 4242, f"/system.slice/docker-{OTHER}.scope"))
    assert pair(kills) is None
    assert pair(kills, cid=CID[:12]) is None  # a short id is never matched in a path


def test_a_kill_outside_the_containers_life_is_not_its() -> None:
    kills = parse_oom_kills(report(T0, 4242, SYSTEMD))
    assert pair(kills, started=T0 + 1) is None  # before it started (an earlier boot's)
    assert pair(kills, until=T0 - AFTER_EXIT_S - 1) is None  # long after it exited
    assert pair(kills, until=T0 - AFTER_EXIT_S + 1) == kills[0]  # journald's late stamp
    assert pair(kills, until=None) == kills[0]  # still running


def test_a_pid_is_never_matched_without_a_time() -> None:
    kills = [replace(k, at=None) for k in parse_oom_kills(report(T0, 4242, SYSTEMD))]
    assert pair(kills, pids=(4242,), cid=None) is None
    assert pair(kills) == kills[0]  # the cgroup names it whenever it was


@given(pid=st.integers(1, 4_194_304), other_pid=st.integers(1, 4_194_304),
       own_cgroup=st.booleans(), summary=st.booleans(), known=st.booleans(),
       dt=st.floats(-7200, 7200))
def test_the_pairing_claims_only_what_proves_it(pid: int, other_pid: int, own_cgroup: bool,
                                                summary: bool, known: bool, dt: float) -> None:
    """A kill is this container's exactly when its cgroup names it, or (no
    summary) its pid is one of the container's, and it falls in the life."""
    memcg = SYSTEMD if own_cgroup else f"/system.slice/docker-{OTHER}.scope"
    kills = parse_oom_kills(report(T0 + dt, pid, memcg, summary=summary))
    pids = (pid,) if known else (other_pid,) if other_pid != pid else ()
    started, until = T0 - 3600, T0
    in_life = started <= T0 + dt <= until + AFTER_EXIT_S
    by_cgroup = summary and own_cgroup
    by_pid = pid in pids
    got = pair(kills, pids=pids, started=started, until=until)
    assert (got is not None) == (in_life and (by_cgroup or by_pid))


def test_the_event_names_the_kill_and_says_oom() -> None:
    (kill,) = parse_oom_kills(report(T0, 4242, SYSTEMD))
    ev = oom_exit(kill, "dgx8", 137)
    assert ev.fatal and ev.kind is Kind.KERNEL_OOM_KILL and ev.kind not in GENERIC_FATAL
    assert ev.text == ("OOM: the kernel's OOM killer killed python3 (pid 4242), anon-rss "
                       "99.0 GiB (host out of memory on dgx8); container killed (SIGKILL)")
    assert ev.fields["anon_rss_kib"] == "103809024" and ev.fields["exit_code"] == "137"
    assert "exited with code 1" in oom_exit(kill, "dgx8", 1).text
    assert oom_exit(kill, "dgx8", None).text.endswith("(host out of memory on dgx8)")
    memcg = replace(kill, host=False)
    assert "memory cgroup limit on dgx8" in oom_exit(memcg, "dgx8", 137).text
    advice = fatal_next_step(ev.kind, 3)
    assert "out of memory" in advice and "gpu_memory_utilization" in advice


def test_a_bare_137_stays_a_sigkill() -> None:
    ev = container_exit(137)
    assert "OOM" not in ev.text and ev.text == "container killed (SIGKILL)"


def test_the_kill_is_the_cause_of_its_ranks_generic_line() -> None:
    """vLLM's API server logs its engine core's death; the kernel says why."""
    (kill,) = parse_oom_kills(report(T0, 4243, SYSTEMD))
    t = PhaseTracker("lane", 900.0, 0.0)
    t.feed(0, f"{stamp(T0 + 0.2)} ERROR 11-29 01:02:03 [core_client.py:564] Engine core "
              "proc EngineCore_DP0 died unexpectedly, shutting down client.", 1.0)
    f = t.failure
    assert f is not None and f.kind in GENERIC_FATAL and f.cause is None
    t.feed_event(0, oom_exit(kill, "dgx8", None), 2.0, kill.stamp)
    f = t.failure
    assert f is not None and f.cause is not None and f.cause.startswith("OOM: ")
    assert f.why is Kind.KERNEL_OOM_KILL
    t.feed_event(0, container_exit(1), 3.0, stamp(T0 + 5))  # the exit after: no better why
    assert t.failure == f


def test_an_earlier_kill_on_another_rank_is_the_lanes_failure() -> None:
    """Rank 1's kill came before rank 0's NCCL error that it caused."""
    (kill,) = parse_oom_kills(report(T0, 4242, SYSTEMD))
    t = PhaseTracker("lane", 900.0, 0.0)
    t.feed(0, f"{stamp(T0 + 2)} RuntimeError: NCCL error: remote process exited or there "
              "was a network error", 1.0)
    assert t.failure is not None and t.failure.rank == 0
    t.feed_event(1, oom_exit(kill, "dgx8", 137), 2.0, kill.stamp)
    f = t.failure
    assert f.rank == 1 and f.kind is Kind.KERNEL_OOM_KILL and "OOM" in f.line
    assert parse_timestamp(f.timestamp) == T0

