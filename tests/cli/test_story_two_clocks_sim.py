"""The whole story on two clocks (issue 25, "one clock per comparison"): serve
a lane, stop it, serve the same name again, let the canary answer, send the
22:45 long prompt (the engine dies, two nodes thrash), bundle. Once as the
demo runs it (the console's service on the simulator's clock at 60x: every
window and bound in simulated time), once through the CLI on wall time
(`sparktui serve/stop/serve/wait/bundle`, watched by a service on the system
clock, as the sentinel watches). Both must see the same lane states and
raise the same alerts: nothing compares a time on one clock with one on the
other (a re-served name once stayed `stopping`, PSI read "1419 % of wall
time", a CLI bundle lost the simulator's kernel lines)."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import re
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sparktui.cli.demo_cmd import demo_console
from sparktui.core.config import Config
from sparktui.core.state import NodeState
from sparktui.ops.guards import Override
from sparktui.service.cluster import ClusterService
from sparktui.service.events import AlertRaised, LaneChanged, ServiceEvent

_spec = importlib.util.spec_from_file_location(
    "cli_harness", Path(__file__).parents[1] / "ops" / "cli_harness.py")
h = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(h)  # type: ignore[union-attr]

pytestmark = pytest.mark.usefixtures("quick_polls")

SPEED = 60.0
"""The demo's speed."""
LANE = "glm53-mxfp4-fp8-4x-r39-196k"
DARK = {"dgx6", "dgx7"}
"""The nodes the long prompt hangs (the seeds' 22:45 night)."""
OVERRIDE = frozenset({Override.FIT})
"""The seeds' 196k lane: its KV pin is short of one max-length request, and
the operator served it anyway (the fit refuses, typed override)."""
CANARY = f"canary:{LANE}"
PSI_SHARE = re.compile(r"PSI full total grew (\d+)%")
BOUND_S = 240.0
"""Real seconds for any one part of the story."""


class Story:
    """What one watcher saw: each lane state in order, each alert raised."""

    def __init__(self, service: ClusterService) -> None:
        self.service = service
        self.phases: list[str] = []
        self.alerts: list[str] = []
        self.evidence: dict[str, tuple[str, ...]] = {}
        self.psi: list[float] = []
        """Every "PSI full total grew N %" an alert gave as evidence."""

    def __call__(self, ev: ServiceEvent) -> None:
        if isinstance(ev, LaneChanged) and ev.lane.name == LANE:
            if not self.phases or self.phases[-1] != ev.lane.phase:
                self.phases.append(ev.lane.phase)
        elif isinstance(ev, AlertRaised):
            self.psi += [float(m.group(1)) for e in ev.alert.evidence
                         if (m := PSI_SHARE.search(e))]
            if ev.alert.key not in self.alerts:
                self.alerts.append(ev.alert.key)
                self.evidence[ev.alert.key] = ev.alert.evidence

    def phase(self) -> str:
        view = self.service.lanes().get(LANE)
        return view.phase if view else "gone"

    def canary_answered(self) -> bool:
        view = self.service.lanes().get(LANE)
        return bool(view and view.canary and "answered" in view.canary[0])


async def until(pred: Callable[[], object], why: Callable[[], object]) -> None:
    end = time.monotonic() + BOUND_S
    while not pred():
        assert time.monotonic() < end, why()
        await asyncio.sleep(0.1)


async def watched(story: Story, config: Config) -> None:
    await story.service.start(story)
    await until(lambda: story.service.snapshot().count(NodeState.ONLINE) == len(config.nodes),
                lambda: story.service.snapshot())


def incident_done(story: Story) -> bool:
    return {f"fatal:{LANE}", *(f"thrash:{n}" for n in DARK)} <= set(story.alerts)


async def demo_path(tmp_path: Path) -> tuple[Story, Path]:
    tmp_path.mkdir()
    cfg = h.fleet(tmp_path)
    async with h.published(cfg, scenario="long-prompt", speed=SPEED) as sim:
        console = dataclasses.replace(cfg, console=demo_console(cfg, SPEED))
        story = Story(ClusterService(console, clock=sim.clock))
        await watched(story, cfg)
        try:
            for round_ in (1, 2):
                preview = await story.service.preview_serve(LANE, overrides=OVERRIDE)
                assert preview.allowed and preview.run is not None, preview.refusals
                result = await asyncio.wait_for(preview.run(), BOUND_S)
                assert result.ok, (round_, result.message)
                await until(lambda: story.phase() == "serving" and story.canary_answered(),
                            lambda: (story.phase(), story.phases))
                if round_ == 1:
                    preview = await story.service.preview_stop(LANE)
                    result = await asyncio.wait_for(preview.run(), BOUND_S)  # type: ignore[misc]
                    assert result.ok, result.message
                    await until(lambda: story.phase() in ("gone", "stopped"),
                                lambda: story.phases)
            sim.run_prompt(LANE, 150_000)
            night = story.service.night
            await until(lambda: incident_done(story) and night.bundles,
                        lambda: (story.alerts, night.bundles))
            bundle = night.bundles[-1].path
        finally:
            await story.service.stop()
    return story, bundle


