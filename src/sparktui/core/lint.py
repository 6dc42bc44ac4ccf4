"""Recipe warnings that save a night, each with its reason (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from .config import Config
from .fit import GB, fit
from .recipe import Recipe
from .render import HF_CACHE_IN_CONTAINER, metrics_off

CLUSTER_OWNED_ENV = {
    "MASTER_ADDR": "the cluster's rank-0 fabric address (nodes.<rank0>.ib_ip), which the "
                   "renderer also passes as --master-addr: the two would disagree",
    "MASTER_PORT": "clusters.<name>.master_port, which the renderer also passes: the two "
                   "would disagree",
    "NCCL_IB_GID_INDEX": "detected on each node at serve time; a pinned index turns the "
                         "detection off (the seeds' gid-drift night: the index moved after a "
                         "reboot and NCCL hung)",
}
"""Environment the cluster owns: a recipe that sets it silently overrides the cluster."""

NFS_BYTES_PER_S = 130e6
"""Per-node NFS read rate seen on the seeds' cold loads (~130 MB/s)."""
SHARD_SECONDS_ON_NFS = 40.0
"""One safetensors shard took ~28-40 s on NFS: the least a stall window must allow."""


@dataclass(frozen=True)
class LintWarning:
    recipe: str
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.recipe}: {self.key}: {self.message}"


def cold_load_seconds(recipe: Recipe) -> float:
    """Rough cold-load time: what each rank streams over NFS at ~130 MB/s."""
    m = recipe.model
    per_rank = m.nfs_read_per_rank_gb if m.nfs_read_per_rank_gb is not None else m.size_gb
    return per_rank * GB / NFS_BYTES_PER_S


def lint(config: Config, recipe: Recipe) -> list[LintWarning]:
    out: list[LintWarning] = []

    def warn(key: str, message: str) -> None:
        out.append(LintWarning(recipe.name, key, message))

    env = recipe.env
    if "VLLM_RPC_TIMEOUT" in env and recipe.engine == "vllm":
        warn("env.VLLM_RPC_TIMEOUT",
             "does not govern the 'RPC call to sample_tokens timed out' timeout: that is "
             "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS (default 300 s, TP > 1). VLLM_RPC_TIMEOUT is "
             "unused in vLLM 0.11 and gone in 0.33")
    g = config.guards
    gmu = recipe.engine_args.gpu_memory_utilization
    if gmu * g.node_memory_gib > g.admission_free_gib:
        warn("engine_args.gpu_memory_utilization",
             f"{gmu:g} x {g.node_memory_gib:g} GiB = {gmu * g.node_memory_gib:.2f} GiB is above "
             f"the {g.admission_free_gib:g} GiB GB10 admits at startup: the engine will refuse "
             f"to start (use <= {int(g.admission_free_gib / g.node_memory_gib * 100) / 100:.2f})")
    if recipe.cluster in config.clusters:
        report = fit(config, recipe, recipe.cluster)
        window = report.max_window_tokens
        if window is not None and window < recipe.engine_args.max_model_len:
            warn("engine_args.max_model_len",
                 f"{recipe.engine_args.max_model_len:,} tokens is beyond what the KV "
                 f"{'pin' if report.kv_pinned else 'budget'} holds ({window:,} tokens at "
                 f"{report.kv_bytes_per_token:,} B/token)")
    stall = recipe.readiness.stall_after_s
    if stall is not None and stall < SHARD_SECONDS_ON_NFS * 2:
        warn("readiness.stall_after_s",
             f"{stall:g} s without progress is shorter than two shards on NFS "
             f"(~{SHARD_SECONDS_ON_NFS:g} s each): a healthy cold load would be declared stalled")
    if stall is None and config.console.stall_after_s < SHARD_SECONDS_ON_NFS * 2:
        warn("console.stall_after_s",
             f"{config.console.stall_after_s:g} s would declare a healthy cold load stalled")
    if (flag := metrics_off(recipe)) is not None:
        warn("extra_args", f"{flag}: vLLM still answers /metrics, but with no vllm: series "
             "(it makes no stat logger, so no Prometheus one, nor its 'Avg prompt "
             "throughput' line): the console cannot see its decode rate, a throughput "
             "collapse, nor tell a busy engine from a dead one (the canary's split)")
    cl = config.clusters.get(recipe.cluster)
    owned = ({"MASTER_ADDR": config.nodes[cl.nodes[0]].ib_ip, "MASTER_PORT": str(cl.master_port)}
             if cl is not None and cl.nodes and cl.nodes[0] in config.nodes else {})
    for key, owner in CLUSTER_OWNED_ENV.items():
        if key in env:
            theirs = f" ({recipe.cluster}: {owned[key]!r})" if key in owned else ""
            warn(f"env.{key}", f"{env[key]!r} overrides {owner}{theirs} -> remove it from "
                               f"the recipe")
    p = recipe.parallel
    if recipe.cluster in config.clusters and p.tp:
        nodes = len(config.clusters[recipe.cluster].nodes)
        if p.tp * p.pp > nodes:
            warn("parallel.tp", f"tp {p.tp} x pp {p.pp} = {p.tp * p.pp} ranks, but cluster "
                                f"{recipe.cluster} has {nodes} nodes (one GPU each): it would "
                                f"run at tp {max(1, nodes // p.pp)}, not {p.tp}")
    for mount in recipe.mounts:
        dst = (mount.split(":") + [""])[1].rstrip("/") or "/"
        if dst == "/" or dst == HF_CACHE_IN_CONTAINER or \
                dst.startswith(HF_CACHE_IN_CONTAINER + "/"):
            what = ("the container's /" if dst == "/" else
                    f"the HF cache mount {HF_CACHE_IN_CONTAINER} (nodes.<name>.hf_cache)")
            warn("mounts", f"{mount!r} mounts onto {what}: it would hide what the cluster "
                           f"mounts there -> mount elsewhere")
    if recipe.parallel.dcp > 1:
        warn("parallel.dcp", "DCP > 1 crashes sparse-MLA decode on our images (the 512K "
             "blocker); only DCP1 is qualified")
    return out
