"""A serving recipe (recipes/<name>/recipe.toml) as frozen dataclasses.

Units: sizes on disk in decimal GB (`_gb`), memory in GiB (`_gib`), KV in
bytes per token per rank. Figures marked "measured" come from a boot log;
absent, the fit calculator derives them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from .tomlschema import Count, Fraction, GiB, GiBOrZero, Port, Range, Seconds

GB = Annotated[float, Range(0, 1_000_000, lo_open=True, unit="GB")]
Tokens = Annotated[int, Range(1, 100_000_000)]
Ranks = Annotated[int, Range(1, 1024)]
Rate = Annotated[float, Range(0, 10_000_000, lo_open=True, unit="tokens/s")]


@dataclass(frozen=True)
class ModelSpec:
    repo: str
    """Hugging Face repo id, resolved from the shared HF cache on the NAS."""
    size_gb: GB
    """Checkpoint size on disk (decimal GB, the blobs — not the symlinked snapshot)."""
    revision: str = ""
    shards: Count = 0
    """Number of safetensors shards (per-shard progress and load-time estimates)."""
    weights_per_rank_gib: GiB | None = None
    """Measured: "Model loading took X GiB" on rank 0. Derived from size_gb / ranks when absent."""
    kv_bytes_per_token: Annotated[int, Range(0, 1_000_000_000, lo_open=True)] = 0
    """KV cache bytes per token per rank (measured: KV pin / pool tokens). Leave it
    out when not measured (0 here means exactly that); a written 0 is refused: it
    is no measurement, and it would make every window fit."""
    nfs_read_per_rank_gb: GB | None = None
    """What each rank streams from the NAS while loading (decimal GB). Default: the
    whole checkpoint — with TP every shard holds a slice of every tensor, so each
    rank reads all of it (the seeds: 376 GB/rank, 704 GB/rank)."""
    served_name: str = ""


@dataclass(frozen=True)
class ParallelSpec:
    tp: Annotated[int, Range(0, 1024)] = 0
    """Tensor parallel size; 0 = one rank per node of the cluster (GB10 has one GPU)."""
    pp: Ranks = 1
    dcp: Ranks = 1
    """Decode context parallel size (DCP > 1 crashes sparse-MLA decode on our images)."""
    ep: bool = False
    """Expert parallel (vLLM --enable-expert-parallel, SGLang --ep-size = tp)."""


@dataclass(frozen=True)
class EngineSpec:
    gpu_memory_utilization: Annotated[float, Range(0, 1, lo_open=True)] = 0.85
    """vLLM GMU / SGLang mem-fraction-static. GB10 admits at most ~0.89."""
    max_model_len: Tokens = 32768
    max_num_seqs: Annotated[int, Range(1, 1_000_000)] = 8
    max_num_batched_tokens: Tokens = 8192
    kv_cache_dtype: str = "auto"
    kv_cache_memory_gib: GiB | None = None
    """KV pin (vLLM --kv-cache-memory-bytes); replaces the GMU-derived KV budget."""
    block_size: Annotated[int, Range(0, 4096)] = 0
    load_format: str = "auto"
    trust_remote_code: bool = False


@dataclass(frozen=True)
class SpeculativeSpec:
    method: str
    """vLLM speculative method, e.g. dspark, mtp, eagle3."""
    num_tokens: Annotated[int, Range(1, 64)]
    model: str = ""
    """Drafter repo; empty for methods that use the checkpoint's own heads (MTP)."""
    drafter_weights_gb: Annotated[float, Range(0, 1_000_000, unit="GB")] = 0.0
    drafter_kv_bytes_per_token: Annotated[int, Range(0, 1_000_000_000)] = 0
    """KV bytes per token of the drafter's own KV group (it shares the KV pin)."""


@dataclass(frozen=True)
class FitSpec:
    runtime_reserve_gib: GiBOrZero | None = None
    """Measured non-KV engine memory (activations at max batched tokens, CUDA graphs)."""
    pinned_extras_gib: GiBOrZero = 0.0
    """Memory pinned outside weights and KV, e.g. the DS4.1 in-memory engram tables."""
    prefill_scratch_base_gib: GiBOrZero | None = None
    prefill_scratch_gib_per_token: Fraction | None = None
    """Host memory a prefill of N tokens needs ≈ base + N × this (at max batched tokens)."""
    prefill_ceiling_tokens: Tokens | None = None
    """The longest safe prompt, measured by ``sparktui envelope`` (its scratch leaves
    ``prefill_reserve_gib``): longer prompts are refused where the product sends one."""
    prefill_reserve_gib: GiBOrZero = 1.0
    """MemAvailable a prefill must leave on every rank's node: ``sparktui envelope``
    refuses a rung predicted to leave less (the GB10 community runs earlyoom at
    512 MiB..2 GiB)."""


@dataclass(frozen=True)
class ReadinessSpec:
    stall_after_s: Seconds | None = None
    """Override of [console] stall_after_s for this recipe."""
    first_token: bool = True
    """Readiness includes one short completion (port → health → first token)."""
    canary: bool = True
    """While serving, a 1-token completion every [console] canary_interval_s
    (false: the lane may not be sent extra requests)."""
    stop_on_predicted_oom: bool = False
    """Stop the lane when the load is predicted to run a rank out of memory
    (core/oom_predict.py) with certainty; off: warn only."""


@dataclass(frozen=True)
class QualifySpec:
    """The post-boot quality gate (core/qualify.py) and the figures it is compared with
    (``sparktui record RECIPE qualify.decode_tps 33.2`` writes them)."""

    max_cer: Annotated[float, Range(0, 1, hi_open=True)] = 0.003
    """Garbled above this character error rate (the r37 garbling was ~1.2 %)."""
    decode_tps_min: Rate | None = None
    """Slow below this decode rate (tokens/s at d0 c1); None: never slow."""
    ttft_ms: Annotated[float, Range(0, 3_600_000, lo_open=True, unit="ms")] | None = None
    """Recorded time to first token at d0 c1."""
    decode_tps: Rate | None = None
    """Recorded decode tokens/s at d0 c1."""
    prefill_tps: Rate | None = None
    """Recorded prefill tokens/s at d0 c1."""


@dataclass(frozen=True)
class Recipe:
    name: str
    path: Path
    engine: str
    """``vllm`` or ``sglang``."""
    image: str
    cluster: str
    """The cluster this recipe was qualified on."""
    model: ModelSpec
    description: str = ""
    port: Port = 8000
    parallel: ParallelSpec = field(default_factory=ParallelSpec)
    engine_args: EngineSpec = field(default_factory=EngineSpec)
    speculative: SpeculativeSpec | None = None
    fit: FitSpec = field(default_factory=FitSpec)
    readiness: ReadinessSpec = field(default_factory=ReadinessSpec)
    qualify: QualifySpec = field(default_factory=QualifySpec)
    env: dict[str, str] = field(default_factory=dict)
    mounts: tuple[str, ...] = ()
    """``SRC:DST`` or ``SRC:DST:ro``; the HF cache mount is added by the renderer."""
    extra_args: tuple[str, ...] = ()
    notes: str = ""
    """Free text from notes.md beside the recipe, if any."""
