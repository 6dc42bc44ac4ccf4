"""Runlocks: one workflow per node, all nodes or none; stale (holding nothing,
taken over by the next workflow) when the owner process is gone, a reused pid
included."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sparktui.ops.runlocks import LockHeld, RunLock, RunLocks, owner_alive, process_started


def test_a_workflow_takes_every_node_or_none(tmp_path):
    locks = RunLocks(tmp_path / "runlocks")
    locks.acquire(["dgx6"], wf="pc-1", workflow="power-cycle", target="dgx6", started_at=1.0)
    with pytest.raises(LockHeld) as info:
        locks.acquire(["dgx5", "dgx6", "dgx7"], wf="serve-1", workflow="serve", target="lane",
                      started_at=2.0)
    assert info.value.lock.wf == "pc-1"
    assert "power-cycle dgx6" in str(info.value)
    assert [lock.node for lock in locks.list()] == ["dgx6"]  # dgx5 was rolled back


def test_release_frees_only_the_workflows_own_locks(tmp_path):
    locks = RunLocks(tmp_path)
    locks.acquire(["dgx5", "dgx6"], wf="a", workflow="serve", target="x", started_at=1.0,
                  containers={"dgx5": ["sparktui-x-r0"], "dgx6": ["sparktui-x-r1"]})
    locks.acquire(["dgx7"], wf="b", workflow="stop", target="y", started_at=1.0)
    assert locks.release("a") == ["dgx5", "dgx6"]
    assert [lk.node for lk in locks.list()] == ["dgx7"]
    assert locks.release("a") == []
    assert locks.close("dgx7").wf == "b"
    assert locks.list() == []


def test_an_unreadable_lock_still_holds_its_node(tmp_path):
    locks = RunLocks(tmp_path)
    (tmp_path / "dgx8.json").write_text("{not json")
    with pytest.raises(LockHeld):
        locks.acquire(["dgx8"], wf="c", workflow="serve", target="x", started_at=1.0)
    assert locks.get("dgx8").workflow == "unreadable"


def test_node_names_cannot_escape_the_lock_dir(tmp_path):
    with pytest.raises(ValueError):
        RunLocks(tmp_path).acquire(["../etc"], wf="x", workflow="w", target="t",
                                   started_at=0.0)


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_stale_means_the_owner_process_is_gone():
    host = os.uname().nodename
    lock = RunLock("dgx5", "a", "serve", "x", dead_pid(), host, 1.0, ("sparktui-x-r0",))
    assert owner_alive(lock, host) is False
    mine = RunLock("dgx5", "a", "serve", "x", os.getpid(), host, 1.0,
                   pid_started=process_started(os.getpid()))
    assert owner_alive(mine, host) is True
    old_format = RunLock("dgx5", "a", "serve", "x", os.getpid(), host, 1.0)
    assert owner_alive(old_format, host) is True  # no start time recorded: the pid alone
    elsewhere = RunLock("dgx5", "a", "serve", "x", 1, "other-host", 1.0)
    assert owner_alive(elsewhere, host) is None


def test_a_reused_pid_is_not_the_owner():
    """The lock's pid now runs another process (started later): the lock is stale."""
    started = process_started(os.getpid())
    assert started is not None
    reused = RunLock("dgx5", "a", "serve", "x", os.getpid(), os.uname().nodename, 1.0,
                     pid_started=started - 3600.0)
    assert owner_alive(reused) is False


