"""The differential test of issue 10: for generated cluster states (nodes on, off,
starved; protected lanes placed anywhere; switches on, off, unavailable; Home
Assistant up or down; stale and live locks; kernels; shared host keys; ports
answered; unfinished workflows), every workflow's three routes agree verdict for
verdict:

- the console: `ClusterService.preview_*` (what the confirm modal renders);
- the CLI: the command's own ``_main`` from argv parsed by the real parser, with
  ``--dry-run --json`` (what scripts read), and its exit code;
- the run: `execute(plan)`, which observes again and enforces what it finds.

Everything is observed through one fake `OpsContext` built from the generated
state (no network), so each example is cheap.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import math
import os
import socket
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui.adapters.homeassistant import HomeAssistantError, SwitchState
from sparktui.cli import (
    ops_common,
    power_cmd,
    qualify_cmd,
    recover_cmd,
    runlock_cmd,
    serve_cmd,
    stop_cmd,
)
from sparktui.cli.main import build_parser
from sparktui.core.config import Config, NodeConfig
from sparktui.core.config_load import load_config
from sparktui.core.errors import RemoteError
from sparktui.core.recipe_load import load_recipe
from sparktui.core.state import (
    ClusterSnapshot,
    ContainerInfo,
    ImageInfo,
    MemInfo,
    Mount,
    NodeSnapshot,
    NodeState,
    PathKind,
    ProbeResult,
)
from sparktui.ops.context import OpsContext
from sparktui.ops.journal import Journal, StepRecord, WorkflowRecord
from sparktui.ops.plan import verdict_json
from sparktui.ops.runlocks import RunLock
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.service.cluster import ClusterService

RECIPES = ("glm53-flash-eugr-2x", "glm53-full-mxfp4-4x-dspark8", "dsv41-flash-8x")
LANES = ("glm53-flash-eugr-2x", "glm53-full-mxfp4-4x-dspark8", "scratch-lane")
IMAGE_OF: dict[str, str] = {}  # recipe -> image, filled from the shipped recipes
IMAGE_SETS: list[tuple[str, ...]] = []


class FakeClock:
    def time(self) -> float:
        return 1_000_000.0

    def monotonic(self) -> float:
        return 0.0

    async def sleep(self, s: float) -> None:
        return None


class FakeLink:
    """Every remote command fails as an unreachable node would: the run stops at
    its first step (this test checks what the run enforces, not the steps)."""

    def __init__(self, node: str) -> None:
        self.node = node

    async def run(self, cmd: str, timeout: float) -> Any:
        raise RemoteError(self.node, cmd, "fake: no remote command in this test")

    def stream(self, cmd: str) -> AsyncIterator[bytes]:
        raise RemoteError(self.node, cmd, "fake: no remote command in this test")


class FakePower:
    def __init__(self, states: dict[str, str | None]) -> None:
        self.states = states

    async def state(self, entity: str) -> SwitchState:
        state = self.states.get(entity, "on")
        if state is None:
            raise HomeAssistantError(f"GET /api/states/{entity}: no answer (fake)")
        return SwitchState(entity, state)

    async def turn(self, entity: str, on: bool) -> SwitchState:
        raise HomeAssistantError("fake: nothing is switched in this test")


class FakeJournal:
    def __init__(self, unfinished: Sequence[WorkflowRecord]) -> None:
        self._unfinished = list(unfinished)

    def append(self, wf: str, kind: str, **fields: Any) -> None:
        return None

    def reserve(self) -> None:
        return None

    way_out = staticmethod(Journal.way_out)

    def unfinished(self) -> list[WorkflowRecord]:
        return list(self._unfinished)

    def entries(self, since: float | None = None) -> list[Any]:
        return []


class FakeLocks:
    def __init__(self, locks: Sequence[RunLock]) -> None:
        self._locks = {lk.node: lk for lk in locks}

    def list(self) -> list[RunLock]:
        return [self._locks[n] for n in sorted(self._locks)]

    def get(self, node: str) -> RunLock | None:
        return self._locks.get(node)

    def age(self, node: str, now: float) -> float | None:
        return 60.0 if node in self._locks else None

    def acquire(self, nodes: Sequence[str], **kw: Any) -> list[RunLock]:
        return []

    def release(self, wf: str, nodes: Sequence[str] | None = None) -> list[str]:
        return []

    def close(self, node: str) -> RunLock | None:
        return None


@dataclass(frozen=True)
class World:
    """One generated cluster state."""

    config: Config
    snapshot: ClusterSnapshot
    switches: dict[str, str | None]
    ha_up: bool
    locks: tuple[RunLock, ...]
    fingerprints: dict[str, str]
    ports: dict[tuple[str, int], bool]
    unfinished: tuple[WorkflowRecord, ...]

    def ctx(self) -> OpsContext:
        snapshot = self.snapshot

        async def snap(names: Sequence[str]) -> ClusterSnapshot:
            return snapshot.select(list(names))

        async def fps(names: Sequence[str]) -> dict[str, str]:
            return {n: f for n, f in self.fingerprints.items() if n in names}

        async def port_open(node: str, port: int) -> bool:
            return self.ports.get((node, port), False)

        async def alive(node: str) -> bool:
            return False

        return OpsContext(
            config=self.config, link=FakeLink,
            power=FakePower(self.switches) if self.ha_up else None,
            power_error="" if self.ha_up else "no token (fake)", snapshot=snap,
            alive=alive, api_host=lambda n: "127.0.0.1",
            journal=FakeJournal(self.unfinished),  # type: ignore[arg-type]
            locks=FakeLocks(self.locks),  # type: ignore[arg-type]
            clock=FakeClock(), fingerprints=fps, port_open=port_open)


def _container(lane: str, cluster: str, rank: int, port: int, running: bool) -> ContainerInfo:
    labels = {"sparktui.lane": lane, "sparktui.cluster": cluster, "sparktui.rank": str(rank),
              "sparktui.nranks": "2", "sparktui.port": str(port), "sparktui.engine": "vllm"}
    return ContainerInfo(f"sparktui-{lane}-r{rank}", "img", "running" if running else "exited",
                         "Up 2 hours" if running else "Exited (1) 3 minutes ago",
                         MappingProxyType(labels))


KERNELS = ("6.17.0-1031-nvidia", "6.17.0-1030-nvidia", "7.0.0-1019-nvidia", None)
CACHES = ("link", "link/", "directory", "missing", None)
CONTAINERS = (None, *(_container(lane, cluster, rank, port, running)
                      for lane in LANES for cluster in ("4nodes-switch", "4nodes-switch-b")
                      for rank in (0, 1) for port in (8000, 30000) for running in (True, False)))
STATES = (NodeState.ONLINE,) * 3 + tuple(s for s in NodeState if s is not NodeState.ONLINE)


def _cache(cfg: NodeConfig, kind: str | None) -> PathKind | None:
    path = cfg.hf_cache or "/x"
    if kind is None:
        return None
    if kind.startswith("link"):
        return PathKind(path, "symbolic link", cfg.hf_cache_target + kind[4:])
    return PathKind(path, kind)


def _node(config: Config, node: str, choice: tuple[Any, ...]) -> NodeSnapshot:
    state, kernel, cache, images, first, second, total_gib, nas, docker = choice
    if state is not NodeState.ONLINE:
        return NodeSnapshot(node, state, 1.0, error="ssh: timed out")
    cfg = config.nodes[node]
    containers = tuple({c.name: c for c in (first, second) if c is not None}.values())
    probe = ProbeResult(
        meminfo=MemInfo(int(total_gib * 1024 * 1024), 90 * 1024 * 1024), kernel=kernel,
        mounts=(Mount("nas:/x", cfg.nas_mount, "nfs4", "rw"),) if nas else (),
        hf_cache=_cache(cfg, cache),
        images=tuple(ImageInfo(*ref.rsplit(":", 1), id="sha256:1") for ref in images),
        containers=containers, docker_ok=docker)
    return NodeSnapshot(node, NodeState.ONLINE, 1.0, probe=probe)


def _lock(node: str, owner: str) -> RunLock:
    if owner == "elsewhere":
        return RunLock(node, f"wf-{node}", "serve", "lane-x", 1, "another-host", 1.0)
    pid = os.getpid() if owner == "alive" else 2**22 + 12345  # above pid_max: gone
    return RunLock(node, f"wf-{node}", "power-cycle", node, pid, socket.gethostname(), 1.0,
                   ("sparktui-lane-x-r0",) if owner == "dead-with-container" else ())


def _record(node: str, plug_off: str) -> WorkflowRecord:
    entity = f"switch.{node}"
    steps = {"none": (), "done": (StepRecord("plug off", entity, "POST", 1.0, True),),
             "in-doubt": (StepRecord("plug off", entity, "POST", 1.0, None),)}[plug_off]
    return WorkflowRecord(f"wf-{node}", "power-cycle", node, 1.0, {"off_seconds": 35.0}, steps)


def _size(axes: Sequence[Sequence[Any]]) -> int:
    return math.prod(len(a) for a in axes)


def _decode(axes: Sequence[Sequence[Any]], n: int) -> tuple[Any, ...]:
    """One integer as a choice on every axis (mixed radix): one draw instead of
    one per axis keeps the generation cheap; 0 is the first choice everywhere,
    so shrinking still heads for the plain case."""
    out = []
    for axis in axes:
        n, i = divmod(n, len(axis))
        out.append(axis[i])
    return tuple(out)


def _route(kind: str, words: str, target: str) -> tuple[str, list[str]]:
    return kind, [*words.split(), target]


def _serve_route(recipe: str, cluster: str) -> tuple[str, list[str]]:
    return "serve", ["serve", recipe, "--cluster", cluster]


def _switch_route(node: str, state: str) -> tuple[str, list[str]]:
    return f"power-{state}", ["power", state, node]


def _cluster_route(cluster: str, state: str) -> tuple[str, list[str]]:
    return f"cluster-power-{state}", ["power", "cluster", state, cluster]


def _wf_of(node: str) -> str:
    return f"wf-{node}"


def strategies(base: Config) -> tuple[st.SearchStrategy[World],
                                      st.SearchStrategy[tuple[str, list[str]]]]:
    """(worlds, routes), every strategy object built once: hypothesis spends most of
    its time on a strategy's first use, so a fresh one per draw would be slow."""
    names = list(base.nodes)
    clusters = sorted(base.clusters)
    node_axes: tuple[Sequence[Any], ...] = (
        STATES, KERNELS, CACHES, IMAGE_SETS, CONTAINERS, CONTAINERS, (121.7, 119.0, 100.0),
        (True, False), (True, False))
    node_choice = st.integers(0, _size(node_axes) - 1).map(partial(_decode, node_axes))
    entities = sorted({s.entity for s in base.switches.values()} |
                      {n.switch for n in base.nodes.values()})
    port_keys = [(n, p) for n in names for p in (8000, 30000, 29501)]
    world_parts = st.tuples(
        st.lists(st.sampled_from(names), max_size=4, unique=True),
        st.lists(st.sampled_from(LANES), max_size=2, unique=True),
        st.tuples(*[node_choice for _ in names]),
        st.integers(0, 4 ** len(entities) - 1).map(
            partial(_decode, (("on", "off", "unavailable", None),) * len(entities))),
        st.booleans(),
        st.dictionaries(st.sampled_from(names), st.sampled_from(
            ("alive", "dead", "dead-with-container", "elsewhere")), max_size=3),
        st.dictionaries(st.sampled_from(names), st.sampled_from(("SHA256:a", "SHA256:b")),
                        max_size=8),
        st.sets(st.sampled_from(port_keys), max_size=3),
        st.dictionaries(st.sampled_from(names), st.sampled_from(("none", "done", "in-doubt")),
                        max_size=2))

    def build(parts: tuple[Any, ...]) -> World:
        pnodes, planes, nodes, states, ha_up, locked, keys, answered, records = parts
        config = replace(base, guards=replace(base.guards, protected_nodes=tuple(pnodes),
                                              protected_lanes=tuple(planes)))
        snapshot = ClusterSnapshot(1.0, tuple(_node(config, n, c)
                                              for n, c in zip(names, nodes, strict=True)))
        return World(config, snapshot, dict(zip(entities, states, strict=True)), ha_up,
                     tuple(_lock(n, o) for n, o in sorted(locked.items())), keys,
                     {k: k in answered for k in port_keys},
                     tuple(_record(n, r) for n, r in sorted(records.items())))

    node = st.sampled_from(names)
    on_off = st.sampled_from(("on", "off"))
    routes = st.one_of(
        st.builds(_serve_route, st.sampled_from(RECIPES), st.sampled_from(clusters)),
        st.builds(_route, st.just("stop"), st.just("stop"), st.sampled_from(LANES)),
        st.builds(_route, st.just("power-cycle"), st.just("power cycle"), node),
        st.builds(_switch_route, node, on_off),
        st.builds(_route, st.just("recover"), st.just("recover"), node),
        st.builds(_cluster_route, st.sampled_from(clusters), on_off),
        st.builds(_route, st.just("resume"), st.just("power resume"),
                  node.map(_wf_of)),
        st.builds(_route, st.just("runlock-close"), st.just("runlock close"), node),
        st.builds(_route, st.just("qualify"), st.just("qualify"), st.sampled_from(LANES)),
    )
    return world_parts.map(build), routes


