"""Guard rules: pure functions from config, recipe and snapshots to verdicts.

Every action that changes the cluster is checked here first, from the TUI and
the CLI alike. A verdict that refuses says what, why, with the numbers, and
what would make it pass. Some refusals may be overridden by the operator
(explicitly, typed, journaled): never those that protect production nodes,
protected lanes or shared switches, and never those that make the action
impossible (node offline, image nowhere to be found, another workflow's lock).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from sparktui.core.config import Config, NodeConfig
from sparktui.core.fit import FitReport, fit
from sparktui.core.kernel import known_bad, off_pin
from sparktui.core.recipe import Recipe
from sparktui.core.render import container_name
from sparktui.core.state import ClusterSnapshot, ImageInfo, NodeSnapshot, NodeState


class Override(StrEnum):
    """The refusals an operator may override, by name (``--override NAME``)."""

    KERNEL = "kernel"
    """A kernel off the pin (not a known-bad one)."""
    FIT = "fit"
    """The memory envelope (e.g. the operator knows the load is lazy)."""
    NAS_MOUNT = "nas-mount"
    HF_CACHE = "hf-cache"
    STALE_CONTAINER = "stale-container"
    """A stopped container of the same name: the serve removes it first."""
    NODE_BUSY = "node-busy"
    """Other containers run on the node."""
    SWITCH_UNKNOWN = "switch-unknown"
    """Home Assistant did not answer for a blocking switch's state."""


def parse_overrides(names: Iterable[str]) -> frozenset[Override]:
    """``["fit", "kernel"]`` -> overrides; ValueError naming the valid ones."""
    out = set()
    for name in names:
        try:
            out.add(Override(name.strip()))
        except ValueError:
            valid = ", ".join(o.value for o in Override)
            raise ValueError(f"unknown override {name!r} (valid: {valid})") from None
    return frozenset(out)


@dataclass(frozen=True)
class Verdict:
    guard: str
    """Which rule: protected-node, protected-lane, shared-switch, blocking-switch,
    kernel, fit, online, nas-mount, hf-cache, image, stale-container, node-busy,
    runlock, host-key."""
    subject: str
    """The node, lane, cluster or entity the rule was applied to."""
    passed: bool
    message: str
    override: Override | None = None
    """The override that would let a refusal through; None: not overridable."""
    overridden: bool = False
    warning: bool = False
    """Passed, but the operator should know (duplicate host keys, a skipped node)."""

    @property
    def refused(self) -> bool:
        return not self.passed and not self.overridden

    def to_json(self) -> dict[str, object]:
        return {"guard": self.guard, "subject": self.subject, "passed": self.passed,
                "overridden": self.overridden, "warning": self.warning,
                "override": self.override.value if self.override else None,
                "message": self.message}


@dataclass(frozen=True)
class GuardReport:
    verdicts: tuple[Verdict, ...]

    @property
    def refused(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if v.refused)

    @property
    def overridden(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if v.overridden)

    @property
    def warnings(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if v.warning)

    @property
    def allowed(self) -> bool:
        return not self.refused

    def needed_overrides(self) -> frozenset[Override]:
        """Overrides that would clear every overridable refusal."""
        return frozenset(v.override for v in self.refused if v.override is not None)

    def blocking(self) -> tuple[Verdict, ...]:
        """Refusals no override can clear."""
        return tuple(v for v in self.refused if v.override is None)

    def to_json(self) -> list[dict[str, object]]:
        return [v.to_json() for v in self.verdicts]


def _report(verdicts: Iterable[Verdict], overrides: frozenset[Override]) -> GuardReport:
    out = []
    for v in verdicts:
        if not v.passed and v.override is not None and v.override in overrides:
            v = replace(v, overridden=True)
        out.append(v)
    return GuardReport(tuple(out))


# -- single rules ----------------------------------------------------------------


def protected_node(config: Config, node: str, action: str) -> Verdict:
    if node in config.guards.protected_nodes:
        return Verdict("protected-node", node, False,
                       f"{node} is a protected node ([guards] protected_nodes: "
                       f"{', '.join(config.guards.protected_nodes)}): no {action} on it from "
                       f"the console -> act on it by hand, or remove it from protected_nodes "
                       f"when production has moved")
    return Verdict("protected-node", node, True, f"{node} is not protected")


