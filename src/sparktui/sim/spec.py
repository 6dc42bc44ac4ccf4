"""What a simulated cluster is made of (`SimSpec`), built from a `Config` or
directly by tests (e.g. 64 nodes for a scale test)."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from sparktui.core.config import Config
from sparktui.core.recipe_load import load_all_recipes

from .catalog import ModelInfo, from_recipes
from .docker import Image
from .node import NodeSpec


@dataclass
class EntitySpec:
    entity_id: str
    friendly_name: str
    state: str = "on"
    node: str = ""
    """The node this plug powers; empty for shared switches (fabric relay, fan)."""


@dataclass
class SimSpec:
    nodes: list[NodeSpec]
    entities: dict[str, EntitySpec]
    catalog: dict[str, ModelInfo]
    """What the NAS holds, by repo."""
    profiles: dict[str, ModelInfo] = field(default_factory=dict)
    """Per lane (recipe name): that configuration's envelope; falls back to the catalog."""
    cluster_switches: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Per cluster, the entities of the blocking switches its fabric needs."""
    usable_gib: float = 121.6
    runtime_reserve_gib: float = 5.0
    kernel_bad: tuple[str, ...] = ("7.0.0-1019",)
    nfs_link_mbps: float = 130.0
    """One node's share of the NAS link (the seeds' ~130 MB/s)."""
    nas_aggregate_mbps: float = 1000.0
    """What the NAS serves to all loaders together (the seeds' ~1 GB/s over the
    management fabric): 8 loaders get 125 MB/s each, 4 or fewer the full link."""
    shared_host_key: bool = False
    seed: int = 1
    scenario: str = "normal"
    stale_containers: list[tuple[str, str, str]] = field(default_factory=list)
    """(node, container name, image ref) left over from an earlier boot."""
    ha_fault: str = ""
    garbling: tuple[tuple[str, str], ...] = ()
    """(image, model repo) pairs whose engines garble copied text (r37-garble)."""
    """``""``, ``500`` or ``hang``."""
    engine_core_dies_after_s: float | None = None
    """Seconds after a lane starts serving that rank 0's engine core hangs without a
    word while its API server keeps answering /health 200 (vllm#39863, #7633)."""
    engine_core_exits_after_s: float | None = None
    """Seconds after a lane starts serving that rank 0's engine core is SIGKILLed: the
    client's one line, /health 503, the API server gone ~5 s later (vLLM 0.33
    v1/engine/core_client.py:840)."""
    dialect: str = "vllm-0.33"
    """Which release the simulated engines of that kind speak (``[simulator]
    dialect``; sim/dialects/for_engine: the other kind speaks its default)."""
    dialect_pinned: bool = False
    """The dialect was asked for by flag (``sim --dialect``): no scenario changes it."""
    silent_scan_gb: float = 0.0
    """GB each rank reads, at its NFS rate, before its first shard's progress line
    and without memory growing (a sparse shard scanned into the page cache: the
    seeds' I5, ~61 min of silence); only its /proc/<pid>/io counters move."""
    reclaim_stall_s: float = 0.0
    """Seconds a prefill that overruns its nodes' memory spends in reclaim (no token
    processed, SSH still answering) before the hosts thrash; 0: at once (22:45)."""


def default_image(tag: str = "nightly-20260913", repo: str = "vllm-node") -> Image:
    digest = hashlib.sha256(f"{repo}:{tag}".encode()).hexdigest()
    return Image(repo, tag, digest, 31_200_000_000, 1789300000.0,
                 {"sparktui.checksum": digest[:16]})


def spec_from_config(config: Config, *, seed: int | None = None) -> SimSpec:
    """The shipped fleet as the simulator sees it: every node up, every switch on,
    the NAS holding the models the recipes name, the recipes' images present."""
    recipes, _problems = load_all_recipes(config)
    catalog, profiles = from_recipes(
        recipes.values(),
        lambda c: len(config.clusters[c].nodes) if c in config.clusters else 0)
    imgs = _recipe_images(r.image for r in recipes.values())
    pin = config.guards.kernel_pin or "6.17.0-1031"
    nodes = [
        NodeSpec(name=n.name, index=i + 1, user=n.user, ib_ip=n.ib_ip,
                 hca=getattr(n, "hca", NodeSpec.hca),
                 kernel=_full_kernel(pin), hf_cache=n.hf_cache,
                 hf_cache_target=n.hf_cache_target, nas_mount=n.nas_mount, images=list(imgs))
        for i, n in enumerate(sorted(config.nodes.values(), key=lambda n: n.rank))
    ]
    entities = {
        n.switch: EntitySpec(n.switch, _friendly(n.switch), node=n.name)
        for n in config.nodes.values()
    }
    for sw in config.switches.values():
        entities[sw.entity] = EntitySpec(sw.entity, _friendly(sw.entity))
    cluster_switches = {
        name: tuple(config.switches[s].entity for s in c.switches
                    if s in config.switches and config.switches[s].blocking)
        for name, c in config.clusters.items()
    }
    return SimSpec(
        nodes=nodes, entities=entities, catalog=catalog, profiles=profiles,
        cluster_switches=cluster_switches,
        usable_gib=config.guards.node_memory_gib,
        runtime_reserve_gib=config.guards.runtime_reserve_gib,
        kernel_bad=config.guards.kernel_bad or ("7.0.0-1019",),
        shared_host_key=config.simulator.shared_host_key,
        seed=config.simulator.seed if seed is None else seed,
        scenario=config.simulator.scenario,
        dialect=config.simulator.dialect,
    )


def small_spec(n_nodes: int, *, catalog: dict[str, ModelInfo] | None = None,
               seed: int = 1) -> SimSpec:
    """A fleet of `n_nodes` identical nodes named node1..nodeN on one switch cluster."""
    names = [f"node{i}" for i in range(1, n_nodes + 1)]
    nodes = [NodeSpec(name=n, index=i + 1, ib_ip=f"127.0.{200 + (i + 1) // 250}.{(i + 1) % 250}",
                      images=[default_image()]) for i, n in enumerate(names)]
    entities = {f"switch.{n}": EntitySpec(f"switch.{n}", _friendly(f"switch.{n}"), node=n)
                for n in names}
    entities["switch.fabric"] = EntitySpec("switch.fabric", "Fabric")
    return SimSpec(nodes=nodes, entities=entities, catalog=dict(catalog or {}),
                   cluster_switches={"all": ("switch.fabric",)}, seed=seed)


def _recipe_images(refs: Iterable[str]) -> list[Image]:
    out: dict[str, Image] = {}
    for ref in refs:
        repo, _, tag = ref.rpartition(":")
        if not repo or "/" in tag:
            repo, tag = ref, "latest"
        out[f"{repo}:{tag}"] = default_image(tag, repo)
    return list(out.values()) or [default_image()]


def _full_kernel(pin: str) -> str:
    return pin if pin.endswith("-nvidia") else f"{pin}-nvidia"


def _friendly(entity: str) -> str:
    return entity.split(".", 1)[-1].replace("_", " ").title()


def rng_for(spec: SimSpec, what: str) -> random.Random:
    """A seeded random stream per purpose, so adding one use does not shift others."""
    return random.Random(f"{spec.seed}:{what}")
