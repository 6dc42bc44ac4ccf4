"""`sparktui runlock list|close`: a stale lock (owner gone) is found and closed;
a live one is not closed by accident."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from sparktui.ops.journal import Journal
from sparktui.ops.runlocks import RunLocks

_spec = importlib.util.spec_from_file_location(
    "cli_harness", Path(__file__).parents[1] / "ops" / "cli_harness.py")
h = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(h)  # type: ignore[union-attr]


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


async def test_list_with_no_lock(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    assert await h.sparktui(cfg, "runlock", "list", monkeypatch=monkeypatch) == 0
    assert "no runlock held" in capsys.readouterr().out


async def test_a_crashed_serve_lock_is_stale_and_closed(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    locks = RunLocks.in_state_dir(cfg.state_dir())
    journal = Journal.in_state_dir(cfg.state_dir())
    journal.append("serve-x", "begin", workflow="serve", target="lane-x")
    journal.append("serve-x", "intent", step="start rank 1", target="dgx6")
    locks.acquire(["dgx6"], wf="serve-x", workflow="serve", target="lane-x", started_at=1.0,
                  containers={"dgx6": ["sparktui-lane-x-r1"]}, pid=dead_pid())
    locks.acquire(["dgx7"], wf="pc-y", workflow="power-cycle", target="dgx7", started_at=1.0)
    async with h.published(cfg):
        assert await h.sparktui(cfg, "runlock", "list", "--json", monkeypatch=monkeypatch) == 0
        rows = {r["node"]: r for r in json.loads(capsys.readouterr().out)}
        assert rows["dgx6"]["stale"] is True and rows["dgx7"]["stale"] is False
        assert await h.sparktui(cfg, "runlock", "list", monkeypatch=monkeypatch) == 0
        out = capsys.readouterr().out
        assert "dgx6: STALE: serve lane-x (serve-x" in out and "dgx7: held:" in out
        assert await h.sparktui(cfg, "runlock", "close", "dgx6", "--yes",
                                monkeypatch=monkeypatch) == 0
        assert locks.get("dgx6") is None
        assert "closed (stale); unfinished serve lane-x closed with its lock" in \
            capsys.readouterr().out
        assert journal.unfinished() == []
        assert await h.sparktui(cfg, "runlock", "close", "dgx7", "--dry-run", "--json",
                                monkeypatch=monkeypatch) == 3
        plan = json.loads(capsys.readouterr().out)
        assert plan["workflow"] == "runlock-close" and plan["allowed"] is False
        assert [v["guard"] for v in plan["verdicts"]] == ["runlock"]
        code = await h.sparktui(cfg, "runlock", "close", "dgx7", "--yes",
                                monkeypatch=monkeypatch)
        assert code == 3 and "owner process is alive" in capsys.readouterr().err
        assert locks.get("dgx7") is not None and locks.get("dgx7").pid == os.getpid()
        assert await h.sparktui(cfg, "runlock", "close", "dgx7", "--force", "--yes",
                                monkeypatch=monkeypatch) == 0
        assert locks.list() == []
        notes = [e.message for e in Journal.in_state_dir(cfg.state_dir()).entries()]
        assert any("runlock on dgx6 closed by the operator (stale)" in n for n in notes)


async def test_a_dead_owners_lock_is_stale_though_its_containers_run(tmp_path, capsys,
                                                                     monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg):
        assert await h.sparktui(cfg, "serve", "glm53-flash-eugr-2x", "--cluster",
                                "4nodes-switch-b", "--detach", "--yes",
                                monkeypatch=monkeypatch) == 0
        locks = RunLocks.in_state_dir(cfg.state_dir())
        locks.acquire(["dgx5"], wf="serve-z", workflow="serve", target="glm53-flash-eugr-2x",
                      started_at=1.0, containers={"dgx5": ["sparktui-glm53-flash-eugr-2x-r0"]},
                      pid=dead_pid())
        capsys.readouterr()
        assert await h.sparktui(cfg, "runlock", "list", "--json", monkeypatch=monkeypatch) == 0
        (row,) = json.loads(capsys.readouterr().out)
        assert row["stale"] is True and row["running"] == ["sparktui-glm53-flash-eugr-2x-r0"]
        assert await h.sparktui(cfg, "runlock", "close", "dgx5", "--dry-run", "--json",
                                monkeypatch=monkeypatch) == 0
        (verdict,) = json.loads(capsys.readouterr().out)["verdicts"]
        assert "still run(s) -> `sparktui stop glm53-flash-eugr-2x`" in verdict["message"]