def protected_lane(config: Config, lane: str) -> Verdict:
    if lane in config.guards.protected_lanes:
        return Verdict("protected-lane", lane, False,
                       f"lane {lane} is protected ([guards] protected_lanes): the operator said "
                       f"it must NOT be stopped until they say so -> remove it from "
                       f"protected_lanes when they do")
    return Verdict("protected-lane", lane, True, f"lane {lane} is not protected")


def shared_switch_entity(config: Config, node: str) -> Verdict:
    """A node's power action must never toggle a shared switch entity."""
    entity = config.nodes[node].switch
    for sw in config.switches.values():
        if sw.entity == entity:
            return Verdict("shared-switch", node, False,
                           f"{node}'s plug entity {entity} is the shared switch {sw.name}: a node "
                           f"action never toggles a shared switch -> give {node} its own plug "
                           f"entity in config")
    if not entity:
        return Verdict("shared-switch", node, False,
                       f"{node} has no plug entity (nodes.{node}.switch is empty) -> set it")
    return Verdict("shared-switch", node, True, f"{node}'s plug {entity} is its own")


def blocking_switches(config: Config, cluster: str,
                      switch_states: Mapping[str, str | None]) -> list[Verdict]:
    """A cluster may not serve while a blocking switch it depends on is off."""
    out = []
    for name in config.clusters[cluster].switches:
        sw = config.switches[name]
        if not sw.blocking:
            continue
        state = switch_states.get(sw.entity)
        if state == "on":
            out.append(Verdict("blocking-switch", sw.entity, True, f"{name} ({sw.entity}) is on"))
        elif state is None:
            out.append(Verdict("blocking-switch", sw.entity, False,
                               f"the state of blocking switch {name} ({sw.entity}) is unknown "
                               f"(Home Assistant did not answer): the fabric may be invisible -> "
                               f"check Home Assistant, or override switch-unknown",
                               override=Override.SWITCH_UNKNOWN))
        else:
            out.append(Verdict("blocking-switch", sw.entity, False,
                               f"blocking switch {name} ({sw.entity}) is {state}: {cluster}'s "
                               f"fabric is invisible without it -> power the cluster on "
                               f"(`sparktui power cluster on {cluster}`, switch first)"))
    return out


def kernel(config: Config, node: str, running: str | None) -> Verdict:
    g = config.guards
    if running is None:
        return Verdict("kernel", node, False, f"{node}: kernel unknown (uname -r did not "
                       f"answer) -> wait for the next poll")
    if (bad := known_bad(g, running)) is not None:
        return Verdict("kernel", node, False,
                       f"{node} runs kernel {running}, known bad ({bad} breaks NCCL/RoCE) -> "
                       f"boot {node} into {g.kernel_pin or 'the pinned kernel'}")
    if off_pin(g, running):
        return Verdict("kernel", node, False,
                       f"{node} runs kernel {running}, not the pinned {g.kernel_pin} "
                       f"(NCCL/RoCE is qualified on the pin) -> boot the pinned kernel, or "
                       f"override kernel", override=Override.KERNEL)
    return Verdict("kernel", node, True, f"{node}: kernel {running}")


def fit_verdict(report: FitReport) -> Verdict:
    subject = f"{report.recipe}@{report.cluster}"
    if report.verdict == "fits":
        return Verdict("fit", subject, True,
                       f"{report.recipe} fits {report.cluster}: weights "
                       f"{report.weights_per_rank_gib:.2f} GiB/rank, margin "
                       f"{report.margin_gib:.2f} GiB")
    return Verdict("fit", subject, False,
                   f"{report.recipe} does not fit {report.cluster} ({report.ranks} ranks): "
                   + "; ".join(report.reasons), override=Override.FIT)


def online(snap: NodeSnapshot | None, node: str) -> Verdict:
    if snap is None or snap.state is not NodeState.ONLINE or snap.probe is None:
        state = snap.state.value if snap else "not polled"
        why = f" ({snap.error})" if snap and snap.error else ""
        return Verdict("online", node, False,
                       f"{node} is {state}{why}: a rank needs a node whose SSH and probe "
                       f"answer -> wait for it, or `sparktui recover {node}`")
    return Verdict("online", node, True, f"{node} is online")


