"""`sparktui qualify LANE --json` (the real command) against the simulator: the
eight keys, exactly; a lane that is not there is a clear failure, not a
traceback; `serve --no-qualify` skips the gate."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "cli_harness", Path(__file__).parents[1] / "ops" / "cli_harness.py")
h = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(h)  # type: ignore[union-attr]

B = "4nodes-switch-b"
KEYS = ["lane", "state", "cer", "identifiers_ok", "identifiers_total", "ttft_ms",
        "decode_tps", "prefill_tps"]


async def test_qualify_json_has_exactly_the_issue_keys(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg, speed=400.0):
        code = await h.sparktui(cfg, "serve", "glm53-flash-eugr-2x", "--cluster", B, "--yes",
                                "--no-qualify", monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code == 0, err
        assert "quality gate" not in out and "qualify copy" not in err
        code = await h.sparktui(cfg, "qualify", "glm53-flash-eugr-2x", "--json",
                                monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code == 0, err
        result = json.loads(out)
        assert list(result) == KEYS
        assert result["lane"] == "glm53-flash-eugr-2x" and result["state"] == "qualified"
        assert result["cer"] == 0.0 and result["identifiers_ok"] == 6
        assert "qualify copy RU [glm53-flash-eugr-2x]" in err


async def test_qualify_of_a_lane_that_is_not_serving_fails_cleanly(tmp_path, capsys,
                                                                   monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg):
        code = await h.sparktui(cfg, "qualify", "glm53-flash-eugr-2x", monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code == 3  # refused by its guard: nothing was asked
        assert "no container labelled sparktui.lane=glm53-flash-eugr-2x" in out + err
        assert "Traceback" not in err
        code = await h.sparktui(cfg, "qualify", "glm53-flash-eugr-2x", "--json",
                                monkeypatch=monkeypatch)
        out, _ = capsys.readouterr()
        assert code == 3 and list(json.loads(out)) == KEYS
        assert json.loads(out)["state"] == "failed"
        code = await h.sparktui(cfg, "qualify", "glm53-flash-eugr-2x", "--dry-run", "--json",
                                monkeypatch=monkeypatch)
        out, _ = capsys.readouterr()
        plan = json.loads(out)
        assert code == 3 and plan["workflow"] == "qualify" and not plan["allowed"]
        assert [v["guard"] for v in plan["verdicts"]] == ["lane"]
        assert [s["step"] for s in plan["steps"]] == ["qualify copy RU", "qualify copy EN",
                                                      "qualify identifiers", "qualify bench"]
