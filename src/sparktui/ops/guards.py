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

from sparktui.core import nodehealth
from sparktui.core.config import Config, NodeConfig
from sparktui.core.fit import FitReport, fit
from sparktui.core.recipe import Recipe
from sparktui.core.render import container_name
from sparktui.core.state import ClusterSnapshot, ImageInfo, NodeSnapshot


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
    PROMPT_LENGTH = "prompt-length"
    """A prompt beyond the lane's measured ceiling (or, unmeasured, beyond the
    ladder's first rung)."""


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


def merged(report: GuardReport, more: Iterable[Verdict]) -> GuardReport:
    """``report`` with the verdicts of ``more`` it does not already hold (one
    verdict per guard and subject: the first one stays)."""
    seen = {(v.guard, v.subject) for v in report.verdicts}
    extra = []
    for v in more:
        if (v.guard, v.subject) not in seen:
            seen.add((v.guard, v.subject))
            extra.append(v)
    return GuardReport((*report.verdicts, *extra))


def evaluate(verdicts: Iterable[Verdict], overrides: frozenset[Override]) -> GuardReport:
    """A workflow's own verdicts as a report, ``overrides`` applied (qualify, envelope)."""
    return _report(verdicts, overrides)


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


def _from(f: nodehealth.Finding | None, guard: str, subject: str, ok: str) -> Verdict:
    """A node-health finding as a verdict (the one definition lives in core/nodehealth)."""
    if f is None:
        return Verdict(guard, subject, True, ok)
    override = FINDING_OVERRIDES.get(f.check) if f.overridable else None
    return Verdict(guard, subject, not f.blocks_serve, f.message, override=override,
                   warning=not f.blocks_serve)


FINDING_OVERRIDES = {"kernel": Override.KERNEL, "nas-mount": Override.NAS_MOUNT,
                     "hf-cache": Override.HF_CACHE, "blocking-switch": Override.SWITCH_UNKNOWN}


def blocking_switches(config: Config, cluster: str,
                      switch_states: Mapping[str, str | None]) -> list[Verdict]:
    """A cluster may not serve while a blocking switch it depends on is off."""
    out = []
    for name in config.clusters[cluster].switches:
        sw = config.switches[name]
        if sw.blocking:
            found = nodehealth.blocking_switch(config, cluster, name, switch_states.get(sw.entity))
            out.append(_from(found, "blocking-switch", sw.entity, f"{name} ({sw.entity}) is on"))
    return out


def kernel(config: Config, node: str, running: str | None) -> Verdict:
    return _from(nodehealth.kernel(config, node, running), "kernel", node,
                 f"{node}: kernel {running}")


def fit_verdict(report: FitReport, memory_note: str = "") -> Verdict:
    subject = f"{report.recipe}@{report.cluster}"
    if report.verdict == "fits":
        return Verdict("fit", subject, True,
                       f"{report.recipe} fits {report.cluster}: weights "
                       f"{report.weights_per_rank_gib:.2f} GiB/rank, margin "
                       f"{report.margin_gib:.2f} GiB{memory_note}")
    if report.verdict == "unknown":
        return Verdict("fit", subject, False,
                       f"whether {report.recipe} fits {report.cluster} is unknown: "
                       + "; ".join(report.unknowns) + memory_note, override=Override.FIT)
    return Verdict("fit", subject, False,
                   f"{report.recipe} does not fit {report.cluster} ({report.ranks} ranks): "
                   + "; ".join(report.reasons) + memory_note, override=Override.FIT)


def fit_on_nodes(config: Config, recipe: Recipe, cluster: str,
                 snapshot: ClusterSnapshot) -> tuple[FitReport, str]:
    """The fit with the memory the cluster's nodes report: the smaller of ``[guards]
    node_memory_gib`` and each node's MemTotal (less the GB10 baseline at admission).
    Returns the report and a note saying when the nodes' figure was used."""
    g = config.guards
    probes = [s.probe if (s := snapshot.get(n)) else None for n in config.clusters[cluster].nodes]
    node_mem, admission = nodehealth.usable_memory_gib(config, probes)
    if node_mem >= g.node_memory_gib:
        return fit(config, recipe, cluster), ""
    lowered = replace(config, guards=replace(g, node_memory_gib=node_mem,
                                             admission_free_gib=admission))
    return fit(lowered, recipe, cluster), (
        f" (node memory {node_mem:.1f} GiB from the nodes' MemTotal, below the configured "
        f"{g.node_memory_gib:g}; admission {admission:.2f} GiB)")