def nas_mount(node: NodeConfig, snap: NodeSnapshot) -> Verdict:
    assert snap.probe is not None
    mount = snap.probe.mount_at(node.nas_mount)
    if mount is None:
        return Verdict("nas-mount", node.name, False,
                       f"{node.name}: {node.nas_mount} is not mounted (weights and the HF cache "
                       f"live on the NAS; the seeds' dgx7/8 had no fstab line) -> add the fstab "
                       f"line and `mount {node.nas_mount}`", override=Override.NAS_MOUNT)
    return Verdict("nas-mount", node.name, True,
                   f"{node.name}: {node.nas_mount} mounted ({mount.fstype} {mount.device})")


def hf_cache(node: NodeConfig, snap: NodeSnapshot) -> Verdict:
    assert snap.probe is not None
    if not node.hf_cache:
        return Verdict("hf-cache", node.name, True, f"{node.name}: no hf_cache configured")
    kind = snap.probe.hf_cache
    fix = f"rmdir {node.hf_cache} && ln -s {node.hf_cache_target} {node.hf_cache}"
    if kind is None or kind.kind == "missing":
        return Verdict("hf-cache", node.name, False,
                       f"{node.name}: {node.hf_cache} does not exist; docker -v would create it "
                       f"as an empty root-owned dir and every rank would die with "
                       f"LocalEntryNotFoundError -> ln -s {node.hf_cache_target} {node.hf_cache}",
                       override=Override.HF_CACHE)
    if not kind.is_symlink:
        return Verdict("hf-cache", node.name, False,
                       f"{node.name}: {node.hf_cache} is a {kind.kind}, not the symlink to "
                       f"{node.hf_cache_target} (docker -v created it as root; ranks die with "
                       f"LocalEntryNotFoundError) -> {fix}", override=Override.HF_CACHE)
    if (kind.target or "").rstrip("/") != node.hf_cache_target.rstrip("/"):
        return Verdict("hf-cache", node.name, False,
                       f"{node.name}: {node.hf_cache} points to {kind.target}, not "
                       f"{node.hf_cache_target} -> ln -sfn {node.hf_cache_target} "
                       f"{node.hf_cache}", override=Override.HF_CACHE)
    return Verdict("hf-cache", node.name, True,
                   f"{node.name}: {node.hf_cache} -> {node.hf_cache_target}")


def image_ref(image: str) -> str:
    """``repo`` -> ``repo:latest``; ``repo:tag`` unchanged (a registry port is not a tag)."""
    last = image.rsplit("/", 1)[-1]
    return image if ":" in last or "@" in last else f"{image}:latest"


def has_image(images: Sequence[ImageInfo] | None, image: str) -> bool:
    wanted = image_ref(image)
    return any(i.ref == wanted for i in images or ())


def image_source(config: Config, snapshot: ClusterSnapshot, image: str,
                 prefer: Sequence[str] = ()) -> str | None:
    """An online node holding ``image`` to sync from (``prefer`` first)."""
    order = [*prefer, *(n for n in config.nodes if n not in prefer)]
    for name in order:
        snap = snapshot.get(name)
        if snap and snap.online and snap.probe and has_image(snap.probe.images, image):
            return name
    return None


def image(config: Config, node: str, snap: NodeSnapshot, snapshot: ClusterSnapshot,
          wanted: str, build_node: str | None) -> Verdict:
    assert snap.probe is not None
    if has_image(snap.probe.images, wanted):
        return Verdict("image", node, True, f"{node}: image {wanted} present")
    source = image_source(config, snapshot, wanted, [build_node] if build_node else [])
    if source is None:
        return Verdict("image", node, False,
                       f"{node}: image {wanted} is missing and no online node has it to sync "
                       f"from -> pull or build it on one node (the build node)")
    return Verdict("image", node, True,
                   f"{node}: image {wanted} missing, will sync from {source} "
                   f"(docker save | docker load, checksum verified)")


def stale_container(node: str, snap: NodeSnapshot, name: str) -> Verdict:
    assert snap.probe is not None
    for c in snap.probe.containers:
        if c.name != name:
            continue
        if c.running:
            return Verdict("stale-container", node, False,
                           f"{node}: container {name} is already running ({c.status}) -> "
                           f"stop the lane first (`sparktui stop {c.lane or name}`)")
        return Verdict("stale-container", node, False,
                       f"{node}: a stale container {name} from an earlier boot exists "
                       f"({c.status}); docker run would fail on the name -> "
                       f"`docker rm {name}`, or override stale-container (serve removes it)",
                       override=Override.STALE_CONTAINER)
    return Verdict("stale-container", node, True, f"{node}: no container named {name}")


