"""What an operator action would do, and every guard's verdict on it.

A preview is built from the config, the recipe and the latest snapshots
before anything runs; the console shows it in the confirm modal. It runs
nothing. The guard rules live in ops/ once the workflows land (issue 6);
until then these are the checks the console can make from what it already
knows, each verdict carrying its numbers.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from enum import StrEnum

from sparktui.core.config import Config
from sparktui.core.fit import fit
from sparktui.core.lint import lint
from sparktui.core.recipe import Recipe
from sparktui.core.render import container_name, plan
from sparktui.core.state import ClusterSnapshot, NodeState
from sparktui.service.lanes import LaneView, busy_lanes


class Verdict(StrEnum):
    PASS = "pass"
    WARN = "warn"
    REFUSE = "refuse"


@dataclass(frozen=True)
class GuardVerdict:
    guard: str
    verdict: Verdict
    detail: str


class ActionKind(StrEnum):
    SERVE = "serve"
    STOP = "stop"
    POWER_CYCLE = "power-cycle"
    RECOVER = "recover"
    CLUSTER_POWER_OFF = "cluster-power-off"
    CLUSTER_POWER_ON = "cluster-power-on"


@dataclass(frozen=True)
class ActionPreview:
    kind: ActionKind
    target: str
    """The node, lane or cluster acted on."""
    title: str
    steps: tuple[str, ...]
    """Exactly what will run, in order."""
    nodes: tuple[str, ...]
    entities: tuple[str, ...]
    """Home Assistant entities the action switches."""
    verdicts: tuple[GuardVerdict, ...]
    confirm_text: str | None
    """The name the operator must type (power and stop), None for a plain confirm."""
    cluster: str = ""

    @property
    def allowed(self) -> bool:
        return all(v.verdict is not Verdict.REFUSE for v in self.verdicts)

    @property
    def refusals(self) -> tuple[GuardVerdict, ...]:
        return tuple(v for v in self.verdicts if v.verdict is Verdict.REFUSE)


def _node_state(snapshot: ClusterSnapshot, node: str) -> str:
    snap = snapshot.get(node)
    return snap.state.value if snap else NodeState.UNKNOWN.value


def _protected_node(config: Config, node: str) -> GuardVerdict:
    if node in config.guards.protected_nodes:
        return GuardVerdict(
            "protected node", Verdict.REFUSE,
            f"{node} is protected (guards.protected_nodes in {config.path.name}: "
            f"{', '.join(config.guards.protected_nodes)}); the console never stops, "
            "cycles or serves on it")
    return GuardVerdict("protected node", Verdict.PASS, f"{node} is not a protected node")


def _protected_lanes_on(config: Config, lanes: dict[str, LaneView], node: str) -> GuardVerdict:
    hit = [name for name, lv in lanes.items()
           if node in lv.nodes and name in config.guards.protected_lanes]
    if hit:
        return GuardVerdict("protected lane", Verdict.REFUSE,
                            f"{node} runs protected lane {', '.join(hit)} "
                            "(guards.protected_lanes): it must not be stopped")
    return GuardVerdict("protected lane", Verdict.PASS, f"no protected lane runs on {node}")


def _shared_switches(config: Config, nodes: tuple[str, ...]) -> GuardVerdict:
    names = sorted(config.switches)
    text = ", ".join(names) if names else "none configured"
    return GuardVerdict("shared switches", Verdict.PASS,
                        f"shared switches are never toggled by this action ({text})")


def power_cycle_preview(config: Config, snapshot: ClusterSnapshot,
                        lanes: dict[str, LaneView], node: str, *,
                        recover: bool = False) -> ActionPreview:
    cfg = config.nodes[node]
    entity = cfg.switch
    busy = busy_lanes(snapshot).get(node)
    verdicts = [_protected_node(config, node), _protected_lanes_on(config, lanes, node)]
    if not entity:
        verdicts.append(GuardVerdict("power entity", Verdict.REFUSE,
                                     f"{node} has no Home Assistant switch in the config"))
    else:
        verdicts.append(GuardVerdict("power entity", Verdict.PASS,
                                     f"{node} is plugged into {entity}"))
    verdicts.append(_shared_switches(config, (node,)))
    if busy:
        verdicts.append(GuardVerdict("node busy", Verdict.WARN,
                                     f"{node} runs {busy}: its rank dies with the power"))
    state = _node_state(snapshot, node)
    steps: list[str] = []
    if recover:
        t = config.thrash
        steps.append(f"SSH retries: {t.ssh_retries} attempts ~{t.ssh_retry_interval_s:.0f} s "
                     f"apart; stop here if {node} answers")
        if state == NodeState.ONLINE.value:
            verdicts.append(GuardVerdict("node answers", Verdict.WARN,
                                         f"{node} is online now: recover will end at the "
                                         "SSH retry step"))
    off_s, boot_s = config.power.off_seconds, config.power.boot_timeout_s
    steps += [
        f"journal: power-cycle {node} started",
        f"Home Assistant: POST /api/services/switch/turn_off {{\"entity_id\": \"{entity}\"}}",
        f"check GET /api/states/{entity} reads \"off\"",
        f"wait {off_s:.0f} s (power.off_seconds)",
        f"Home Assistant: POST /api/services/switch/turn_on {{\"entity_id\": \"{entity}\"}}",
        f"wait up to {boot_s:.0f} s for SSH on {node} to answer a probe",
        f"journal: power-cycle {node} finished (or the step it stopped at)",
    ]
    kind = ActionKind.RECOVER if recover else ActionKind.POWER_CYCLE
    title = f"{'Recover' if recover else 'Power-cycle'} {node} ({state})"
    return ActionPreview(kind, node, title, tuple(steps), (node,), (entity,),
                         tuple(verdicts), confirm_text=node)


def stop_preview(config: Config, lanes: dict[str, LaneView], lane: str) -> ActionPreview:
    lv = lanes.get(lane)
    verdicts: list[GuardVerdict] = []
    if lane in config.guards.protected_lanes:
        verdicts.append(GuardVerdict("protected lane", Verdict.REFUSE,
                                     f"{lane} is protected (guards.protected_lanes): "
                                     "the operator said it must not be stopped"))
    else:
        verdicts.append(GuardVerdict("protected lane", Verdict.PASS,
                                     f"{lane} is not a protected lane"))
    nodes = lv.nodes if lv else ()
    prod = [n for n in nodes if n in config.guards.protected_nodes]
    if prod:
        verdicts.append(GuardVerdict("protected node", Verdict.REFUSE,
                                     f"{lane} runs on protected node(s) {', '.join(prod)}"))
    if lv is None:
        verdicts.append(GuardVerdict("lane found", Verdict.REFUSE,
                                     f"no container of {lane} on any node"))
    steps = [f"journal: stop {lane} started"]
    for rc in sorted(lv.ranks if lv else (), key=lambda r: -r.rank):
        q = shlex.quote(rc.container)
        steps.append(f"{rc.node}: docker stop -t 30 {q} && docker rm {q}")
    steps.append(f"journal: stop {lane} finished")
    return ActionPreview(ActionKind.STOP, lane, f"Stop lane {lane}", tuple(steps), nodes, (),
                         tuple(verdicts), confirm_text=lane, cluster=lv.cluster if lv else "")


def serve_preview(config: Config, snapshot: ClusterSnapshot, lanes: dict[str, LaneView],
                  recipe: Recipe, cluster: str) -> ActionPreview:
    report = fit(config, recipe, cluster)
    launch = plan(config, recipe, cluster)
    nodes = tuple(r.node for r in launch.ranks)
    verdicts: list[GuardVerdict] = []
    if report.verdict == "fits":
        verdicts.append(GuardVerdict("memory fit", Verdict.PASS,
                                     f"fits with {report.margin_gib:.2f} GiB margin "
                                     f"({report.weights_per_rank_gib:.2f} GiB weights/rank)"))
    else:
        for reason in report.reasons:
            verdicts.append(GuardVerdict("memory fit", Verdict.REFUSE, reason))
    busy = busy_lanes(snapshot)
    for node in nodes:
        verdicts.extend(_serve_node_verdicts(config, snapshot, node, busy.get(node)))
    if recipe.name in lanes:
        verdicts.append(GuardVerdict("lane exists", Verdict.REFUSE,
                                     f"{recipe.name} already has containers "
                                     f"on {', '.join(lanes[recipe.name].nodes)}"))
    for w in lint(config, recipe):
        verdicts.append(GuardVerdict("recipe lint", Verdict.WARN, str(w)))
    steps = [f"journal: serve {recipe.name} on {cluster} started"]
    for r in launch.ranks:
        if r.gid_probe:
            steps.append(f"{r.node}: read the RoCE v2 GID index from sysfs "
                         f"({','.join(r.hcas)})")
    for r in launch.ranks:
        steps.append(f"{r.node}: docker run -d --name {container_name(recipe.name, r.rank)} "
                     f"... {recipe.image} (rank {r.rank}/{len(launch.ranks)})")
    steps.append("watch every rank's log: phases, first fatal line, progress-based stall "
                 f"(after {config.console.stall_after_s:.0f} s without progress)")
    steps.append(f"readiness: port {recipe.port}, /health 200, /v1/models, first token")
    return ActionPreview(ActionKind.SERVE, recipe.name, f"Serve {recipe.name} on {cluster}",
                         tuple(steps), nodes, (), tuple(verdicts), confirm_text=None,
                         cluster=cluster)


def _serve_node_verdicts(config: Config, snapshot: ClusterSnapshot, node: str,
                         busy: str | None) -> list[GuardVerdict]:
    out = [_protected_node(config, node)]
    snap = snapshot.get(node)
    if snap is None or snap.state is not NodeState.ONLINE or snap.probe is None:
        state = snap.state.value if snap else "unknown"
        out.append(GuardVerdict("node online", Verdict.REFUSE, f"{node} is {state}"))
        return out
    if busy:
        out.append(GuardVerdict("node free", Verdict.REFUSE, f"{node} already runs {busy}"))
    probe = snap.probe
    kernel = probe.kernel or "?"
    g = config.guards
    if any(kernel.startswith(bad) for bad in g.kernel_bad):
        out.append(GuardVerdict("kernel", Verdict.REFUSE,
                                f"{node} runs kernel {kernel}, which breaks NCCL/RoCE "
                                f"(guards.kernel_bad); pin is {g.kernel_pin}"))
    elif g.kernel_pin and not kernel.startswith(g.kernel_pin):
        out.append(GuardVerdict("kernel", Verdict.WARN,
                                f"{node} runs kernel {kernel}, not the pin {g.kernel_pin}"))
    cfg = config.nodes[node]
    if probe.mount_at(cfg.nas_mount) is None:
        out.append(GuardVerdict("NAS mount", Verdict.REFUSE,
                                f"{node} has nothing mounted at {cfg.nas_mount}"))
    hf = probe.hf_cache
    if hf is not None and not hf.is_symlink:
        out.append(GuardVerdict("HF cache", Verdict.REFUSE,
                                f"{node}: {hf.path} is a {hf.kind}, not the symlink to "
                                f"{cfg.hf_cache_target}"))
    return out


def cluster_power_preview(config: Config, snapshot: ClusterSnapshot,
                          lanes: dict[str, LaneView], cluster: str, *, on: bool) -> ActionPreview:
    nodes = config.clusters[cluster].nodes
    verdicts: list[GuardVerdict] = []
    prod = [n for n in nodes if n in config.guards.protected_nodes]
    if prod:
        verdicts.append(GuardVerdict("protected node", Verdict.REFUSE,
                                     f"{cluster} includes protected node(s) {', '.join(prod)}"))
    if not on:
        for name, lv in lanes.items():
            if set(lv.nodes) & set(nodes):
                verdict = (Verdict.REFUSE if name in config.guards.protected_lanes
                           else Verdict.WARN)
                verdicts.append(GuardVerdict("lanes running", verdict,
                                             f"{name} runs on {', '.join(lv.nodes)}"))
    verdicts.append(_shared_switches(config, nodes))
    verb = "on" if on else "off"
    entities = tuple(config.nodes[n].switch for n in nodes)
    steps = [f"journal: cluster power {verb} {cluster} started"]
    steps += [f"Home Assistant: POST /api/services/switch/turn_{verb} "
              f"{{\"entity_id\": \"{config.nodes[n].switch}\"}} ({n})" for n in nodes]
    steps.append(f"check each GET /api/states/<entity> reads \"{verb}\"")
    steps.append(f"journal: cluster power {verb} {cluster} finished")
    kind = ActionKind.CLUSTER_POWER_ON if on else ActionKind.CLUSTER_POWER_OFF
    return ActionPreview(kind, cluster, f"Cluster power {verb}: {cluster}", tuple(steps),
                         tuple(nodes), entities, tuple(verdicts), confirm_text=cluster,
                         cluster=cluster)
