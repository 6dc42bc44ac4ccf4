"""What the NAS holds: the model repos the simulated engines can load, with
the size and architecture figures a real engine would know about its model.
Built from the recipes (each names its model's size, shards, KV bytes per
token and measured envelopes), except where sim/memory.py holds the engine's
hidden truth (prefill scratch ``a + b·N``, KV bytes per token) for a model."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sparktui.core.recipe import Recipe

from .memory import prefill_truth


@dataclass(frozen=True)
class ModelInfo:
    repo: str
    size_gb: float
    """Decimal GB on disk (all ranks together)."""
    shards: int = 1
    revision: str = ""
    kv_bytes_per_token: int = 16384
    """Per rank (16 KiB when a recipe has not measured it: an fp8 MLA-class figure)."""
    drafter_kv_bytes_per_token: int = 0
    weights_per_rank_gib: float | None = None
    """Measured on `qualified_ranks` ranks (scaled to other rank counts); else size / ranks."""
    qualified_ranks: int = 0
    nfs_read_per_rank_gb: float | None = None
    """What each rank streams from the NAS while loading; None: the whole checkpoint."""
    drafter_weights_gib: float = 0.0
    runtime_reserve_gib: float | None = None
    pinned_extras_gib: float = 0.0
    scratch_base_gib: float = 0.5
    scratch_gib_per_token: float = 40 / 1024 / 1024
    """Prefill scratch per prompt token (40 KiB), chosen so that the seeds' 150K prompt
    overflows a 99 GiB-weights lane with an 11 GiB KV pin while 131K at a 6 GiB pin fits."""

    @property
    def snapshot(self) -> str:
        return self.revision or hashlib.sha1(self.repo.encode()).hexdigest()


def from_recipes(recipes: Iterable[Recipe], ranks_of: Callable[[str], int]) \
        -> tuple[dict[str, ModelInfo], dict[str, ModelInfo]]:
    """(catalog by repo, profile by recipe name): a repo's architecture comes from
    the first recipe naming it; a lane's envelope (measured weights per rank,
    pinned extras, scratch) from its own recipe."""
    catalog: dict[str, ModelInfo] = {}
    profiles: dict[str, ModelInfo] = {}
    for r in recipes:
        m = r.model
        defaults = ModelInfo(m.repo, m.size_gb)
        truth = prefill_truth(m.repo, r.engine_args.max_num_batched_tokens)
        profiles[r.name] = info = ModelInfo(
            repo=m.repo,
            size_gb=m.size_gb,
            shards=max(1, m.shards),
            revision=m.revision,
            kv_bytes_per_token=(truth.kv_bytes_per_token if truth and truth.kv_bytes_per_token
                                else m.kv_bytes_per_token or defaults.kv_bytes_per_token),
            drafter_kv_bytes_per_token=(
                r.speculative.drafter_kv_bytes_per_token if r.speculative else 0
            ),
            weights_per_rank_gib=m.weights_per_rank_gib,
            qualified_ranks=ranks_of(r.cluster),
            nfs_read_per_rank_gb=m.nfs_read_per_rank_gb,
            drafter_weights_gib=(r.speculative.drafter_weights_gb * 1e9 / 2**30
                                 if r.speculative else 0.0),
            runtime_reserve_gib=r.fit.runtime_reserve_gib,
            pinned_extras_gib=r.fit.pinned_extras_gib,
            scratch_base_gib=(truth.a_gib if truth else r.fit.prefill_scratch_base_gib
                              if r.fit.prefill_scratch_base_gib is not None
                              else defaults.scratch_base_gib),
            scratch_gib_per_token=(truth.b_gib_per_token if truth
                                   else r.fit.prefill_scratch_gib_per_token
                                   if r.fit.prefill_scratch_gib_per_token is not None
                                   else defaults.scratch_gib_per_token),
        )
        catalog.setdefault(m.repo, info)
        if r.speculative and r.speculative.model and r.speculative.model not in catalog:
            catalog[r.speculative.model] = ModelInfo(
                r.speculative.model, max(0.1, r.speculative.drafter_weights_gb))
    return catalog, profiles


def repo_dir(repo: str) -> str:
    """The HF cache folder name of a repo: models--org--name."""
    return "models--" + repo.replace("/", "--")
