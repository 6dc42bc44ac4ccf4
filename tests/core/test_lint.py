import dataclasses

from sparktui.core.lint import lint
from sparktui.core.recipe_load import load_recipe


def _keys(config, recipe):
    return {w.key: w.message for w in lint(config, recipe)}


def test_vllm_rpc_timeout_is_explained(shipped_config):
    warnings = _keys(shipped_config, load_recipe(shipped_config, "glm53-mxfp4-fp8-4x-r39"))
    assert "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS" in warnings["env.VLLM_RPC_TIMEOUT"]


def test_gmu_above_admission(shipped_config):
    warnings = _keys(shipped_config, load_recipe(shipped_config, "dsv41-flash-8x-lab-gmu091"))
    assert "110.66 GiB" in warnings["engine_args.gpu_memory_utilization"]


def test_window_beyond_pin(shipped_config):
    warnings = _keys(shipped_config,
                     load_recipe(shipped_config, "glm53-full-mxfp4-4x-dspark8-pin8"))
    assert "129,780 tokens" in warnings["engine_args.max_model_len"]


def test_stall_window_that_kills_a_cold_load(shipped_config):
    r = load_recipe(shipped_config, "dsv41-flash-8x")
    short = dataclasses.replace(r, readiness=dataclasses.replace(r.readiness, stall_after_s=30.0))
    assert "readiness.stall_after_s" in _keys(shipped_config, short)


def test_clean_recipe_has_no_warnings(shipped_config):
    assert _keys(shipped_config, load_recipe(shipped_config, "glm53-full-native-8x-dspark8")) == {}


def test_a_lane_without_metrics_is_flagged(shipped_config):
    """vLLM keeps no stat logger with --disable-log-stats (async_llm.py:159 at 0.33)."""
    r = load_recipe(shipped_config, "glm53-full-native-8x-dspark8")
    blind = dataclasses.replace(r, extra_args=(*r.extra_args, "--disable-log-stats"))
    assert "/metrics" in _keys(shipped_config, blind)["extra_args"]
    sglang = load_recipe(shipped_config, "dsv41-flash-sglang-4x")
    assert "extra_args" not in _keys(shipped_config, sglang)  # we render --enable-metrics