def node_free(node: str, snap: NodeSnapshot, lane: str) -> Verdict:
    assert snap.probe is not None
    others = [c for c in snap.probe.running_containers if c.lane != lane]
    if others:
        names = ", ".join(f"{c.name} ({c.lane or c.image})" for c in others)
        mem = snap.probe.meminfo
        avail = f"; MemAvailable {mem.available_gib:.1f} GiB" if mem else ""
        return Verdict("node-busy", node, False,
                       f"{node} is busy: {names} running{avail} -> stop it first, or override "
                       f"node-busy", override=Override.NODE_BUSY)
    return Verdict("node-busy", node, True, f"{node} is free")


def lane_elsewhere(config: Config, lane: str, cluster: str,
                   snapshot: ClusterSnapshot) -> list[Verdict]:
    """A lane is a recipe name: it may run on one cluster at a time (its ranks are
    found by label, so two copies would be watched and stopped as one)."""
    mine = set(config.clusters[cluster].nodes)
    out = []
    for snap in snapshot.nodes:
        if snap.node in mine or snap.probe is None:
            continue
        for c in snap.probe.running_containers:
            if c.lane == lane:
                where = c.labels.get("sparktui.cluster", "?")
                out.append(Verdict("lane-running", snap.node, False,
                                   f"lane {lane} already runs on {snap.node} ({c.name}, "
                                   f"cluster {where}): one lane per recipe name -> stop it "
                                   f"first (`sparktui stop {lane}`)"))
    return out


def runlock(node: str, holders: Mapping[str, str]) -> Verdict:
    holder = holders.get(node)
    if holder:
        return Verdict("runlock", node, False,
                       f"{node} is locked by {holder} (one workflow per node)")
    return Verdict("runlock", node, True, f"{node} is not locked")


def host_keys(nodes: Sequence[str], fingerprints: Mapping[str, str]) -> list[Verdict]:
    """Nodes sharing one SSH host key are flagged (a cloned image): a warning, since
    the key still authenticates the image, but not the individual machine."""
    by_key: dict[str, list[str]] = {}
    for name, fp in fingerprints.items():
        by_key.setdefault(fp, []).append(name)
    out = []
    for name in nodes:
        fp = fingerprints.get(name)
        if fp is None:
            continue
        twins = [n for n in by_key.get(fp, []) if n != name]
        if twins:
            out.append(Verdict("host-key", name, True,
                               f"{name} shares its SSH host key {fp} with {', '.join(twins)} "
                               f"(cloned image): a swapped machine would not be detected -> "
                               f"regenerate the host keys per node", warning=True))
    return out


# -- per action ------------------------------------------------------------------


def evaluate_serve(
    config: Config,
    recipe: Recipe,
    cluster: str,
    snapshot: ClusterSnapshot,
    *,
    switch_states: Mapping[str, str | None],
    locks: Mapping[str, str] | None = None,
    fingerprints: Mapping[str, str] | None = None,
    build_node: str | None = None,
    overrides: frozenset[Override] = frozenset(),
    fit_report: FitReport | None = None,
) -> GuardReport:
    """Every guard of ``serve RECIPE --cluster CLUSTER``, one verdict each."""
    nodes = list(config.clusters[cluster].nodes)
    verdicts: list[Verdict] = [protected_node(config, n, "serve") for n in nodes]
    verdicts += blocking_switches(config, cluster, switch_states)
    verdicts.append(fit_verdict(fit_report or fit(config, recipe, cluster)))
    verdicts += [runlock(n, locks or {}) for n in nodes]
    verdicts += lane_elsewhere(config, recipe.name, cluster, snapshot)
    for rank, name in enumerate(nodes):
        snap = snapshot.get(name)
        on = online(snap, name)
        verdicts.append(on)
        if not on.passed:
            continue
        assert snap is not None and snap.probe is not None
        node = config.nodes[name]
        verdicts.append(kernel(config, name, snap.probe.kernel))
        verdicts.append(nas_mount(node, snap))
        verdicts.append(hf_cache(node, snap))
        verdicts.append(image(config, name, snap, snapshot, recipe.image, build_node))
        verdicts.append(stale_container(name, snap, container_name(recipe.name, rank)))
        verdicts.append(node_free(name, snap, recipe.name))
    verdicts += host_keys(nodes, fingerprints or {})
    return _report(verdicts, overrides)