def online(snap: NodeSnapshot | None, node: str) -> Verdict:
    return _from(nodehealth.offline(snap, node), "online", node, f"{node} is online")


def nas_mount(node: NodeConfig, snap: NodeSnapshot) -> Verdict:
    assert snap.probe is not None
    mount = snap.probe.mount_at(node.nas_mount)
    ok = (f"{node.name}: {node.nas_mount} mounted ({mount.fstype} {mount.device})" if mount
          else "")
    return _from(nodehealth.nas_mount(node, snap.probe), "nas-mount", node.name, ok)


def hf_cache(node: NodeConfig, snap: NodeSnapshot) -> Verdict:
    assert snap.probe is not None
    ok = (f"{node.name}: {node.hf_cache} -> {node.hf_cache_target}" if node.hf_cache
          else f"{node.name}: no hf_cache configured")
    return _from(nodehealth.hf_cache(node, snap.probe), "hf-cache", node.name, ok)


def docker(node: str, snap: NodeSnapshot) -> Verdict:
    assert snap.probe is not None
    return _from(nodehealth.docker(node, snap.probe), "docker", node,
                 f"{node}: docker answers")


def image_ref(image: str) -> str:
    """``repo`` -> ``repo:latest``; ``repo:tag`` unchanged (a registry port is not a tag)."""
    last = image.rsplit("/", 1)[-1]
    return image if ":" in last or "@" in last else f"{image}:latest"


def has_image(images: Sequence[ImageInfo] | None, image: str) -> bool:
    wanted = image_ref(image)
    return any(i.ref == wanted for i in images or ())


def protected_work(config: Config, snapshot: ClusterSnapshot) -> frozenset[str]:
    """Nodes whose work must not be disturbed: the protected nodes and every node
    running a rank of a protected lane."""
    out = set(config.guards.protected_nodes)
    for snap in snapshot.nodes:
        if snap.probe and any(c.lane in config.guards.protected_lanes
                              for c in snap.probe.running_containers):
            out.add(snap.node)
    return frozenset(out)


@dataclass(frozen=True)
class ImageSource:
    node: str
    why: str


def image_source(config: Config, snapshot: ClusterSnapshot, image: str, cluster: str,
                 build_node: str | None = None) -> ImageSource | None:
    """The online node to sync ``image`` from: never a protected node (or one running a
    protected lane) when another has it; then the operator's build node; then a node
    of the lane's own cluster; then any, in config order."""
    protected = protected_work(config, snapshot)
    mine = set(config.clusters[cluster].nodes)
    holders = [n for n in config.nodes
               if (s := snapshot.get(n)) and s.online and s.probe
               and has_image(s.probe.images, image)]
    if not holders:
        return None
    best = min(holders, key=lambda n: (n in protected, n != build_node, n not in mine,
                                       config.nodes[n].rank))
    if best in protected:
        why = "a protected node, but no other online node has the image"
    elif best == build_node:
        why = "the build node (--build-node)"
    elif best in mine:
        why = f"a node of {cluster}, the lane's own cluster"
    else:
        why = f"no node of {cluster} has it; {best} is not protected"
    return ImageSource(best, why)


def image(config: Config, node: str, snap: NodeSnapshot, snapshot: ClusterSnapshot,
          wanted: str, cluster: str, build_node: str | None) -> Verdict:
    assert snap.probe is not None
    if has_image(snap.probe.images, wanted):
        return Verdict("image", node, True, f"{node}: image {wanted} present")
    source = image_source(config, snapshot, wanted, cluster, build_node)
    if source is None:
        return Verdict("image", node, False,
                       f"{node}: image {wanted} is missing and no online node has it to sync "
                       f"from -> pull or build it on one node (the build node)")
    return Verdict("image", node, True,
                   f"{node}: image {wanted} missing, will sync from {source.node} "
                   f"({source.why}; docker save | docker load, checksum verified)")


def _stop_hint(config: Config, lane: str | None, what: str) -> str:
    """How to get ``what`` out of the way; never "stop it" for a protected lane."""
    if lane and lane in config.guards.protected_lanes:
        return (f"{what} belongs to protected lane {lane}, which must NOT be stopped -> "
                f"serve somewhere else")
    return f"stop it first (`sparktui stop {lane}`)" if lane else f"remove {what} first"


def stale_container(config: Config, node: str, snap: NodeSnapshot, name: str) -> Verdict:
    assert snap.probe is not None
    for c in snap.probe.containers:
        if c.name != name:
            continue
        if c.running:
            return Verdict("stale-container", node, False,
                           f"{node}: container {name} is already running ({c.status}) -> "
                           + _stop_hint(config, c.lane, name))
        return Verdict("stale-container", node, False,
                       f"{node}: a stale container {name} from an earlier boot exists "
                       f"({c.status}); docker run would fail on the name -> "
                       f"`docker rm {name}`, or override stale-container (serve removes it)",
                       override=Override.STALE_CONTAINER)
    return Verdict("stale-container", node, True, f"{node}: no container named {name}")


