"""What is wrong with a node (and with the fleet around it): one definition.

The serve guards (ops/guards.py), `sparktui health` and the console's nodes
pane all ask this module, so "healthy" means the same thing everywhere. Each
`Finding` says what is wrong in a few words (``summary``, for tables), the
whole story with the numbers and the fix (``message``), and whether it would
refuse a serve on that node (``blocks_serve``) and may be overridden.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .config import Config, NodeConfig
from .kernel import known_bad, off_pin
from .state import KIB_PER_GIB, NodeSnapshot, NodeState, ProbeResult

MEMTOTAL_TOLERANCE_GIB = 4.0
"""A node whose MemTotal differs from ``[guards] node_memory_gib`` by more than this
is flagged: the config describes another machine (or the node lost memory)."""


@dataclass(frozen=True)
class Finding:
    check: str
    """online, kernel, nas-mount, hf-cache, docker, memtotal, disk, blocking-switch,
    host-key, runlock, unfinished."""
    subject: str
    """The node (or switch entity, workflow id) the finding is about."""
    summary: str
    message: str
    blocks_serve: bool
    """A serve on (or needing) this subject would be refused."""
    overridable: bool = False

    def to_json(self) -> dict[str, object]:
        return {"check": self.check, "subject": self.subject, "summary": self.summary,
                "message": self.message, "blocks_serve": self.blocks_serve,
                "overridable": self.overridable}


# -- one node ------------------------------------------------------------------------


def offline(snap: NodeSnapshot | None, node: str) -> Finding | None:
    if snap is not None and snap.state is NodeState.ONLINE and snap.probe is not None:
        return None
    state = snap.state.value if snap else "not polled"
    why = f" ({snap.error})" if snap and snap.error else ""
    return Finding("online", node, f"{state}: {snap.error}" if snap and snap.error else state,
                   f"{node} is {state}{why}: a rank needs a node whose SSH and probe "
                   f"answer -> wait for it, or `sparktui recover {node}`", True)


def kernel(config: Config, node: str, running: str | None) -> Finding | None:
    g = config.guards
    if running is None:
        return Finding("kernel", node, "kernel unknown",
                       f"{node}: kernel unknown (uname -r did not answer) -> wait for the "
                       f"next poll", True)
    if (bad := known_bad(g, running)) is not None:
        return Finding("kernel", node, f"kernel {running} is known bad (breaks NCCL/RoCE)",
                       f"{node} runs kernel {running}, known bad ({bad} breaks NCCL/RoCE) -> "
                       f"boot {node} into {g.kernel_pin or 'the pinned kernel'}", True)
    if off_pin(g, running):
        return Finding("kernel", node, f"kernel {running} is not the pinned {g.kernel_pin}",
                       f"{node} runs kernel {running}, not the pinned {g.kernel_pin} "
                       f"(NCCL/RoCE is qualified on the pin) -> boot the pinned kernel, or "
                       f"override kernel", True, overridable=True)
    return None


def nas_mount(node: NodeConfig, probe: ProbeResult) -> Finding | None:
    if probe.mount_at(node.nas_mount) is not None:
        return None
    return Finding("nas-mount", node.name, f"{node.nas_mount} not mounted",
                   f"{node.name}: {node.nas_mount} is not mounted (weights and the HF cache "
                   f"live on the NAS; the seeds' dgx7/8 had no fstab line) -> add the fstab "
                   f"line and `mount {node.nas_mount}`", True, overridable=True)


def _same_path(a: str | None, b: str) -> bool:
    return (a or "").rstrip("/") == b.rstrip("/")


def hf_cache(node: NodeConfig, probe: ProbeResult) -> Finding | None:
    if not node.hf_cache:
        return None
    kind = probe.hf_cache
    want = node.hf_cache_target
    if kind is None or kind.kind == "missing":
        return Finding("hf-cache", node.name, f"HF cache {node.hf_cache} missing",
                       f"{node.name}: {node.hf_cache} does not exist; docker -v would create it "
                       f"as an empty root-owned dir and every rank would die with "
                       f"LocalEntryNotFoundError -> ln -s {want} {node.hf_cache}",
                       True, overridable=True)
    if not kind.is_symlink:
        return Finding("hf-cache", node.name,
                       f"HF cache {node.hf_cache} is a {kind.kind}, not a symlink to {want}",
                       f"{node.name}: {node.hf_cache} is a {kind.kind}, not the symlink to "
                       f"{want} (docker -v created it as root; ranks die with "
                       f"LocalEntryNotFoundError) -> rmdir {node.hf_cache} && ln -s {want} "
                       f"{node.hf_cache}", True, overridable=True)
    if not _same_path(kind.target, want):
        return Finding("hf-cache", node.name,
                       f"HF cache {node.hf_cache} -> {kind.target}, not {want}",
                       f"{node.name}: {node.hf_cache} points to {kind.target}, not {want} -> "
                       f"ln -sfn {want} {node.hf_cache}", True, overridable=True)
    return None


def docker(node: str, probe: ProbeResult) -> Finding | None:
    if probe.docker_ok:
        return None
    return Finding("docker", node, "docker not answering",
                   f"{node}: docker did not answer the probe (`docker ps` failed) -> check "
                   f"the docker daemon (`systemctl status docker`)", True)


def memtotal_gib(probe: ProbeResult | None) -> float | None:
    mem = probe.meminfo if probe else None
    return mem.total_kib / KIB_PER_GIB if mem else None


def memtotal(config: Config, node: str, probe: ProbeResult) -> Finding | None:
    """MemTotal far from ``node_memory_gib``: flagged (the fit uses the smaller)."""
    total = memtotal_gib(probe)
    want = config.guards.node_memory_gib
    if total is None or abs(total - want) <= MEMTOTAL_TOLERANCE_GIB:
        return None
    return Finding("memtotal", node, f"MemTotal {total:.1f} GiB, config says {want:g}",
                   f"{node} reports MemTotal {total:.1f} GiB but [guards] node_memory_gib is "
                   f"{want:g} GiB (more than {MEMTOTAL_TOLERANCE_GIB:g} GiB apart): the fit "
                   f"uses the smaller -> check the node (memory lost?) or the config", False)


def low_disk(config: Config, node: str, probe: ProbeResult) -> list[Finding]:
    """Each filesystem the probe's ``df`` read (``/``, the NAS mount) with less
    free space than ``[guards] disk_free_min_gib``: flagged, not refused (a boot
    may still fit; an image sync or a night of logs may not)."""
    floor = config.guards.disk_free_min_gib
    out = []
    for d in probe.disks:
        if floor <= 0 or d.available_gib >= floor:
            continue
        used = 100.0 * d.used_kib / d.size_kib if d.size_kib else 100.0
        fix = ("`docker image prune` and old container logs" if d.mountpoint == "/"
               else "old checkpoints and caches")
        out.append(Finding("disk", node, f"{d.mountpoint}: {d.available_gib:.1f} GiB free",
                           f"{node}: only {d.available_gib:.1f} GiB free on {d.mountpoint} "
                           f"({d.filesystem}, {used:.0f}% used; [guards] disk_free_min_gib = "
                           f"{floor:g}): an image sync, container logs or an HF download can "
                           f"fill it -> free space on {d.mountpoint} ({fix})", False))
    return out


def node_findings(config: Config, snap: NodeSnapshot | None, node: str) -> list[Finding]:
    """Everything wrong with one node, from its snapshot alone."""
    if (down := offline(snap, node)) is not None:
        return [down]
    assert snap is not None and snap.probe is not None
    cfg = config.nodes[node]
    probe = snap.probe
    found = [kernel(config, node, probe.kernel), nas_mount(cfg, probe), hf_cache(cfg, probe),
             docker(node, probe), memtotal(config, node, probe)]
    return [f for f in found if f is not None] + low_disk(config, node, probe)


def usable_memory_gib(config: Config, probes: Sequence[ProbeResult | None]
                      ) -> tuple[float, float]:
    """(node memory, admission free) for the fit: the configured figures, lowered when
    a node reports less MemTotal (the GB10 baseline, ``node_memory_gib -
    admission_free_gib``, is kept)."""
    g = config.guards
    totals = [t for t in (memtotal_gib(p) for p in probes) if t is not None]
    node_mem = min([g.node_memory_gib, *totals])
    baseline = g.node_memory_gib - g.admission_free_gib
    return node_mem, min(g.admission_free_gib, node_mem - baseline)


# -- the fleet around the nodes -----------------------------------------------------------


def blocking_switch(config: Config, cluster: str, switch: str,
                    state: str | None) -> Finding | None:
    """A blocking shared switch the cluster depends on that is not on (``state`` None:
    Home Assistant did not answer)."""
    sw = config.switches[switch]
    if not sw.blocking or state == "on":
        return None
    if state is None:
        return Finding("blocking-switch", sw.entity, f"{sw.entity} state unknown",
                       f"the state of blocking switch {sw.name} ({sw.entity}) is unknown "
                       f"(Home Assistant did not answer): the fabric may be invisible -> "
                       f"check Home Assistant, or override switch-unknown", True,
                       overridable=True)
    return Finding("blocking-switch", sw.entity, f"{sw.entity} is {state}",
                   f"blocking switch {sw.name} ({sw.entity}) is {state}: {cluster}'s "
                   f"fabric is invisible without it -> power the cluster on "
                   f"(`sparktui power cluster on {cluster}`, switch first)", True)


def shared_host_keys(nodes: Sequence[str], fingerprints: Mapping[str, str]) -> list[Finding]:
    """Nodes sharing one SSH host key (a cloned image): the key authenticates the
    image, not the machine. Flagged, not refused."""
    by_key: dict[str, list[str]] = {}
    for name, key in fingerprints.items():
        by_key.setdefault(key, []).append(name)
    out = []
    for name in nodes:
        fp = fingerprints.get(name)
        if fp is None:
            continue
        twins = sorted(n for n in by_key.get(fp, []) if n != name)
        if twins:
            out.append(Finding("host-key", name, f"shares its SSH host key with "
                                                 f"{', '.join(twins)}",
                               f"{name} shares its SSH host key {fp} with {', '.join(twins)} "
                               f"(cloned image): a swapped machine would not be detected -> "
                               f"regenerate the host keys per node", False))
    return out