async def cli_path(tmp_path: Path, capsys, monkeypatch) -> tuple[Story, Path]:  # type: ignore[no-untyped-def]
    tmp_path.mkdir()
    cfg = h.fleet(tmp_path)
    async with h.published(cfg, scenario="long-prompt", speed=SPEED) as sim:
        story = Story(ClusterService(cfg))  # the system clock, as the sentinel runs
        await watched(story, cfg)
        try:
            for round_ in (1, 2):
                code = await asyncio.wait_for(h.sparktui(
                    cfg, "serve", LANE, "--override", "fit", stdin=h.Terminal(f"{LANE}\n"),
                    monkeypatch=monkeypatch), BOUND_S)
                out, err = capsys.readouterr()
                assert code == 0, (round_, out, err)
                code = await asyncio.wait_for(h.sparktui(cfg, "wait", LANE,
                                                         monkeypatch=monkeypatch), BOUND_S)
                assert code == 0, capsys.readouterr()
                await until(lambda: story.phase() == "serving" and story.canary_answered(),
                            lambda: (story.phase(), story.phases))
                if round_ == 1:
                    code = await asyncio.wait_for(h.sparktui(cfg, "stop", LANE, "--yes",
                                                             monkeypatch=monkeypatch), BOUND_S)
                    assert code == 0, capsys.readouterr()
                    await until(lambda: story.phase() in ("gone", "stopped"),
                                lambda: story.phases)
            sim.run_prompt(LANE, 150_000)
            await until(lambda: incident_done(story), lambda: story.alerts)
            capsys.readouterr()
            code = await h.sparktui(cfg, "bundle", LANE, monkeypatch=monkeypatch)
            out, err = capsys.readouterr()
            assert code == 0, err
        finally:
            await story.service.stop()
    return story, Path(out.strip().splitlines()[-1])


def summary(path: Path) -> str:
    with tarfile.open(path) as tar:
        first = tar.getmembers()[0]
        assert first.name.endswith("/SUMMARY.md")
        return tar.extractfile(first).read().decode()  # type: ignore[union-attr]


@pytest.mark.timeout(900)
async def test_the_story_on_the_simulators_clock_and_on_wall_time(tmp_path, capsys,
                                                                  monkeypatch):
    demo, demo_bundle = await demo_path(tmp_path / "demo")
    cli, cli_bundle = await cli_path(tmp_path / "cli", capsys, monkeypatch)
    print(f"demo: {demo.phases} {demo.alerts}\ncli: {cli.phases} {cli.alerts}\n"
          f"{demo.evidence.get(CANARY)}\nPSI shares: demo {demo.psi[:5]}, cli {cli.psi[:5]}")
    # the same states and alerts, serve to serve: the re-served name is never
    # `stopping`, no node is raised for a PSI rate taken across two clocks
    assert sorted(cli.alerts) == sorted(
        {f"fatal:{LANE}", *(f"thrash:{n}" for n in ("dgx5", "dgx6", "dgx7", "dgx8"))})
    # every phase the boot passed, graph capture too (its bar and "Graph capturing
    # finished" come in one batch with the API lines: it was never reported)
    assert cli.phases == ["starting", "loading weights", "KV allocation", "graph capture",
                          "API starting", "serving", "stopping", "stopped",
                          *cli.phases[8:14], "failed"]
    assert cli.phases[8:14] == cli.phases[:6]
    # no difference: the demo's canary once might have called the dying lane
    # unresponsive before its fatal line; it never did in 15 runs (5 of them
    # beside a CPU hog), so that tolerance is gone
    assert demo.phases == cli.phases, (demo.phases, demo.evidence.get(CANARY))
    assert set(demo.alerts) == set(cli.alerts)
    # a stall share is a share of the node's own time, on either watcher's clock
    # (a sentinel on wall time beside a 60x simulator once read 1419 %)
    assert demo.psi + cli.psi and all(0 <= p <= 100 for p in demo.psi + cli.psi), \
        (demo.psi, cli.psi)
    for text in (summary(demo_bundle), summary(cli_bundle)):
        assert "The lane failed on **rank" in text
        assert "kernel line(s) of kind" in text
