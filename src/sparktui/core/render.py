"""Recipe x cluster → the exact per-rank commands (pure).

Each rank gets a before-serve hook (RoCE v2 GID detection from sysfs: the GID
index drifts, 3 → 4 within 30 minutes on these nodes, so it is never pinned)
and a `docker run` whose every word is shell-quoted. The detected GID index is
passed in when the serve workflow renders the final command.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

from .config import Config, NodeConfig
from .fit import GIB, ranks_for
from .recipe import Recipe

CONTAINER_PREFIX = "sparktui-"
HF_CACHE_IN_CONTAINER = "/root/.cache/huggingface"
_IPV4_MAPPED = "0000:0000:0000:0000:0000:ffff:"


def container_name(lane: str, rank: int) -> str:
    return f"{CONTAINER_PREFIX}{lane}-r{rank}"


@dataclass(frozen=True)
class RankLaunch:
    rank: int
    node: str
    container: str
    hcas: tuple[str, ...]
    gid_probe: str
    """Before-serve hook: lists the GID types and addresses of the rank's HCAs."""
    argv_head: tuple[str, ...]
    """`docker run ...` up to the environment, without the GID variable."""
    argv_tail: tuple[str, ...]
    """Mounts, image and engine arguments."""

    def argv(self, gid_index: int | None) -> list[str]:
        gid = [] if gid_index is None else ["-e", f"NCCL_IB_GID_INDEX={int(gid_index)}"]
        return [*self.argv_head, *gid, *self.argv_tail]

    def command(self, gid_index: int | None) -> str:
        return shlex.join(self.argv(gid_index))


@dataclass(frozen=True)
class LaunchPlan:
    recipe: str
    cluster: str
    lane: str
    master_addr: str
    master_port: int
    tp: int
    ranks: tuple[RankLaunch, ...]
    notes: tuple[str, ...]


def gid_probe_command(hcas: tuple[str, ...]) -> str:
    paths = []
    for hca in hcas:
        base = f"/sys/class/infiniband/{shlex.quote(hca)}/ports/1"
        paths += [f"{base}/gid_attrs/types/*", f"{base}/gids/*"]
    return f"grep -H . {' '.join(paths)} 2>/dev/null"


def choose_gid(listing: str, hcas: tuple[str, ...]) -> int:
    """The RoCE v2 GID index carrying an IPv4 address, the same on every HCA.

    Raises ValueError with the reason when no such index exists or the HCAs
    disagree (NCCL takes one index for all of them).
    """
    types: dict[tuple[str, int], str] = {}
    gids: dict[tuple[str, int], str] = {}
    pattern = re.compile(r"/sys/class/infiniband/([^/]+)/ports/1/(gid_attrs/types|gids)/(\d+):(.*)")
    for line in listing.splitlines():
        m = pattern.fullmatch(line.strip())
        if m is None:
            continue
        key = (m.group(1), int(m.group(3)))
        (types if m.group(2) == "gid_attrs/types" else gids)[key] = m.group(4).strip()
    chosen: dict[str, int] = {}
    for hca in hcas:
        found = sorted(i for (h, i), t in types.items()
                       if h == hca and t == "RoCE v2" and gids.get((h, i), "").startswith(
                           _IPV4_MAPPED))
        if not found:
            raise ValueError(f"no RoCE v2 GID with an IPv4 address on {hca}")
        chosen[hca] = found[0]
    if len(set(chosen.values())) != 1:
        raise ValueError("HCAs disagree on the RoCE v2 GID index: "
                         + ", ".join(f"{h}={i}" for h, i in chosen.items()))
    return next(iter(chosen.values()))


def plan(config: Config, recipe: Recipe, cluster: str) -> LaunchPlan:
    ranks, tp, notes = ranks_for(config, recipe, cluster)
    nodes = config.cluster_nodes(cluster)
    c = config.clusters[cluster]
    nccl = config.nccl.get(cluster, {})
    hcas = tuple(h for h in nccl.get("NCCL_IB_HCA", "").split(",") if h)
    master = nodes[0].ib_ip
    launches = tuple(
        _rank(config, recipe, cluster, node, rank, ranks, tp, master, c.master_port, nccl, hcas)
        for rank, node in enumerate(nodes)
    )
    return LaunchPlan(recipe=recipe.name, cluster=cluster, lane=recipe.name, master_addr=master,
                      master_port=c.master_port, tp=tp, ranks=launches, notes=tuple(notes))


def _rank(config: Config, recipe: Recipe, cluster: str, node: NodeConfig, rank: int,
          nranks: int, tp: int, master: str, master_port: int, nccl: dict[str, str],
          hcas: tuple[str, ...]) -> RankLaunch:
    name = container_name(recipe.name, rank)
    labels = {
        "sparktui.lane": recipe.name, "sparktui.cluster": cluster, "sparktui.rank": str(rank),
        "sparktui.nranks": str(nranks), "sparktui.port": str(recipe.port),
        "sparktui.engine": recipe.engine,
    }
    head = ["docker", "run", "-d", "--name", name, "--network", "host", "--ipc", "host",
            "--gpus", "all", "--shm-size", "64g", "--ulimit", "memlock=-1",
            "--ulimit", "stack=67108864"]
    for key, value in labels.items():
        head += ["--label", f"{key}={value}"]
    env = {**nccl, "MASTER_ADDR": master, "MASTER_PORT": str(master_port), **recipe.env}
    for key, value in env.items():
        head += ["-e", f"{key}={value}"]
    tail = ["-v", f"{node.hf_cache}:{HF_CACHE_IN_CONTAINER}"]
    for mount in recipe.mounts:
        tail += ["-v", mount]
    tail.append(recipe.image)
    tail += (_vllm_args if recipe.engine == "vllm" else _sglang_args)(
        recipe, rank, nranks, tp, master, master_port)
    return RankLaunch(rank=rank, node=node.name, container=name, hcas=hcas,
                      gid_probe=gid_probe_command(hcas) if hcas else "",
                      argv_head=tuple(head), argv_tail=tuple(tail))