def node_free(config: Config, node: str, snap: NodeSnapshot, lane: str) -> Verdict:
    """Other containers on the node: overridable, unless one belongs to a protected
    lane (protected work is never overridden into)."""
    assert snap.probe is not None
    others = [c for c in snap.probe.running_containers if c.lane != lane]
    if not others:
        return Verdict("node-busy", node, True, f"{node} is free")
    names = ", ".join(f"{c.name} ({c.lane or c.image})" for c in others)
    mem = snap.probe.meminfo
    avail = f"; MemAvailable {mem.available_gib:.1f} GiB" if mem else ""
    protected = sorted({c.lane for c in others if c.lane in config.guards.protected_lanes
                        and c.lane})
    if protected:
        return Verdict("node-busy", node, False,
                       f"{node} is busy: {names} running{avail}; "
                       + _stop_hint(config, protected[0], "a rank") + " (not overridable)")
    return Verdict("node-busy", node, False,
                   f"{node} is busy: {names} running{avail} -> stop it first, or override "
                   f"node-busy", override=Override.NODE_BUSY)


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
                                   f"cluster {where}): one lane per recipe name -> "
                                   + _stop_hint(config, lane, c.name)))
    return out


def port_in_use(config: Config, node: str, port: int, snap: NodeSnapshot | None,
                answered: bool | None) -> Verdict:
    """A port the serve binds on ``node`` must be free: something answering there
    (another lane, any process) would make the engine fail to bind."""
    subject = f"{node}:{port}"
    if answered is None:
        return Verdict("port", subject, True,
                       f"{subject}: not checked (the node did not answer)")
    if not answered:
        return Verdict("port", subject, True, f"{subject} is free")
    holder = None
    if snap is not None and snap.probe is not None:
        holder = next((c for c in snap.probe.running_containers
                       if c.labels.get("sparktui.port") == str(port)), None)
    if holder is not None:
        who = f"lane {holder.lane} ({holder.name})" if holder.lane else holder.name
        fix = _stop_hint(config, holder.lane, holder.name)
    else:
        who = "a process that is not a sparktui lane"
        fix = f"find it (`ss -ltnp 'sport = :{port}'` on {node}) and stop it, or change the port"
    return Verdict("port", subject, False,
                   f"{subject} already answers, held by {who}: the engine could not bind "
                   f"it -> {fix}")


def runlock(node: str, holders: Mapping[str, str]) -> Verdict:
    holder = holders.get(node)
    if holder:
        return Verdict("runlock", node, False,
                       f"{node} is locked by {holder} (one workflow per node)")
    return Verdict("runlock", node, True, f"{node} is not locked")


def host_keys(nodes: Sequence[str], fingerprints: Mapping[str, str]) -> list[Verdict]:
    """Nodes sharing one SSH host key: a warning (core/nodehealth.shared_host_keys)."""
    return [Verdict("host-key", f.subject, True, f.message, warning=True)
            for f in nodehealth.shared_host_keys(nodes, fingerprints)]


def home_assistant(subject: str, power_error: str | None) -> Verdict:
    """Power actions need Home Assistant (``power_error`` None: a token was
    loaded). Planning does no I/O, so this proves nothing about HA answering:
    every plan that shuts a node down reads its plug afresh first ("plug check")."""
    if power_error is None:
        return Verdict("home-assistant", subject, True,
                       "a Home Assistant token is loaded (each plug is read afresh just "
                       "before its node is shut down)")
    return Verdict("home-assistant", subject, False,
                   f"Home Assistant is not available: {power_error} -> fix the token or "
                   f"[home_assistant] and retry")


def serve_ports(config: Config, recipe: Recipe, cluster: str) -> list[tuple[str, int]]:
    """(node, port) a serve binds: the API port on the head, and the head's rendezvous
    port when there is more than one rank."""
    nodes = config.clusters[cluster].nodes
    ports = [(nodes[0], recipe.port)]
    if len(nodes) > 1:
        ports.append((nodes[0], config.clusters[cluster].master_port))
    return ports


