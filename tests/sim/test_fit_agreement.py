"""The simulated engines size their KV pool as core/fit.py does: for every
shipped recipe that fits, the KV line rank 0 logs carries fit's pool."""

from __future__ import annotations

import re

import pytest

from sparktui.core.fit import fit
from sparktui.core.recipe_load import list_recipes, load_recipe
from sparktui.sim.testing import running_sim

from .conftest import ROOT, exec_on, logs_cmd


def fitting_recipes() -> list[str]:
    from sparktui.core.config_load import load_config

    config = load_config(ROOT / "config.toml")
    out = []
    for name in list_recipes(config.recipes_dir):
        recipe = load_recipe(config, name)
        report = fit(config, recipe, recipe.cluster)
        if report.verdict == "fits" and report.pool_tokens and recipe.engine == "vllm":
            out.append(name)
    return out


@pytest.mark.parametrize("name", fitting_recipes())
async def test_kv_pool_matches_fit(fleet, serve, name):
    recipe = load_recipe(fleet, name)
    expected = fit(fleet, recipe, recipe.cluster).pool_tokens
    async with running_sim(fleet) as sim:
        await serve(sim, name)
        await sim.advance(4 * 3600)
        first = fleet.clusters[recipe.cluster].nodes[0]
        logs, _, _ = await exec_on(sim, first, logs_cmd(f"sparktui-{name}-r0"))
    m = re.search(r"GPU KV cache size: ([\d,]+) tokens", logs)
    assert m is not None, logs[-2000:]
    assert int(m.group(1).replace(",", "")) == pytest.approx(expected, abs=2)