async def _console(service: ClusterService, kind: str, argv: list[str]):
    target = argv[-1]
    if kind == "serve":
        return await service.preview_serve(argv[1], argv[3])
    if kind == "stop":
        return await service.preview_stop(target)
    if kind == "qualify":
        return await service.preview_qualify(target)
    if kind == "power-cycle":
        return await service.preview_power_cycle(target)
    if kind in ("power-on", "power-off"):  # no console key: the same object from the CLI
        return None
    if kind == "recover":
        return await service.preview_recover(target)
    if kind.startswith("cluster-power-"):
        return await service.preview_cluster_power(target, on=kind.endswith("-on"))
    if kind == "resume":
        offers = {o.record.wf: o for o in service.unfinished()}
        if target not in offers:
            return None
        return await service.preview_resume(offers[target])
    return await service.preview_runlock_close(target)


PARSERS: dict[str, Any] = {}
COMMANDS = {"serve": serve_cmd, "stop": stop_cmd, "power": power_cmd, "recover": recover_cmd,
            "runlock": runlock_cmd, "qualify": qualify_cmd}
OPENS = {"qualify": ops_common}
"""Where a command's route opens its context, when not in the command's module
(the lane commands drive their workflow through cli/ops_common.py)."""


async def _cli(world: World, ctx: OpsContext, argv: list[str]) -> tuple[int, dict[str, Any]]:
    """The command's own route from argv, with ``open_context`` giving the fake."""
    parser = PARSERS.get(argv[0]) or PARSERS.setdefault(argv[0], build_parser(argv[0]))
    args = parser.parse_args([*argv, "--dry-run", "--json"])
    module = COMMANDS[argv[0]]

    @contextlib.asynccontextmanager
    async def fake_context(config: Config, **kw: Any) -> AsyncIterator[OpsContext]:
        yield ctx

    out = io.StringIO()
    opener = OPENS.get(argv[0], module)
    saved = opener.open_context
    opener.open_context = fake_context  # type: ignore[attr-defined]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = await module._main(world.config, args)
    finally:
        opener.open_context = saved  # type: ignore[attr-defined]
    text = out.getvalue()
    return code, json.loads(text) if text.strip().startswith("{") else {}


