"""`sparktui recover` as an operator runs it, against the simulator."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "cli_harness", Path(__file__).parents[1] / "ops" / "cli_harness.py")
h = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(h)  # type: ignore[union-attr]



async def test_recover_a_production_node_is_refused(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg) as sim:
        assert await h.sparktui(cfg, "recover", "dgx4", "--yes", monkeypatch=monkeypatch) == 3
        assert "[REFUSE] protected-node dgx4" in capsys.readouterr().err
        assert sim.ha.calls == []


async def test_recover_shows_the_runbook_and_stops_when_ssh_answers(tmp_path, capsys,
                                                                    monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg) as sim:
        code = await h.sparktui(cfg, "recover", "dgx6", "--yes", "--json",
                                monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code == 0, err
        assert "ssh retry 3 [dgx6]" in err and "plug off [switch.dgx6]" in err
        assert json.loads(out)["detail"]["power_cycled"] is False
        assert sim.ha.calls == []
