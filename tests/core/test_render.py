"""Rendering: every shipped recipe on its cluster, quoting, GID detection."""

from __future__ import annotations

import dataclasses
import shlex

import pytest

from sparktui.core.recipe_load import load_all_recipes, load_recipe
from sparktui.core.render import choose_gid, container_name, plan


def test_every_shipped_recipe_renders_on_its_cluster(shipped_config):
    recipes, _ = load_all_recipes(shipped_config)
    for r in recipes.values():
        launch = plan(shipped_config, r, r.cluster)
        nodes = shipped_config.clusters[r.cluster].nodes
        assert [x.node for x in launch.ranks] == list(nodes)
        for x in launch.ranks:
            argv = shlex.split(x.command(3))
            assert argv[:3] == ["docker", "run", "-d"]
            assert f"sparktui.rank={x.rank}" in argv
            assert "NCCL_IB_GID_INDEX=3" in argv
            assert r.image in argv


def test_vllm_multinode_arguments(shipped_config):
    r = load_recipe(shipped_config, "glm53-full-native-8x-dspark8")
    launch = plan(shipped_config, r, "8nodes-switch")
    assert launch.master_addr == shipped_config.nodes["dgx1"].ib_ip and launch.tp == 8
    r0, r5 = shlex.split(launch.ranks[0].command(3)), shlex.split(launch.ranks[5].command(3))
    assert r0[r0.index("--node-rank") + 1] == "0" and "--headless" not in r0
    assert r5[r5.index("--node-rank") + 1] == "5" and "--headless" in r5
    assert r0[r0.index("--tensor-parallel-size") + 1] == "8"
    assert r0[r0.index("--nnodes") + 1] == "8"
    assert '{"method":"dspark","model":"RedHatAI/GLM-5.3-speculator.dspark",' \
           '"num_speculative_tokens":8}' in r0
    assert "MASTER_ADDR=" + launch.master_addr in r0
    assert "NCCL_IB_HCA=rocep1s0f0,roceP2p1s0f0" in r0
    assert "/home/kilork/.cache/huggingface:/root/.cache/huggingface" in r0
    assert launch.ranks[0].container == container_name(r.name, 0)


def test_kv_pin_renders_bytes(shipped_config):
    r = load_recipe(shipped_config, "glm53-full-mxfp4-4x-dspark8")
    argv = shlex.split(plan(shipped_config, r, r.cluster).ranks[0].command(None))
    assert argv[argv.index("--kv-cache-memory-bytes") + 1] == str(9 * 1024**3)
    assert not any(a.startswith("NCCL_IB_GID_INDEX") for a in argv)


def test_sglang_arguments(shipped_config):
    r = load_recipe(shipped_config, "dsv41-flash-sglang-4x")
    argv = shlex.split(plan(shipped_config, r, r.cluster).ranks[2].command(4))
    assert argv[argv.index("--model-path") + 1] == "deepseek-ai/DeepSeek-V4.1-Flash"
    assert argv[argv.index("--dist-init-addr") + 1].endswith(":29501")
    assert argv[argv.index("--node-rank") + 1] == "2"
    assert argv[argv.index("--mem-fraction-static") + 1] == "0.85"
    assert argv[argv.index("--ep-size") + 1] == "4"
    # SGLang 0.5.23: --tp-size by name (arg_groups/fields/parallel.py:45); no /metrics
    # without --enable-metrics (arg_groups/fields/observability.py:70)
    assert argv[argv.index("--tp-size") + 1] == "4" and "--tp" not in argv
    assert "--enable-metrics" in argv


def test_values_are_quoted_even_if_odd(shipped_config):
    r = load_recipe(shipped_config, "glm53-flash-eugr-2x")
    odd = dataclasses.replace(r, env={"NOTE": "a b'c"})   # bypasses validation on purpose
    cmd = plan(shipped_config, odd, r.cluster).ranks[0].command(1)
    assert "NOTE=a b'c" in shlex.split(cmd)


LISTING = """\
/sys/class/infiniband/rocep1s0f0/ports/1/gid_attrs/types/0:IB/RoCE v1
/sys/class/infiniband/rocep1s0f0/ports/1/gid_attrs/types/1:RoCE v2
/sys/class/infiniband/rocep1s0f0/ports/1/gid_attrs/types/2:IB/RoCE v1
/sys/class/infiniband/rocep1s0f0/ports/1/gid_attrs/types/3:RoCE v2
/sys/class/infiniband/rocep1s0f0/ports/1/gids/0:fe80:0000:0000:0000:0eaa:aaff:feaa:aaaa
/sys/class/infiniband/rocep1s0f0/ports/1/gids/1:fe80:0000:0000:0000:0eaa:aaff:feaa:aaaa
/sys/class/infiniband/rocep1s0f0/ports/1/gids/2:0000:0000:0000:0000:0000:ffff:c0a8:c80f
/sys/class/infiniband/rocep1s0f0/ports/1/gids/3:0000:0000:0000:0000:0000:ffff:c0a8:c80f
/sys/class/infiniband/rocep1s0f0/ports/1/gids/4:0000:0000:0000:0000:0000:0000:0000:0000
"""


def test_choose_gid_picks_roce_v2_ipv4():
    assert choose_gid(LISTING, ("rocep1s0f0",)) == 3
    both = LISTING + LISTING.replace("rocep1s0f0", "roceP2p1s0f0")
    assert choose_gid(both, ("rocep1s0f0", "roceP2p1s0f0")) == 3


def test_choose_gid_refuses_disagreement_and_absence():
    drifted = LISTING + LISTING.replace("rocep1s0f0", "roceP2p1s0f0").replace(
        "types/3:RoCE v2", "types/3:IB/RoCE v1").replace(
        "types/2:IB/RoCE v1", "types/2:RoCE v2")
    with pytest.raises(ValueError, match="disagree"):
        choose_gid(drifted, ("rocep1s0f0", "roceP2p1s0f0"))
    with pytest.raises(ValueError, match="no RoCE v2 GID"):
        choose_gid("", ("rocep1s0f0",))
