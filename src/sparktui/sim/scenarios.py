"""Named scenarios: the seeds' incidents as states of the simulated world.
Each one changes the world only; the incident itself follows from the model
when the operator (or a test) does what the operator did that night."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .docker import Container
from .node import NodeSpec
from .spec import SimSpec

if TYPE_CHECKING:
    from .cluster import Sim

SCENARIOS: dict[str, str] = {
    "normal": "Every node up and clean, sw6_mt on, NAS mounted, HF cache symlinked everywhere.",
    "boot-d-oom": "Serve DS4.1 eagerly (510 GB) on 4 nodes: 127.6 GB/rank > 121.6 GiB, all "
                  "four thrash during load (09-14 14:37).",
    "long-prompt": "The 22:45 lane (99 GiB weights/rank, 11 GiB KV pin): a ~150K-token prompt "
                   "times out sample_tokens, EngineDead; dgx8's OOM killer frees it after "
                   "~25 min, dgx6+dgx7 stay hung.",
    "cache-not-symlink": "dgx6-8 have a local ~/.cache/huggingface dir instead of the NAS "
                         "symlink: their ranks die with LocalEntryNotFoundError.",
    "nas-missing": "dgx7/dgx8 have no /mnt/nas (fstab line missing): the cache symlink dangles.",
    "slow-8way-nfs": "The NAS at ~221 MB/s shared by 8 loaders (~27.7 MB/s each): "
                     "dsv41-flash-8x scans ~203 GB per rank for ~122 min, healthy.",
    "gmu-091": "Admission as on GB10 (free 108.78 GiB): a GMU 0.91 recipe is refused "
               "(needs 110.66).",
    "kv-pin-short": "An 8 GiB KV pin 80 MB short of one 131072-token request plus the "
                    "drafter's KV group: the engine refuses to start.",
    "stale-container": "An exited sparktui-glm53-full-native-8x-dspark8-r0 left on dgx1 by an "
                       "earlier boot: docker run of that rank conflicts.",
    "bad-kernel": "dgx8 runs kernel 7.0.0-1019 (breaks NCCL/RoCE): any lane with dgx8 fails "
                  "at NCCL init.",
    "switch-off": "The sw6_mt fabric relay is off: every switch cluster fails at NCCL init.",
    "shared-host-key": "All nodes share one ED25519 host key (the cloned Ubuntu image).",
    "images-missing": "dgx6-8 have no vLLM image yet (the launcher must sync it).",
    "r37-garble": "The r37 lab tree (and eugr's 0913 build of it) garbles DS4.1: ~30 "
                  "close-vocabulary typos in a 300-word text while booting, serving and "
                  "answering /health perfectly; identifiers stay intact.",
    "slow-decode": "dgx2's GPU clock is capped (a power limit left by a thermal test): lanes "
                   "with dgx2 answer correctly but decode at ~35 % of their rate.",
    "gid-drift": "dgx6's RoCE v2 IPv4 GID sits at index 4, not 3: a pinned NCCL_IB_GID_INDEX=3 "
                 "fails NCCL, detection at serve time works.",
    "silent-cold-load": "Each rank scans a 101.5 GB sparse shard at ~27.7 MB/s before any "
                        "progress line: ~61 min without a log line, MemAvailable flat (page "
                        "cache); only the engines' read bytes move (the seeds' I5).",
    "engine-dead": "Rank 0's engine core hangs silently 10 min into serving: the API server "
                   "keeps answering /health 200, completions never come back.",
    "core-exit": "Rank 0's engine core is SIGKILLed 10 min into serving: vLLM 0.33 prints "
                 "only '[shutdown] MPClient: engine core exited unexpectedly', /health turns "
                 "503 and the API server exits 5 s later.",
    "throughput-collapse": "The 22:45 lane's long prompt on hosts that reclaim ~90 s before "
                           "they wedge: zero tokens with the request running, SSH still "
                           "answering, then dgx6/dgx7 thrash.",
}

DIALECTS: dict[str, str] = {
    "core-exit": "vllm-0.33",
}
"""Scenarios that reproduce one release's behaviour speak that release (unless
``sim --dialect`` says otherwise): core-exit is vLLM 0.33's one-line core death
(``[shutdown] MPClient: ...``, v1/engine/core_client.py:839); 0.11 words it
otherwise."""

STALE_LANE = "glm53-full-native-8x-dspark8"


def scenario_listing() -> str:
    """`sim --list-scenarios` and `demo --list-scenarios`: each name and what it reproduces."""
    return "\n".join(f"{name:18} {doc}" for name, doc in SCENARIOS.items())


def apply_scenario(spec: SimSpec, name: str) -> SimSpec:
    """Change `spec` (in place) into the named scenario's world; returns it."""
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    spec.scenario = name
    if name in DIALECTS and not spec.dialect_pinned:
        spec.dialect = DIALECTS[name]
    nodes = {n.name: n for n in spec.nodes}

    def each(*names: str) -> list[NodeSpec]:
        return [nodes[n] for n in names if n in nodes]

    if name == "long-prompt":
        for n in each("dgx8"):
            n.oom_kill_after_s = 1500.0
    elif name == "engine-dead":
        spec.engine_core_dies_after_s = 600.0
    elif name == "core-exit":
        spec.engine_core_exits_after_s = 600.0
    elif name == "silent-cold-load":
        spec.silent_scan_gb = 101.5
        spec.nfs_link_mbps = 101.5e9 / 3660 / 1e6  # the seeds: 61 min for the shard
    elif name == "throughput-collapse":
        spec.reclaim_stall_s = 90.0
        for n in each("dgx8"):
            n.oom_kill_after_s = 1500.0
    elif name == "cache-not-symlink":
        for n in each("dgx6", "dgx7", "dgx8"):
            n.hf_cache_kind = "dir"
    elif name == "nas-missing":
        for n in each("dgx7", "dgx8"):
            n.nas_present = False
    elif name == "slow-8way-nfs":
        # the seeds: 203 GB per rank in 7338 s is ~27.7 MB/s a node, 8 nodes at once
        spec.nas_aggregate_mbps = 8 * 203e9 / 7338 / 1e6
    elif name == "bad-kernel":
        for n in each("dgx8"):
            n.kernel = spec.kernel_bad[0] + "-nvidia"
    elif name == "switch-off":
        for entities in spec.cluster_switches.values():
            for e in entities:
                spec.entities[e].state = "off"
    elif name == "shared-host-key":
        spec.shared_host_key = True
    elif name == "gid-drift":
        for n in each("dgx6"):
            n.gid_index = 4
    elif name == "r37-garble":
        spec.garbling = tuple((image, "deepseek-ai/DeepSeek-V4.1-Flash") for image in (
            "ghcr.io/jovian-judgement/vllm-sm121:r37",
            "ghcr.io/eugr/spark-vllm-b12x:nightly-20260913"))
    elif name == "slow-decode":
        for n in each("dgx2"):
            n.decode_factor = 0.35
    elif name == "images-missing":
        for n in each("dgx6", "dgx7", "dgx8"):
            n.images = []
    elif name == "stale-container" and spec.nodes:
        first = spec.nodes[0]
        image = first.images[0].ref if first.images else "vllm-node:latest"
        spec.stale_containers.append((first.name, f"sparktui-{STALE_LANE}-r0", image))
    return spec


def place_stale_containers(sim: Sim) -> None:
    """Containers left by an earlier boot: exited 137 an hour before the start."""
    for node_name, cname, image_ref in sim.spec.stale_containers:
        node = sim.nodes[node_name]
        if cname in node.docker.containers:
            continue
        img = node.docker.find_image(image_ref)
        if img is None:
            continue
        t = sim.wall()
        c = Container(id=sim.new_container_id(), name=cname, image=img, image_arg=image_ref,
                      args=["vllm", "serve", "zai-org/GLM-5.3"],
                      labels={"sparktui.lane": STALE_LANE, "sparktui.rank": "0"},
                      env=[], binds=[], created_t=t - 5400, status="running",
                      started_t=t - 5400)
        c.finish(t - 3600, 137)
        node.docker.containers[cname] = c