def _vllm_args(r: Recipe, rank: int, nranks: int, tp: int, master: str, port: int) -> list[str]:
    e = r.engine_args
    args = ["vllm", "serve", r.model.repo]
    if r.model.revision:
        args += ["--revision", r.model.revision]
    if r.model.served_name:
        args += ["--served-model-name", r.model.served_name]
    args += ["--host", "0.0.0.0", "--port", str(r.port), "--tensor-parallel-size", str(tp)]
    if r.parallel.pp > 1:
        args += ["--pipeline-parallel-size", str(r.parallel.pp)]
    if r.parallel.dcp > 1:
        args += ["--decode-context-parallel-size", str(r.parallel.dcp)]
    if nranks > 1:
        args += ["--nnodes", str(nranks), "--node-rank", str(rank), "--master-addr", master,
                 "--master-port", str(port)]
        if rank > 0:
            args.append("--headless")
    args += ["--gpu-memory-utilization", f"{e.gpu_memory_utilization:g}",
             "--max-model-len", str(e.max_model_len), "--max-num-seqs", str(e.max_num_seqs),
             "--max-num-batched-tokens", str(e.max_num_batched_tokens),
             "--kv-cache-dtype", e.kv_cache_dtype, "--load-format", e.load_format]
    if e.kv_cache_memory_gib is not None:
        args += ["--kv-cache-memory-bytes", str(int(e.kv_cache_memory_gib * GIB))]
    if e.block_size:
        args += ["--block-size", str(e.block_size)]
    if e.trust_remote_code:
        args.append("--trust-remote-code")
    if r.parallel.ep:
        args.append("--enable-expert-parallel")
    if r.speculative is not None:
        spec: dict[str, object] = {"method": r.speculative.method}
        if r.speculative.model:
            spec["model"] = r.speculative.model
        spec["num_speculative_tokens"] = r.speculative.num_tokens
        args += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
    return args + list(r.extra_args)


METRICS_OFF = {"vllm": ("--disable-log-stats",), "sglang": ()}
"""Flags that leave an engine's ``/metrics`` without its own series. vLLM 0.33
with ``--disable-log-stats``: ``log_stats`` is false (``v1/engine/async_llm.py:159``,
true again only with a stat-logger plugin installed, ``:153-159``), so no
``StatLoggerManager`` is made (``:204-214``) and with it neither the
``PrometheusStatLogger`` it always adds (``v1/metrics/loggers.py:1416-1419``)
nor the 10 s ``LoggingStatLogger`` line; the output handler builds no iteration
stats (``async_llm.py:884``). ``/metrics`` is still mounted, unconditionally
(``entrypoints/serve/instrumentator/metrics.py:56-81``, from
``launchers/api_server/routers.py:20``): it answers with prometheus_client's
``process_``/``python_`` series and the HTTP instrumentator's, no ``vllm:`` one.
0.11 alike (``async_llm.py:104``, ``:145``; ``mount_metrics``,
``openai/api_server.py:1522``)."""


def metrics_off(recipe: Recipe) -> str | None:
    """The flag of ``recipe`` that keeps its engine's ``/metrics`` empty, or
    None when the lane will be observable (what ``_sglang_args`` renders)."""
    for flag in METRICS_OFF.get(recipe.engine, ()):
        if any(a == flag or a.startswith(flag + "=") for a in recipe.extra_args):
            return flag
    return None


def _sglang_args(r: Recipe, rank: int, nranks: int, tp: int, master: str, port: int) -> list[str]:
    e = r.engine_args
    args = ["python3", "-m", "sglang.launch_server", "--model-path", r.model.repo]
    if r.model.revision:
        args += ["--revision", r.model.revision]
    if r.model.served_name:
        args += ["--served-model-name", r.model.served_name]
    # --tp-size by its name (``--tp`` works only as an argparse abbreviation),
    # --enable-metrics: SGLang serves no /metrics without it (arg_groups/fields/
    # parallel.py:45, observability.py:70 at 0.5.23), and the console reads it.
    args += ["--host", "0.0.0.0", "--port", str(r.port), "--tp-size", str(tp),
             "--enable-metrics"]
    if nranks > 1:
        args += ["--nnodes", str(nranks), "--node-rank", str(rank),
                 "--dist-init-addr", f"{master}:{port}"]
    args += ["--mem-fraction-static", f"{e.gpu_memory_utilization:g}",
             "--context-length", str(e.max_model_len),
             "--max-running-requests", str(e.max_num_seqs),
             "--chunked-prefill-size", str(e.max_num_batched_tokens)]
    if e.kv_cache_dtype != "auto":
        args += ["--kv-cache-dtype", e.kv_cache_dtype]
    if r.parallel.ep:
        args += ["--ep-size", str(tp)]
    if e.trust_remote_code:
        args.append("--trust-remote-code")
    return args + list(r.extra_args)
