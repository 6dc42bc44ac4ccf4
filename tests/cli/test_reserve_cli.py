"""Re-serving a lane name stopped earlier in the same state dir, through the
CLI on the simulator: the old stop's journaled intent (stamped on this host's
clock, days ahead of the simulator's) must not make the new boot `stopping`
(issue 25: `serve` and `wait` hung for good, the sentinel showed the lane
stopping while it served)."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "cli_harness", Path(__file__).parents[1] / "ops" / "cli_harness.py")
h = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(h)  # type: ignore[union-attr]

pytestmark = pytest.mark.usefixtures("quick_polls")

B = "4nodes-switch-b"
LANE = "glm53-full-mxfp4-4x-dspark8"
BOUND_S = 120.0
"""Real seconds for one serve through readiness at 400x: the hang was forever."""


async def test_a_stopped_lane_name_served_again_reaches_serving(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg, speed=400.0):
        for round_ in (1, 2):
            code = await asyncio.wait_for(
                h.sparktui(cfg, "serve", LANE, "--cluster", B, "--yes",
                           monkeypatch=monkeypatch), BOUND_S)
            out, err = capsys.readouterr()
            assert code == 0, (round_, err)
            assert f"serve {LANE}: done: {LANE} serving on {B}" in out, (round_, out)
            if round_ == 1:
                assert await h.sparktui(cfg, "stop", LANE, "--yes",
                                        monkeypatch=monkeypatch) == 0
        code = await asyncio.wait_for(h.sparktui(cfg, "wait", LANE, monkeypatch=monkeypatch),
                                      BOUND_S)
        out, err = capsys.readouterr()
        assert code == 0, err
