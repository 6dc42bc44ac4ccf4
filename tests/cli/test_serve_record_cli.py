"""Measured at boot, recorded with the operator's yes (issue 29): after a boot,
`sparktui serve` prints what the engine measured that the recipe does not say
yet; without a terminal (or with --yes) it prints the command that records it
and writes nothing; at a terminal it asks, and a yes records it through the
record path (comments kept, each value noted with the boot)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from sparktui.core.config_load import load_config
from sparktui.core.recipe_load import load_recipe

from .test_envelope_cli import LANE, B, fleet

_spec = importlib.util.spec_from_file_location(
    "cli_harness", Path(__file__).parents[1] / "ops" / "cli_harness.py")
h = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(h)  # type: ignore[union-attr]


async def test_serve_offers_the_measured_figures_and_records_on_yes(tmp_path, capsys,
                                                                    monkeypatch):
    cfg = fleet(tmp_path)
    # served twice: the lane is stopped in between (the shipped config protects it)
    cfg.path.write_text(cfg.path.read_text().replace(f'protected_lanes = ["{LANE}"]',
                                                     "protected_lanes = []"))
    cfg = load_config(cfg.path)
    assert LANE not in cfg.guards.protected_lanes
    path = cfg.recipes_dir / LANE / "recipe.toml"
    before = path.read_text()
    async with h.published(cfg, speed=40.0):
        code = await h.sparktui(cfg, "serve", LANE, "--cluster", B, "--yes", "--no-qualify",
                                monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code == 0, err
        assert "measured at boot serve-" in out and "KV pool" in out, out
        assert "not in the recipe yet: " in out and "model.kv_bytes_per_token = " in out, out
        assert f"record them: `sparktui fit {LANE} --cluster {B} --record`" in out, out
        assert path.read_text() == before  # --yes does not stand in for this yes
        assert await h.sparktui(cfg, "stop", LANE, "--yes", monkeypatch=monkeypatch) == 0
        capsys.readouterr()
        # at a terminal: the serve's own yes, then the record's
        code = await h.sparktui(cfg, "serve", LANE, "--cluster", B, "--no-qualify",
                                stdin=h.Terminal("y\ny\n"), monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code == 0, err
        assert "record the boot's figures into" in err
        assert f"{path}: " in out and "model.kv_bytes_per_token = " in out, out
    text = path.read_text()
    assert "# measured at boot serve-" in text
    assert [line for line in before.splitlines() if line.lstrip().startswith("#")] == \
        [line for line in text.splitlines()
         if line.lstrip().startswith("#") and "measured at boot" not in line]  # comments kept
    recipe = load_recipe(cfg, LANE)
    assert recipe.model.kv_bytes_per_token > 0
