"""The qualify workflow's plan (issue 14): pure, from one observation. It is
allowed exactly when the lane exists, every rank runs, rank 0 carries its API
port and that port answered; each refusal names the fix."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.config_load import load_config
from sparktui.core.recipe_load import load_recipe
from sparktui.core.state import ClusterSnapshot, ContainerInfo, NodeSnapshot, NodeState, ProbeResult
from sparktui.ops.plan import OpsState
from sparktui.ops.workflows.qualify import Qualify

ROOT = Path(__file__).resolve().parents[2]
CONFIG = load_config(ROOT / "config.toml")
LANE = "glm53-flash-eugr-2x"
PORT = load_recipe(CONFIG, LANE).port
NODES = ("dgx5", "dgx6")


def container(rank: int, running: bool, port: int | None) -> ContainerInfo:
    labels = {"sparktui.lane": LANE, "sparktui.cluster": "2nodes", "sparktui.rank": str(rank),
              "sparktui.nranks": "2", "sparktui.engine": "vllm",
              **({"sparktui.port": str(port)} if port is not None else {})}
    return ContainerInfo(f"sparktui-{LANE}-r{rank}", "img", "running" if running else "exited",
                         "Up 1 hour" if running else "Exited (1) 2 minutes ago",
                         MappingProxyType(labels))


def state(present: tuple[bool, bool], running: tuple[bool, bool], labelled: bool,
          answered: bool | None) -> OpsState:
    snaps = tuple(NodeSnapshot(n, NodeState.ONLINE, 1.0, probe=ProbeResult(
        containers=(container(i, running[i], PORT if labelled else None),) if present[i]
        else ())) for i, n in enumerate(NODES))
    ports = {} if answered is None else {("dgx5", PORT): answered}
    return OpsState(CONFIG, ClusterSnapshot(1.0, snaps), ports=ports)


@settings(max_examples=200, deadline=None)
@given(present=st.tuples(st.booleans(), st.booleans()),
       running=st.tuples(st.booleans(), st.booleans()), labelled=st.booleans(),
       answered=st.sampled_from((True, False, None)))
def test_allowed_exactly_when_the_lane_serves(present, running, labelled, answered):
    plan = Qualify(LANE).plan(state(present, running, labelled, answered))
    every_rank_runs = all(r for p, r in zip(present, running, strict=True) if p)
    expected = (any(present) and every_rank_runs and present[0] and running[0] and labelled
                and answered is not False)
    assert plan.allowed == expected, plan.to_json()
    assert plan.workflow == "qualify" and plan.target == LANE
    assert [s.step for s in plan.steps] == ["qualify copy RU", "qualify copy EN",
                                            "qualify identifiers", "qualify bench"]
    for v in plan.report.refused:
        assert "->" in v.message and v.override is None  # the fix, never overridable


def test_each_refusal_says_why():
    none = Qualify(LANE).plan(state((False, False), (True, True), True, True))
    assert [v.guard for v in none.report.refused] == ["lane"]
    assert f"`sparktui serve {LANE}`" in none.report.refused[0].message
    exited = Qualify(LANE).plan(state((True, True), (True, False), True, True))
    assert [v.guard for v in exited.report.refused] == ["serving"]
    assert "rank 1 on dgx6 exited" in exited.report.refused[0].message
    loading = Qualify(LANE).plan(state((True, True), (True, True), True, False))
    assert [v.guard for v in loading.report.refused] == ["port"]
    assert f"dgx5:{PORT} does not answer" in loading.report.refused[0].message
    assert f"`sparktui wait {LANE}`" in loading.report.refused[0].message
    ok = Qualify(LANE, depth=4096).plan(state((True, True), (True, True), True, True))
    assert ok.allowed and ok.detail["rank0"] == f"dgx5:{PORT}"
    assert "d4096" in ok.steps[-1].action


def test_a_depth_beyond_the_lane_window_is_refused_naming_both():
    """`qualify --depth 200000` planned on a 131,072-token lane."""
    from sparktui.ops.guards import Override

    window = load_recipe(CONFIG, LANE).engine_args.max_model_len
    serving = state((True, True), (True, True), True, True)
    for overrides in (frozenset(), frozenset({Override.PROMPT_LENGTH})):
        plan = Qualify(LANE, depth=window + 1, overrides=overrides).plan(serving)
        (refused,) = [v for v in plan.report.refused if v.guard == "window"]
        assert not plan.allowed and refused.override is None
        assert f"{window + 1:,} tokens" in refused.message
        assert f"max_model_len {window:,}" in refused.message and "--depth at most" in \
            refused.message
    longest = int(refused.message.rsplit("--depth at most ", 1)[1].replace(",", ""))
    assert longest < window
    fits = Qualify(LANE, depth=longest,
                   overrides=frozenset({Override.PROMPT_LENGTH})).plan(serving)
    assert fits.allowed, fits.to_json()
    assert not Qualify(LANE, depth=longest + 1, overrides=frozenset(
        {Override.PROMPT_LENGTH})).plan(serving).allowed


@settings(max_examples=500, deadline=None)
@given(depth=st.one_of(st.integers(0, 2_000_000), st.integers(1_040_000, 1_050_000)))
def test_no_allowed_depth_overflows_the_window(depth):
    from sparktui.core.qualify import BENCH_MAX_TOKENS
    from sparktui.ops.guards import Override
    from sparktui.ops.workflows.qualify import PROMPT_SLACK

    window = load_recipe(CONFIG, LANE).engine_args.max_model_len
    plan = Qualify(LANE, depth=depth, overrides=frozenset({Override.PROMPT_LENGTH})).plan(
        state((True, True), (True, True), True, True))
    assert plan.allowed == (depth + BENCH_MAX_TOKENS + PROMPT_SLACK <= window), depth