def evaluate_stop(config: Config, lane: str, nodes: Sequence[str],
                  locks: Mapping[str, str] | None = None) -> GuardReport:
    """``stop LANE``: not a protected lane, not on a protected node, no other lock."""
    verdicts = [protected_lane(config, lane)]
    verdicts += [protected_node(config, n, "stop") for n in nodes]
    verdicts += [runlock(n, locks or {}) for n in nodes]
    return _report(verdicts, frozenset())


def lanes_on_node(config: Config, node: str, snap: NodeSnapshot | None,
                  action: str) -> list[Verdict]:
    """Cutting a node's power kills what runs on it: never a protected lane; other
    containers are named in a warning."""
    if snap is None or snap.probe is None:
        return []
    out = []
    running = snap.probe.running_containers
    for lane in sorted({c.lane for c in running if c.lane in config.guards.protected_lanes}):
        out.append(Verdict("protected-lane", lane, False,
                           f"{node} runs a rank of protected lane {lane}: a {action} would kill "
                           f"it, and the operator said it must NOT be stopped -> move or stop "
                           f"the lane first, when they say so"))
    others = [c.name for c in running if c.lane not in config.guards.protected_lanes]
    if others:
        out.append(Verdict("node-busy", node, True,
                           f"{node} runs {', '.join(others)}: the {action} kills it",
                           warning=True))
    return out


def evaluate_power(config: Config, node: str, action: str,
                   locks: Mapping[str, str] | None = None,
                   snap: NodeSnapshot | None = None) -> GuardReport:
    """``power cycle|on|off NODE`` and ``recover NODE``; ``snap`` is the node's
    latest snapshot when it answered (what the action would kill)."""
    if node not in config.nodes:
        return GuardReport((Verdict("node", node, False, f"unknown node {node!r} (known: "
                                    f"{', '.join(config.nodes)})"),))
    verdicts = [protected_node(config, node, action), shared_switch_entity(config, node),
                runlock(node, locks or {}), *lanes_on_node(config, node, snap, action)]
    return _report(verdicts, frozenset())


@dataclass(frozen=True)
class ClusterPowerPlan:
    """What `power cluster on|off` will touch, in order."""

    cluster: str
    on: bool
    nodes: tuple[str, ...]
    """Nodes to switch, in order (protected and locked ones left out)."""
    switches_before: tuple[str, ...]
    """Shared switch entities switched before the nodes (power on)."""
    switches_after: tuple[str, ...]
    """Shared switch entities switched after the nodes (power off)."""
    report: GuardReport


def plan_cluster_power(config: Config, cluster: str, on: bool,
                       locks: Mapping[str, str] | None = None) -> ClusterPowerPlan:
    """Cluster power: protected nodes are skipped (a warning, not a refusal); on
    turns the cluster's shared switches on first, off turns them off last, and
    only a switch no other powered node depends on: a switch another cluster
    still uses (production on sw6_mt) stays on."""
    if cluster not in config.clusters:
        report = GuardReport((Verdict("cluster", cluster, False, f"unknown cluster {cluster!r} "
                                      f"(known: {', '.join(config.clusters)})"),))
        return ClusterPowerPlan(cluster, on, (), (), (), report)
    action = "power on" if on else "power off"
    verdicts: list[Verdict] = []
    nodes: list[str] = []
    for name in config.clusters[cluster].nodes:
        prot = protected_node(config, name, action)
        sw = shared_switch_entity(config, name)
        lock = runlock(name, locks or {})
        if not prot.passed:
            verdicts.append(replace(prot, passed=True, warning=True,
                                    message=f"{name} skipped: protected node"))
            continue
        verdicts += [sw, lock]
        if sw.passed and lock.passed:
            nodes.append(name)
    switches = [config.switches[s] for s in config.clusters[cluster].switches]
    before: list[str] = []
    after: list[str] = []
    if on:
        before = [s.entity for s in switches]
    else:
        leaving = set(nodes)
        for sw in switches:
            users = sorted({n for c in config.clusters.values() if sw.name in c.switches
                            for n in c.nodes} - leaving)
            if users:
                verdicts.append(Verdict("shared-switch", sw.entity, True,
                                        f"{sw.name} ({sw.entity}) stays on: also used by "
                                        f"{', '.join(users)}", warning=True))
            else:
                after.append(sw.entity)
    return ClusterPowerPlan(cluster, on, tuple(nodes), tuple(before), tuple(after),
                            _report(verdicts, frozenset()))