def _shipped() -> Config:
    shipped = load_config(Path(__file__).resolve().parents[2] / "config.toml")
    for name in RECIPES:
        IMAGE_OF[name] = load_recipe(shipped, name).image
    images = sorted(set(IMAGE_OF.values()))
    IMAGE_SETS[:] = [(), tuple(images), *((i,) for i in images)]
    return shipped


BASE = _shipped()
WORLDS, ROUTES = strategies(BASE)


@pytest.fixture(scope="module")
def base() -> Config:
    return BASE


@pytest.fixture(scope="module")
def service(base: Config) -> ClusterService:
    return ClusterService(base, recipes={n: load_recipe(base, n) for n in RECIPES},
                          follow_journals=False)


@pytest.fixture(scope="module")
def runner() -> Any:
    """One event loop for every example (a fresh `asyncio.run` each costs more
    than most examples); what an example leaves running is cancelled after it,
    as `asyncio.run` would."""
    with asyncio.Runner() as r:
        yield r


@pytest.fixture(scope="module")
def recipes_read_once() -> Any:
    """The CLI's and the qualify gate's `load_recipe`, each shipped recipe read
    and checked once per guards setting (the only part of the config the worlds
    vary) instead of once per example: the same objects, a fraction of the
    parsing."""
    from sparktui.cli import serve_cmd as serve_mod
    from sparktui.ops.workflows import qualify as qualify_mod

    memo: dict[tuple[str, Any], Any] = {}

    def cached(config: Config, name: str) -> Any:
        key = (name, config.recipes_dir, config.guards)
        if key not in memo:
            memo[key] = load_recipe(config, name)
        return memo[key]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(serve_mod, "load_recipe", cached)
        mp.setattr(qualify_mod, "load_recipe", cached)
        yield


