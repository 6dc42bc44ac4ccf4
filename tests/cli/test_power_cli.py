"""`sparktui power ...` as an operator runs it, against the simulator."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "cli_harness", Path(__file__).parents[1] / "ops" / "cli_harness.py")
h = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(h)  # type: ignore[union-attr]

pytestmark = pytest.mark.usefixtures("quick_polls")


async def test_production_node_is_refused_with_exit_3(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg) as sim:
        code = await h.sparktui(cfg, "power", "cycle", "dgx2", "--yes", monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code == 3
        assert "[REFUSE] protected-node dgx2" in err
        assert "power-cycle dgx2: FAILED: refused: dgx2 is a protected node" in out
        assert sim.ha.calls == []


async def test_without_a_terminal_and_without_yes_nothing_is_done(tmp_path, capsys,
                                                                  monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg) as sim:
        code = await h.sparktui(cfg, "power", "cycle", "dgx6", monkeypatch=monkeypatch)
        _, err = capsys.readouterr()
        assert code == 4
        assert "stdin is not a terminal: pass --yes" in err
        assert "what will happen:" in err and "switch.dgx6" in err
        assert sim.ha.calls == []


async def test_typed_confirmation_must_be_the_node_name(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg) as sim:
        code = await h.sparktui(cfg, "power", "off", "dgx6", stdin=h.Terminal("yes\n"),
                                monkeypatch=monkeypatch)
        assert code == 4 and sim.ha.calls == []
        code = await h.sparktui(cfg, "power", "off", "dgx6", stdin=h.Terminal("dgx6\n"),
                                monkeypatch=monkeypatch)
        _, err = capsys.readouterr()
        assert code == 0, err
        assert "Type 'dgx6' to go on" in err
        assert sim.ha.calls == [("turn_off", "switch.dgx6")]


async def test_cycle_with_yes_and_json_reports_progress_on_stderr(tmp_path, capsys,
                                                                  monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg) as sim:
        code = await h.sparktui(cfg, "power", "cycle", "dgx7", "--yes", "--json",
                                "--off-seconds", "1", monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code == 0, err
        result = json.loads(out)
        assert result["ok"] and result["workflow"] == "power-cycle"
        assert result["detail"]["kernel"].startswith("6.17.0-1031")
        assert "-> plug off [switch.dgx7]" in err and "<- re-check [dgx7] ok" in err
        assert sim.nodes["dgx7"].up


async def test_cluster_off_and_on_and_resume_list(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg) as sim:
        assert await h.sparktui(cfg, "power", "cluster", "off", "4nodes-switch-b", "--yes",
                                monkeypatch=monkeypatch) == 0
        assert sim.nodes["dgx5"].power == "off"
        assert await h.sparktui(cfg, "power", "cluster", "on", "4nodes-switch-b", "--yes",
                                monkeypatch=monkeypatch) == 0
        assert sim.nodes["dgx5"].up
        capsys.readouterr()
        assert await h.sparktui(cfg, "power", "resume", monkeypatch=monkeypatch) == 0
        assert "no unfinished workflow" in capsys.readouterr().out


async def test_unknown_node_is_bad_input(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg):
        assert await h.sparktui(cfg, "power", "on", "dgx9", "--yes",
                                monkeypatch=monkeypatch) == 2
        assert "unknown node 'dgx9'" in capsys.readouterr().err


async def test_a_killed_cycle_is_offered_at_the_next_start_and_resumed(tmp_path, capsys,
                                                                       monkeypatch):
    import asyncio
    import os
    import signal
    import sys

    from sparktui.ops.journal import Journal

    cfg = h.fleet(tmp_path)
    journal = Journal.in_state_dir(cfg.state_dir())
    async with h.published(cfg) as sim:
        env = {k: v for k, v in os.environ.items() if k != "SPARKTUI_HA_TOKEN"}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "sparktui.cli.main", "--config", str(cfg.path), "power",
            "cycle", "dgx6", "--yes", "--off-seconds", "3", env=env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL)
        async with asyncio.timeout(30):
            while not any(e.step == "wait off" for e in journal.entries()):
                await asyncio.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        assert sim.nodes["dgx6"].power == "off"

        code = await h.sparktui(cfg, "power", "on", "dgx8", "--yes", monkeypatch=monkeypatch)
        err = capsys.readouterr().err
        assert code == 0
        assert "UNFINISHED: power-cycle dgx6" in err
        assert "to complete: read switch.dgx6: if it reads off, " in err  # after 3 s off
        assert "turn it back on; if it reads on, dgx6 was told to shut down" in err
        (wf,) = [w.wf for w in journal.unfinished()]

        assert await h.sparktui(cfg, "power", "resume", monkeypatch=monkeypatch) == 0
        assert wf in capsys.readouterr().out
        code = await h.sparktui(cfg, "power", "resume", wf, "--yes", "--json",
                                monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code == 0, err
        assert json.loads(out)["detail"]["resumed"] == wf
        assert sim.nodes["dgx6"].up
        assert journal.unfinished() == []
