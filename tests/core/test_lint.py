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
    """vLLM keeps no stat logger with --disable-log-stats (async_llm.py:159 at 0.33):
    its /metrics answers without a vllm: series."""
    r = load_recipe(shipped_config, "glm53-full-native-8x-dspark8")
    blind = dataclasses.replace(r, extra_args=(*r.extra_args, "--disable-log-stats"))
    assert "still answers /metrics, but with no vllm: series" in \
        _keys(shipped_config, blind)["extra_args"]
    sglang = load_recipe(shipped_config, "dsv41-flash-sglang-4x")
    assert "extra_args" not in _keys(shipped_config, sglang)  # we render --enable-metrics


def _recipe_with(shipped_config, **changes):
    r = load_recipe(shipped_config, "glm53-full-mxfp4-4x-dspark8")
    return dataclasses.replace(r, **changes)


def test_cluster_owned_env_is_a_warning_naming_both_values(shipped_config):
    """Issue 27: env.MASTER_ADDR silently replaced the cluster's while --master-addr
    stayed; a pinned NCCL_IB_GID_INDEX silently dropped GID detection."""
    r = _recipe_with(shipped_config, env={"MASTER_ADDR": "10.9.9.9", "NCCL_IB_GID_INDEX": "3"})
    found = {w.key: w.message for w in lint(shipped_config, r)}
    head = shipped_config.clusters[r.cluster].nodes[0]
    assert "'10.9.9.9'" in found["env.MASTER_ADDR"]
    assert repr(shipped_config.nodes[head].ib_ip) in found["env.MASTER_ADDR"]
    assert "'3'" in found["env.NCCL_IB_GID_INDEX"] and "detection" in found["env.NCCL_IB_GID_INDEX"]


def test_tp_beyond_the_cluster_and_mounts_over_owned_paths(shipped_config):
    r = _recipe_with(shipped_config, mounts=("/data:/", "/x:/root/.cache/huggingface:ro",
                                             "/ok:/workspace"))
    r = dataclasses.replace(r, parallel=dataclasses.replace(r.parallel, tp=16))
    nodes = len(shipped_config.clusters[r.cluster].nodes)
    warnings = [w for w in lint(shipped_config, r)]
    tp = [w.message for w in warnings if w.key == "parallel.tp"]
    assert tp and "tp 16" in tp[0] and f"{nodes} nodes" in tp[0]
    mounts = [w.message for w in warnings if w.key == "mounts"]
    assert len(mounts) == 2 and "container's /" in mounts[0] and "HF cache" in mounts[1]