def prompt_length(lane: str, tokens: int, ceiling: int | None, first_rung: int,
                  what: str = "a prompt") -> Verdict:
    """The seeds' rule "long prompts ... never against a lane whose scratch envelope
    is unknown": ``tokens`` beyond the lane's measured ceiling (``[fit]
    prefill_ceiling_tokens``, written by ``sparktui envelope``), or beyond the
    ladder's first rung when it has none, is refused (overridable)."""
    if ceiling is not None:
        ok = tokens <= ceiling
        why = (f"{what} of {tokens:,} tokens is within {lane}'s measured ceiling of "
               f"{ceiling:,} tokens" if ok else
               f"{what} of {tokens:,} tokens exceeds {lane}'s longest safe prompt, "
               f"{ceiling:,} tokens (measured by sparktui envelope): its prefill scratch "
               f"would leave less than the reserve -> send at most {ceiling:,} tokens")
    else:
        ok = tokens <= first_rung
        why = (f"{what} of {tokens:,} tokens is within the ladder's first rung "
               f"({first_rung:,}): {lane}'s envelope is not measured" if ok else
               f"{what} of {tokens:,} tokens on {lane}, whose prefill envelope is not "
               f"measured (no [fit] prefill_ceiling_tokens): a long prompt hung two hosts "
               f"at 22:45 -> measure it first (`sparktui envelope {lane}`) or send at most "
               f"{first_rung:,} tokens")
    return Verdict("prompt-length", lane, ok, why,
                   override=None if ok else Override.PROMPT_LENGTH)


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
    ports: Mapping[tuple[str, int], bool] | None = None,
    build_node: str | None = None,
    overrides: frozenset[Override] = frozenset(),
) -> GuardReport:
    """Every guard of ``serve RECIPE --cluster CLUSTER``, one verdict each. ``ports``:
    did (node, port) answer a TCP connect (missing: not checked)."""
    nodes = list(config.clusters[cluster].nodes)
    verdicts: list[Verdict] = [protected_node(config, n, "serve") for n in nodes]
    verdicts += blocking_switches(config, cluster, switch_states)
    verdicts.append(fit_verdict(*fit_on_nodes(config, recipe, cluster, snapshot)))
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
        verdicts.append(docker(name, snap))
        verdicts.append(image(config, name, snap, snapshot, recipe.image, cluster, build_node))
        verdicts.append(stale_container(config, name, snap, container_name(recipe.name, rank)))
        verdicts.append(node_free(config, name, snap, recipe.name))
    for head, port in serve_ports(config, recipe, cluster):
        verdicts.append(port_in_use(config, head, port, snapshot.get(head),
                                    (ports or {}).get((head, port))))
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
                   snap: NodeSnapshot | None = None,
                   power_error: str | None = None) -> GuardReport:
    """``power cycle|on|off NODE`` and ``recover NODE``; ``snap`` is the node's
    latest snapshot when it answered (what the action would kill); ``power_error``
    why Home Assistant is unavailable (None: it is)."""
    if node not in config.nodes:
        return GuardReport((Verdict("node", node, False, f"unknown node {node!r} (known: "
                                    f"{', '.join(config.nodes)})"),))
    verdicts = [protected_node(config, node, action), shared_switch_entity(config, node),
                runlock(node, locks or {}), *lanes_on_node(config, node, snap, action),
                home_assistant(node, power_error)]
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
                       locks: Mapping[str, str] | None = None,
                       power_error: str | None = None) -> ClusterPowerPlan:
    """Cluster power: protected nodes are skipped (a warning, not a refusal); on
    turns the cluster's shared switches on first, off turns them off last, and
    only a switch no other powered node depends on: a switch another cluster
    still uses (production on sw6_mt) stays on. What a power-off does to the
    lanes on the nodes is the workflow's (``stop.lanes_on``)."""
    if cluster not in config.clusters:
        report = GuardReport((Verdict("cluster", cluster, False, f"unknown cluster {cluster!r} "
                                      f"(known: {', '.join(config.clusters)})"),))
        return ClusterPowerPlan(cluster, on, (), (), (), report)
    action = "power on" if on else "power off"
    verdicts: list[Verdict] = []
    nodes: list[str] = []
    for name in config.clusters[cluster].nodes:
        prot = protected_node(config, name, action)
        own = shared_switch_entity(config, name)
        lock = runlock(name, locks or {})
        if not prot.passed:
            verdicts.append(replace(prot, passed=True, warning=True,
                                    message=f"{name} skipped: protected node"))
            continue
        verdicts += [own, lock]
        if own.passed and lock.passed:
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
    verdicts.append(home_assistant(cluster, power_error))
    return ClusterPowerPlan(cluster, on, tuple(nodes), tuple(before), tuple(after),
                            _report(verdicts, frozenset()))
