"""The service's recipe copies follow their files (service/recipe_copies.py):
a recipe written after the service started (`sparktui record`, an envelope, a
bench, a boot's figures: ops/recipe_record.py) is what the next serve preview
uses; a recipe made invalid on disk keeps the copy held."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

from sparktui.core.recipe_load import recipe_file
from sparktui.ops.recipe_record import record

from .simnight import Night, night

T = TypeVar("T")
RECIPE = "glm53-mxfp4-fp8-4x-r39-196k"
CLUSTER = "4nodes-switch-b"


async def done(n: Night, aw: Awaitable[T]) -> T:
    """``aw``'s result, stepping simulated time until it has one (its SSH reads)."""
    task = asyncio.ensure_future(aw)
    try:
        for _ in range(600):
            if task.done():
                break
            await n.sim.clock.advance(0.5, step=0.5)
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
    return task.result()


async def test_the_next_serve_preview_uses_the_recipe_as_written(tmp_path: Path) -> None:
    async with night(tmp_path, "normal", CLUSTER, own_recipes=True) as n:
        before = await done(n, n.service.preview_serve(RECIPE, CLUSTER))
        assert [v.guard for v in before.refusals] == ["fit"], before.refusals
        assert "cap max_model_len at 112,333" in before.refusals[0].message
        # the window capped as the fit says, written while the service runs
        record(n.config, RECIPE, {"engine_args.max_model_len": 98304}, note="capped")
        after = await done(n, n.service.preview_serve(RECIPE, CLUSTER))
        assert after.allowed, after.refusals
        assert n.service.recipes[RECIPE].engine_args.max_model_len == 98304
        assert n.service.recipe(RECIPE) is n.service.recipes[RECIPE]  # read once per change

        # broken on disk: the copy read before is kept, the preview still answers
        path = recipe_file(n.config.recipes_dir, RECIPE)
        path.write_text(path.read_text() + "\n[[[\n")
        assert n.service.recipe(RECIPE).engine_args.max_model_len == 98304