EXAMPLES = int(os.environ.get("PLAN_EXAMPLES", "2000"))
KINDS = {"serve", "stop", "power-cycle", "power-on", "power-off", "recover",
         "cluster-power-on", "cluster-power-off", "resume", "runlock-close", "qualify"}


@pytest.fixture(scope="module")
def seen() -> Any:
    """The workflows the examples drew, checked once they all ran: every one,
    in the worker that ran them (a test of its own would run in another
    worker under pytest-xdist, and see none). Fewer examples (PLAN_EXAMPLES)
    need not reach them all."""
    drawn: dict[str, int] = {}
    yield drawn
    if EXAMPLES >= 2000:
        assert set(drawn) == KINDS, drawn
        assert sum(drawn.values()) >= EXAMPLES


@pytest.mark.timeout(900)  # ~30 s of CPU; a loaded 2-core machine stretches the wall time
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow, HealthCheck.data_too_large])
@given(world=WORLDS, route=ROUTES)
def test_console_cli_and_run_agree_verdict_for_verdict(service, runner, recipes_read_once,
                                                      seen, world, route):
    kind, argv = route
    ctx = world.ctx()

    async def go() -> None:
        service.config = world.config
        service.ops = ctx
        code, printed = await _cli(world, ctx, argv)
        assert printed, f"{argv}: exit {code} and no plan printed"
        assert printed["workflow"] == kind
        assert code == (0 if printed["allowed"] else 3)
        preview = await _console(service, kind, argv)
        if preview is not None:
            assert preview.plan is not None
            assert preview.plan.to_json() == printed
            assert preview.allowed == printed["allowed"]
            assert [verdict_json(v) for v in preview.report.verdicts] == printed["verdicts"]
            plan = preview.plan
        else:
            plan = await prepare(ctx, _workflow_of(argv, world.config))
            assert plan.to_json() == printed
        if kind == "qualify" and plan.allowed:
            # an allowed gate would ask the lane's HTTP API (no fake here): the run's
            # verdicts are the fresh plan's, checked as for every workflow
            fresh = await prepare(ctx, plan.source)
            assert fresh.to_json() == printed and not plan.changes(fresh)
            return
        result = await execute(ctx, plan)
        assert result.report is not None, result.message
        assert [verdict_json(v) for v in result.report.verdicts] == printed["verdicts"]
        assert result.message.startswith("refused") == (not printed["allowed"]), result.message

    try:
        runner.run(go())
    finally:
        left = [t for t in asyncio.all_tasks(runner.get_loop()) if not t.done()]
        for t in left:
            t.cancel()
        if left:
            runner.run(asyncio.wait(left))
    seen[kind] = seen.get(kind, 0) + 1


def _workflow_of(argv: list[str], config: Config):
    from sparktui.ops.workflows.power import PowerSwitch
    from sparktui.ops.workflows.power_resume import Resume

    if argv[:2] == ["power", "resume"]:
        return Resume(argv[2])
    return PowerSwitch(argv[2], argv[1] == "on")
