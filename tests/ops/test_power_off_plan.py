"""The power-off plans (issue 15), pure, over generated fleets: lanes placed
anywhere (some protected), nodes online, starved or off. A power-off of a node
or a cluster stops every lane running on it first (all its ranks, wherever they
are), refuses exactly when such a lane is protected (never overridable), shuts
down the nodes that answer and hard-cuts the others with the reason in the plan."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.config_load import load_config
from sparktui.core.state import ClusterSnapshot, ContainerInfo, NodeSnapshot, NodeState, ProbeResult
from sparktui.ops.plan import OpsState
from sparktui.ops.workflows.cluster_power import ClusterPower
from sparktui.ops.workflows.power import PowerSwitch

ROOT = Path(__file__).resolve().parents[2]
BASE = load_config(ROOT / "config.toml")
B = "4nodes-switch-b"
NODES = ("dgx5", "dgx6", "dgx7", "dgx8")
LANES = ("lane-a", "lane-b", "lane-c")
BASE = replace(BASE, guards=replace(BASE.guards, protected_nodes=("dgx1", "dgx2", "dgx3", "dgx4"),
                                    protected_lanes=()))


def rank(lane: str, r: int, running: bool) -> ContainerInfo:
    labels = {"sparktui.lane": lane, "sparktui.cluster": B, "sparktui.rank": str(r),
              "sparktui.nranks": "2", "sparktui.port": "8000", "sparktui.engine": "vllm"}
    return ContainerInfo(f"sparktui-{lane}-r{r}", "img", "running" if running else "exited",
                         "Up 1 hour" if running else "Exited (1) 1 minute ago",
                         MappingProxyType(labels))


@st.composite
def fleets(draw: st.DrawFn) -> tuple[OpsState, dict[str, list[tuple[str, bool]]]]:
    """A state of dgx5-8 and where each lane's ranks are: lane -> [(node, running)]."""
    states = {n: draw(st.sampled_from((NodeState.ONLINE,) * 3 + (NodeState.STARVED,
                                                                 NodeState.POWERED_OFF)))
              for n in NODES}
    placed: dict[str, list[tuple[str, bool]]] = {}
    containers: dict[str, list[ContainerInfo]] = {n: [] for n in NODES}
    for lane in LANES:
        where = draw(st.lists(st.sampled_from(NODES), max_size=2, unique=True))
        for r, node in enumerate(where):
            running = draw(st.booleans())
            placed.setdefault(lane, []).append((node, running))
            containers[node].append(rank(lane, r, running))
    protected = tuple(draw(st.lists(st.sampled_from(LANES), max_size=2, unique=True)))
    config = replace(BASE, guards=replace(BASE.guards, protected_lanes=protected))
    snaps = tuple(
        NodeSnapshot(n, s, 1.0, probe=ProbeResult(containers=tuple(containers[n]))
                     if s is NodeState.ONLINE else None, liveness=s is NodeState.STARVED)
        for n, s in states.items())
    return OpsState(config, ClusterSnapshot(1.0, snaps)), placed


def check(state: OpsState, placed: dict[str, list[tuple[str, bool]]], targets: set[str],
          plan) -> None:  # type: ignore[no-untyped-def]
    seen = {n for n in NODES if state.snapshot.get(n).state is NodeState.ONLINE}  # type: ignore[union-attr]
    # the lanes a power-off stops: a running rank on a target node that answered
    hit = {lane for lane, ranks in placed.items()
           if any(n in targets and n in seen and running for n, running in ranks)}
    protected = hit & set(state.config.guards.protected_lanes)
    refused = {v.subject for v in plan.report.refused if v.guard == "protected-lane"}
    assert refused == protected, plan.to_json()
    assert all(v.override is None for v in plan.report.refused)
    if protected:
        assert not plan.allowed
        return
    assert plan.allowed, plan.to_json()
    steps = [(s.step, s.target) for s in plan.steps]
    stopped = {t for s, t in steps if s.startswith("stop rank")}
    assert stopped == {n for lane in hit for n, _ in placed[lane] if n in seen}
    first_power = min((i for i, (s, _) in enumerate(steps)
                       if s in ("poweroff", "plug off")), default=len(steps))
    assert all(i < first_power for i, (s, _) in enumerate(steps) if s.startswith("stop rank"))
    memory = {t for s, t in steps if s == "memory freed"}
    assert memory == stopped - targets
    for n in targets:
        cut = next(a for s, t, a in ((p.step, p.target, p.action) for p in plan.steps)
                   if s == "plug off" and t == f"switch.{n}")
        if n in seen:
            assert ("poweroff", n) in steps and "hard cut" not in cut
        else:
            assert ("poweroff", n) not in steps and "(hard cut: " in cut


@settings(max_examples=300, deadline=None)
@given(fleet=fleets(), node=st.sampled_from(NODES))
def test_power_off_a_node(fleet, node):
    state, placed = fleet
    check(state, placed, {node}, PowerSwitch(node, False).plan(state))


@settings(max_examples=300, deadline=None)
@given(fleet=fleets())
def test_power_off_a_cluster(fleet):
    state, placed = fleet
    plan = ClusterPower(B, False).plan(state)
    check(state, placed, set(NODES), plan)
    if plan.allowed:  # the shared switch is kept on (production uses it), as before
        assert not [s for s in plan.steps if s.step == "switch off"
                    and s.target == "switch.sw6_mt"]
