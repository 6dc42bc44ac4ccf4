"""The OOM predictor on synthetic loads: quiet whenever the final footprint
fits (whatever the noise of the log lagging the memory), early and specific
when it does not, and the plan taken from the recipe's fit."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.config_load import load_config
from sparktui.core.fit import fit
from sparktui.core.oom_predict import LoadPlan, OomPredictor, load_plan
from sparktui.core.recipe_load import load_recipe

ROOT = Path(__file__).resolve().parents[2]
AVAILABLE0 = 117.6
"""MemAvailable of an idle GB10 once the CUDA context is up (121.6 - OS - context)."""


def replay(plan: LoadPlan, shards: int, weights: float, lag: list[int], s_per_shard=40.0,
           every=10.0):
    """Read memory every ``every`` s of a load that really holds ``weights`` GiB;
    the log's shard count lags by ``lag[i]`` shards at reading i."""
    p = OomPredictor("lane", plan)
    out = []
    t, i = 0.0, 0
    while t < shards * s_per_shard:
        true_done = min(shards, int(t / s_per_shard))
        seen = max(0, true_done - lag[i % len(lag)])
        avail = AVAILABLE0 - weights * true_done / shards
        if (w := p.observe(0, "dgx1", t, seen, shards, avail)) is not None:
            out.append(w)
        t += every
        i += 1
    return out


@settings(deadline=None, max_examples=60)
@given(st.floats(20, 105), st.lists(st.integers(0, 1), min_size=1, max_size=5),
       st.integers(20, 160))
def test_quiet_whenever_the_final_footprint_fits(weights, lag, shards):
    after = max(0.0, AVAILABLE0 - weights - 2.0)  # up to 2 GiB short of full
    assert replay(LoadPlan(weights, after), shards, weights, lag) == []


def test_boot_d_is_predicted_in_the_first_minutes_with_where_and_when():
    plan = LoadPlan(118.8, 5.0, min_ranks=5)
    warnings = replay(plan, 96, 118.8, [0, 1])
    first = warnings[0]
    assert first.shards_done <= 6
    assert first.out_at_shard in (95, 96) and first.hard
    assert first.eta_s is not None and first.eta_s > 50 * 60
    assert first.need_gib > first.available_gib
    assert "runs out at shard" in first.message() and ">= 5 ranks" in first.message()


def test_a_kv_allocation_that_does_not_fit_is_predicted_after_the_load():
    w = replay(LoadPlan(60.0, 62.0), 50, 60.0, [0])[0]
    assert w.out_at_shard is None and "at KV allocation after the load" in w.message()


def test_the_plan_comes_from_the_fit():
    config = load_config(ROOT / "config.toml")
    boot_d = load_plan(fit(config, load_recipe(config, "dsv41-flash-r37-4x-eager"),
                           "4nodes-switch"))
    assert round(boot_d.weights_gib, 1) == 118.8 and boot_d.min_ranks == 5
    pinned = fit(config, load_recipe(config, "glm53-full-mxfp4-4x-dspark8"), "4nodes-switch")
    plan = load_plan(pinned)
    assert plan.after_load_gib >= pinned.kv_available_gib
