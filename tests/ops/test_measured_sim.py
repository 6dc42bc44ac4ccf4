"""Measured at boot, kept: a serve journals what the engine printed of its memory
(through the phase tracker), and `sparktui fit` uses it first. The seeds' safe
r39 lane (131072 window, 6 GiB KV pin) is refused by the night's 52.7 KB/token
("short by 0.59 GiB"); once a boot has run it, the fit believes the boot's KV
bytes per token, says which assumption it doubts, and shows predicted vs
measured side by side."""

from __future__ import annotations

import json

from sparktui.cli.main import main
from sparktui.core.recipe_load import load_recipe
from sparktui.ops.guards import Override
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.serve import Serve, ServeOptions

SAFE = "glm53-mxfp4-fp8-4x-r39"


async def test_a_boot_measures_and_the_fit_believes_it(sim_ctx, fleet_config, capsys):
    config_path = str(fleet_config.path)
    recipe = load_recipe(fleet_config, SAFE)
    async with sim_ctx(speed=400.0) as (_sim, ctx, _):
        options = ServeOptions(overrides=frozenset({Override.FIT}), poll_s=5.0, qualify=False)
        plan = await prepare(ctx, Serve(recipe, recipe.cluster, options))
        (fit_v,) = [v for v in plan.report.verdicts if v.guard == "fit"]
        assert "short by 0.59 GiB" in fit_v.message and fit_v.overridden
        result = await execute(ctx, plan)
        assert result.ok, result.message
        m = result.detail["measured"]
        assert m["weights_per_rank_gib"] == 98.86 and m["kv_pool_gib"] == 6.0
        assert m["kv_pool_tokens"] and m["max_model_len"] == 131072
        marks = m["mem_available_gib"]
        # the last reading in each phase the serve's memory poll caught, and the latest
        assert {"after_load", "headroom"} <= set(marks), marks
        assert marks["after_load"] > marks["headroom"] > 0
        assert abs(marks["headroom"] - 9.92) < 1.0  # 118.78 - 98.86 - 4 runtime - 6 KV
    args = ["fit", SAFE, "--json", "--config", config_path]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "fits"
    assert out["measured"]["boot"] == result.wf
    assert 46_000 < out["measured"]["kv_bytes_per_token"] < 48_000
    assert out["predicted"]["kv_bytes_per_token"] == 53946
    assert any("the recipe's 53,946 is the assumption doubted" in n for n in out["notes"])
    assert main(["fit", SAFE, "--config", config_path]) == 0
    text = capsys.readouterr().out
    assert f"predicted vs measured (boot {result.wf}):" in text
    assert "KV bytes per token" in text and "53,946" in text
    assert "headroom serving" in text and "free after load" in text
    assert main(["fit", SAFE, "--record", "--config", config_path]) == 0
    err = capsys.readouterr().err
    assert "model.weights_per_rank_gib = 98.86, model.kv_bytes_per_token = " in err
    text = (fleet_config.recipes_dir / SAFE / "recipe.toml").read_text()
    assert f"# measured at boot {result.wf}" in text
    assert load_recipe(fleet_config, SAFE).model.kv_bytes_per_token == \
        out["measured"]["kv_bytes_per_token"]
