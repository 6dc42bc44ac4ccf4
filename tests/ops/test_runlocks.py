"""Runlocks: one workflow per node, all nodes or none, stale when the owner and
its containers are gone."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sparktui.ops.runlocks import LockHeld, RunLock, RunLocks, is_stale, owner_alive


def test_a_workflow_takes_every_node_or_none(tmp_path):
    locks = RunLocks(tmp_path / "runlocks")
    locks.acquire(["dgx6"], wf="pc-1", workflow="power-cycle", target="dgx6", started_at=1.0)
    with pytest.raises(LockHeld) as info:
        locks.acquire(["dgx5", "dgx6", "dgx7"], wf="serve-1", workflow="serve", target="lane",
                      started_at=2.0)
    assert info.value.lock.wf == "pc-1"
    assert "power-cycle dgx6" in str(info.value)
    assert [lock.node for lock in locks.list()] == ["dgx6"]  # dgx5 was rolled back
    assert locks.holders()["dgx6"].startswith(locks.get("dgx6").describe())
    assert locks.holders(exclude_wf="pc-1") == {}


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


def test_stale_means_owner_gone_and_containers_gone():
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock = RunLock("dgx5", "a", "serve", "x", dead.pid, os.uname().nodename, 1.0,
                   ("sparktui-x-r0",))
    assert owner_alive(lock, os.uname().nodename) is False
    assert is_stale(lock, False, set()) is True
    assert is_stale(lock, False, {"sparktui-x-r0"}) is False
    assert is_stale(lock, False, None) is None  # the node did not answer
    mine = RunLock("dgx5", "a", "serve", "x", os.getpid(), os.uname().nodename, 1.0)
    assert owner_alive(mine, os.uname().nodename) is True
    assert is_stale(mine, True, set()) is False
    elsewhere = RunLock("dgx5", "a", "serve", "x", 1, "other-host", 1.0)
    assert owner_alive(elsewhere, os.uname().nodename) is None
    assert is_stale(elsewhere, None, set()) is None


def test_a_dead_owner_is_stale_and_the_advice_says_what_to_do(tmp_path):
    from sparktui.ops import guards

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that no longer runs
    locks = RunLocks(tmp_path / "runlocks")
    locks.acquire(["dgx6", "dgx7"], wf="serve-1", workflow="serve", target="glm53-lane",
                  started_at=1.0, pid=gone.pid,
                  containers={"dgx6": ["sparktui-glm53-lane-r0"]})
    locks.acquire(["dgx8"], wf="power-2", workflow="power-cycle", target="dgx8",
                  started_at=1.0)  # this process: alive
    held = locks.holders()
    assert held["dgx6"].endswith(
        f"its process (pid {gone.pid}) is gone: the lock is stale, but it started "
        f"sparktui-glm53-lane-r0 (may still run) -> `sparktui stop glm53-lane`, then "
        f"`sparktui runlock close dgx6`")
    assert held["dgx7"].endswith(f"its process (pid {gone.pid}) is gone: the lock is stale "
                                 f"-> `sparktui runlock close dgx7`")
    assert "wait for it" not in held["dgx6"] + held["dgx7"]
    assert held["dgx8"].endswith("-> wait for it, or `sparktui runlock close dgx8` if it is "
                                 "stale")
    verdict = guards.runlock("dgx6", held)
    assert not verdict.passed and "`sparktui stop glm53-lane`, then" in verdict.message