def test_a_stale_lock_is_taken_over_and_said(tmp_path):
    locks = RunLocks(tmp_path / "runlocks")
    gone = dead_pid()
    locks.acquire(["dgx6", "dgx7"], wf="serve-1", workflow="serve", target="glm53-lane",
                  started_at=1.0, pid=gone, containers={"dgx6": ["sparktui-glm53-lane-r0"]})
    taken_at = os.path.getmtime(tmp_path / "runlocks" / "dgx6.json")
    line6, _line7 = locks.lines(now=taken_at + 90)
    assert line6.startswith(f"dgx6: STALE: serve glm53-lane (serve-1, pid {gone} on ")
    assert f"pid {gone} is gone, taken 90 s ago; it holds nothing" in line6
    assert "sparktui-glm53-lane-r0 (may still run: `sparktui stop glm53-lane` stops it)" \
        in line6
    told: list[tuple[str, float | None]] = []
    taken = locks.acquire(["dgx6"], wf="stop-2", workflow="stop", target="glm53-lane",
                          started_at=2.0, on_stale=lambda lk, age: told.append((lk.wf, age)))
    assert [lk.wf for lk in taken] == ["stop-2"] and locks.get("dgx6").wf == "stop-2"
    assert [wf for wf, _ in told] == ["serve-1"] and told[0][1] is not None
    assert locks.get("dgx6").pid_started == process_started(os.getpid())
    assert locks.lines(now=0.0)[0].startswith("dgx6: held: stop glm53-lane")
    # a live owner's lock is not taken over
    with pytest.raises(LockHeld):
        locks.acquire(["dgx6"], wf="serve-3", workflow="serve", target="x", started_at=3.0)
    assert locks.get("dgx7").wf == "serve-1"  # untouched until a workflow wants dgx7


def test_a_lock_from_another_version_is_read(tmp_path):
    """Old locks (no pid_started) and newer ones (an extra field) both read as locks."""
    import json

    locks = RunLocks(tmp_path)
    base = {"node": "dgx5", "wf": "a", "workflow": "serve", "target": "x", "pid": os.getpid(),
            "host": os.uname().nodename, "started_at": 1.0, "containers": []}
    (tmp_path / "dgx5.json").write_text(json.dumps(base))
    (tmp_path / "dgx6.json").write_text(json.dumps({**base, "node": "dgx6", "later": 1}))
    assert locks.get("dgx5").pid_started is None and locks.get("dgx5").workflow == "serve"
    assert locks.get("dgx6").workflow == "serve"


def test_a_stale_lock_blocks_no_guard(tmp_path):
    from sparktui.ops import guards
    from sparktui.ops.plan import OpsState

    locks = RunLocks(tmp_path / "runlocks")
    locks.acquire(["dgx6"], wf="serve-1", workflow="serve", target="glm53-lane",
                  started_at=1.0, pid=dead_pid())
    locks.acquire(["dgx8"], wf="power-2", workflow="power-cycle", target="dgx8",
                  started_at=1.0)  # this process: alive
    held = locks.list()
    state = OpsState(config=None, snapshot=None,  # type: ignore[arg-type]
                     locks=tuple(held), owner_alive={lk.node: owner_alive(lk) for lk in held},
                     lock_ages={"dgx6": 60.0})
    assert guards.runlock("dgx6", state.holders()).passed
    verdict = guards.runlock("dgx8", state.holders())
    assert not verdict.passed and "power-cycle dgx8 (power-2, pid" in verdict.message
    assert list(state.stale_locks()) == ["dgx6"]
    assert "taken 60 s ago" in state.stale_locks()["dgx6"]


def test_a_resume_is_not_refused_by_another_workflows_stale_lock(tmp_path):
    """`power resume` reads the locks of other workflows as every plan does: a
    stale one (a killed earlier resume of the same cycle) holds nothing."""
    from pathlib import Path

    from sparktui.core.config_load import load_config
    from sparktui.core.state import ClusterSnapshot
    from sparktui.ops.journal import StepRecord, WorkflowRecord
    from sparktui.ops.plan import OpsState
    from sparktui.ops.workflows.power_resume import Resume

    config = load_config(Path(__file__).resolve().parents[2] / "config.toml")
    entity = config.nodes["dgx6"].switch
    cycle = WorkflowRecord("pc-1", "power-cycle", "dgx6", 1.0, {"off_seconds": 35.0},
                           (StepRecord("plug off", entity, "POST", 1.0, True),))
    host = os.uname().nodename
    for pid, refused in ((dead_pid(), False), (os.getpid(), True)):
        lock = RunLock("dgx6", "resume-2", "resume", "pc-1", pid, host, 2.0)
        state = OpsState(config=config, snapshot=ClusterSnapshot(3.0, ()), locks=(lock,),
                         owner_alive={"dgx6": owner_alive(lock)}, unfinished=(cycle,))
        verdicts = [v for v in Resume("pc-1").plan(state).report.verdicts
                    if v.guard == "runlock"]
        assert [v.refused for v in verdicts] == [refused], verdicts
