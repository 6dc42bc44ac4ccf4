"""`sparktui envelope LANE --json` (the real command) against the simulator: the
four keys, exactly; bad rungs are a usage error naming the item; a lane that is
not serving is refused by its guard, not a traceback."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from sparktui.cli.main import main
from sparktui.core.config import Config
from sparktui.core.config_load import load_config

_spec = importlib.util.spec_from_file_location(
    "cli_harness", Path(__file__).parents[1] / "ops" / "cli_harness.py")
h = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(h)  # type: ignore[union-attr]

B = "4nodes-switch-b"


def fleet(tmp_path: Path) -> Config:
    """The harness's fleet with a copy of the recipes: these commands write into them
    (never the shipped files)."""
    shutil.copytree(h.ROOT / "recipes", tmp_path / "recipes")
    h.fleet(tmp_path)
    path = tmp_path / "config.toml"
    path.write_text(path.read_text().replace(f'recipes_dir = "{h.ROOT / "recipes"}"',
                                             f'recipes_dir = "{tmp_path / "recipes"}"'))
    config = load_config(path)
    assert config.recipes_dir == tmp_path / "recipes"
    return config
KEYS = ["rungs", "scratch_fit", "ceiling_tokens", "stopped_because"]
LANE = "glm53-flash-eugr-2x"


async def test_envelope_json_has_exactly_the_issue_keys(tmp_path, capsys, monkeypatch):
    cfg = fleet(tmp_path)
    async with h.published(cfg, speed=40.0):
        code = await h.sparktui(cfg, "serve", LANE, "--cluster", B, "--yes", "--no-qualify",
                                monkeypatch=monkeypatch)
        _, err = capsys.readouterr()
        assert code == 0, err
        # the console's clock is real, the simulator's 40x: these prefills are over
        # before two memory samples, so nothing is measured and nothing recorded (the
        # measured ladder is tests/ops/test_envelope_sim.py, on the simulator's clock)
        code = await h.sparktui(cfg, "envelope", LANE, "--rungs", "4K,8K", "--json",
                                monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code == 1, err
        result = json.loads(out)
        assert list(result) == KEYS
        assert [list(r) for r in result["rungs"]] == [["tokens", "low_water_gib", "scratch_gib",
                                                       "ok"]] * 2
        assert [r["ok"] for r in result["rungs"]] == [False, False]
        assert result["scratch_fit"] is None and result["ceiling_tokens"] is None
        assert result["stopped_because"] == "completed"
        assert "the prefill was too short to be seen" in err
        text = (cfg.recipes_dir / LANE / "recipe.toml").read_text()
        assert "prefill_ceiling_tokens" not in text


async def test_envelope_of_a_lane_that_is_not_serving_is_refused(tmp_path, capsys, monkeypatch):
    cfg = fleet(tmp_path)
    async with h.published(cfg):
        code = await h.sparktui(cfg, "envelope", LANE, "--json", monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code == 3 and list(json.loads(out)) == KEYS
        assert "Traceback" not in err


@pytest.mark.parametrize("rungs,words", [("32K,8K", "strictly increasing"),
                                         ("8Q", "not a whole number")])
def test_bad_rungs_are_a_usage_error(rungs, words, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["envelope", LANE, "--rungs", rungs])
    assert exc.value.code == 2
    assert words in capsys.readouterr().err
