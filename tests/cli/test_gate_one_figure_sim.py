"""One figure per measurement (issue 25): for one lane the CLI's `qualify`
read "346 pp / 1649.8 tg / 55 ms" and the console's `g` "2 pp / 9.9 tg /
8,710 ms": the same gate, timed on two clocks (the CLI's wall clock, the
console's simulated one). Both now run the one `Qualify` workflow and take
the bench's figures from the engine's own timers, so the same lane in the
same state prints the same numbers, and those are the engine's (the
simulator's decode rate for the lane), not a clock ratio."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest

from sparktui.core.config_load import load_config
from sparktui.service.cluster import ClusterService

_spec = importlib.util.spec_from_file_location(
    "cli_harness", Path(__file__).parents[1] / "ops" / "cli_harness.py")
h = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(h)  # type: ignore[union-attr]

pytestmark = pytest.mark.usefixtures("quick_polls")

B = "4nodes-switch-b"
LANE = "glm53-flash-eugr-2x"
SPEED = 400.0
BOUND_S = 120.0
FIGURES = ("ttft_ms", "decode_tps", "prefill_tps")


async def test_console_gate_and_cli_qualify_print_the_same_figures(tmp_path, capsys,
                                                                  monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg, speed=SPEED) as sim:
        code = await asyncio.wait_for(h.sparktui(cfg, "serve", LANE, "--cluster", B, "--yes",
                                                 "--no-qualify", monkeypatch=monkeypatch),
                                      BOUND_S)
        assert code == 0, capsys.readouterr().err
        capsys.readouterr()
        code = await h.sparktui(cfg, "qualify", LANE, "--json", monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code == 0, err
        cli = json.loads(out)

        # the console: its service on the simulator's clock, its canary out of the way
        quiet = dataclasses.replace(cfg, console=dataclasses.replace(
            cfg.console, canary_interval_s=86_400.0))
        service = ClusterService(quiet, clock=sim.clock)
        await service.start(lambda _e: None)
        try:
            preview = await service.preview_qualify(LANE)
            assert preview.allowed and preview.run is not None, preview.refusals
            result = await asyncio.wait_for(preview.run(), BOUND_S)
        finally:
            await service.stop()
        console = result.detail["qualify"]
        assert result.ok and console["state"] == cli["state"] == "qualified", result.message

        assert {k: console[k] for k in FIGURES} == {k: cli[k] for k in FIGURES}
        assert console["bench"]["clock"] == "engine"
        expected = sim.lane_rank0(LANE).decode_tps()  # the engine's rate, not SPEED times it
        assert abs(cli["decode_tps"] - expected) < 0.02 * expected, (cli, expected)
        assert console["summary"].endswith(
            f"{cli['prefill_tps']:,.0f} pp / {cli['decode_tps']:.1f} tg / "
            f"{cli['ttft_ms']:,.0f} ms"), console["summary"]


async def test_a_garbled_gate_fails_serve_and_marks_the_lane_unqualified(tmp_path, capsys,
                                                                       monkeypatch):
    """The seeds' r37 lab tree garbles DS4.1: `serve` exits 1 and says the lane
    serves UNQUALIFIED, never a plain "serving"."""
    cfg = h.fleet(tmp_path)
    lane = "dsv41-flash-eugr-0913-4x"
    async with h.published(cfg, scenario="r37-garble", speed=SPEED):
        code = await asyncio.wait_for(h.sparktui(cfg, "serve", lane, "--cluster", B, "--yes",
                                                 monkeypatch=monkeypatch), BOUND_S)
        out, err = capsys.readouterr()
        assert code == 1, (out, err)
        assert f"serve {lane}: FAILED: {lane} serving on {B}" in out, out
        assert ", UNQUALIFIED (garbled): quality gate: GARBLED (RU" in out, out


async def test_a_slow_gate_fails_serve_and_marks_the_lane_unqualified(config_copy, tmp_path,
                                                                    capsys, monkeypatch):
    """Decode below the recipe's floor: `serve` exits 1, the lane serves SLOW."""
    path = config_copy(lambda t: t.replace(
        'state_dir = "~/.local/state/sparktui"', f'state_dir = "{tmp_path / "state"}"'))
    recipe = tmp_path / "recipes" / LANE / "recipe.toml"
    recipe.write_text(recipe.read_text() + "\n[qualify]\ndecode_tps_min = 5000\n"
                                           "decode_tps = 5000\n")
    cfg = load_config(path)
    async with h.published(cfg, speed=SPEED):
        code = await asyncio.wait_for(h.sparktui(cfg, "serve", LANE, "--cluster", B, "--yes",
                                                 monkeypatch=monkeypatch), BOUND_S)
        out, err = capsys.readouterr()
        assert code == 1, (out, err)
        assert f"serve {LANE}: FAILED: {LANE} serving on {B}" in out, out
        assert ", UNQUALIFIED (slow): quality gate: SLOW" in out, out
        assert "< the recipe's floor 5000 tg (qualify.decode_tps_min)" in out, out
