"""A simulated whole night of the console's service on the normal scenario
(issue 25: an idle, qualified lane was raised UNRESPONSIVE five times in one
night, each cleared minutes later; "thrash suspected" rose after every plug
cycle). NIGHT_S of the simulator's clock, driven step by step (manual clock,
real SSH and HTTP to the simulator on loopback): a lane served and watched
all night with its canary rounds, endpoint checks, node polls and thrash
rules. Done when not one alert was raised.

Then the same night with the sentinel watching and a console attached over
its socket while the operator gates, stops, re-serves and gates a lane from a
shell: still not one alert. And the long-prompt incident night, sentinel and
console again: exactly the seeds' alerts (THRASH on the two nodes the
prompt hangs, FATAL on the lane), each raised once. The false-alert figure
with the host loaded is these tests run beside a CPU hog (see the report)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from sparktui.adapters.endpoints import resolve_endpoints
from sparktui.core.recipe_load import load_recipe
from sparktui.ops.context import open_runtime
from sparktui.ops.guards import Override
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.qualify import Qualify
from sparktui.ops.workflows.runner import WorkflowResult
from sparktui.ops.workflows.serve import Serve, ServeOptions
from sparktui.ops.workflows.stop import Stop
from sparktui.service.attach import socket_path
from sparktui.service.cluster import ClusterService
from sparktui.service.events import AlertCleared, AlertRaised, ServiceEvent

from ..service.simnight import (
    PACE,
    Night,
    advance_until,
    boot_unwatched,
    night,
    phase,
    recording_sentinel,
    with_phone,
)

NIGHT_S = 8 * 3600.0
"""Simulated seconds of the night (the issue: >= 8 simulated hours)."""
STEP_S = 60.0
"""Simulated seconds per step: coarse, but every canary round (60 s) runs
and finishes in real HTTP between steps (30 s steps took 223 s of wall on
the shared 2-core host: too close to the bound)."""
LANE = "glm53-flash-eugr-2x"
OPS_LANE = "glm53-mxfp4-fp8-4x-r39"
"""The safe 131K lane: not protected, so the operator may stop and serve it."""
OPS_CLUSTER = "4nodes-switch-b"


@pytest.mark.timeout(360)
async def test_a_normal_night_raises_no_alert(tmp_path: Path) -> None:
    async with night(tmp_path, "normal", "2nodes-dac", start=False,
                     poll_interval_s=60.0) as n:
        await boot_unwatched(n, LANE)
        await n.service.start(n.record)
        await advance_until(n, lambda: phase(n, LANE) == "serving", step=5.0,
                            max_sim_s=300, why=lambda: phase(n, LANE))
        began, wall = n.sim.clock.monotonic(), time.monotonic()
        seen: set[str] = set()

        def watch() -> bool:
            view = n.service.lanes()[LANE]
            seen.add(view.phase)
            return n.sim.clock.monotonic() - began >= NIGHT_S

        await advance_until(n, watch, step=STEP_S, max_sim_s=NIGHT_S + STEP_S)
        raised = [(t - began, e.alert.key, e.alert.evidence) for t, e in n.events
                  if isinstance(e, AlertRaised)]
        canary = n.service.lanes()[LANE].canary
        print(f"night: {NIGHT_S / 3600:g} simulated h in {time.monotonic() - wall:.0f} s wall, "
              f"{len(raised)} alert(s), phases {sorted(seen)}, canary {canary}")
        assert raised == []
        assert seen == {"serving"}
        assert canary and "1-token completion answered" in canary[0]


class Attached:
    """A console attached to the sentinel: its own service, reading the
    sentinel's stream over the socket."""

    def __init__(self, n: Night) -> None:
        self.service = ClusterService(n.config, clock=n.sim.clock,
                                      endpoints=resolve_endpoints(n.config),
                                      sentinel=socket_path(n.config.state_dir()))
        self.events: list[ServiceEvent] = []


async def run_workflow(n: Night, workflow: object, *, step: float,
                       max_sim_s: float) -> WorkflowResult:
    """A workflow from a shell (`sparktui serve|stop|qualify`): its own
    runtime, on the night's clock, while the sentinel and the console watch."""
    async with open_runtime(n.config, clock=n.sim.clock) as rt:
        plan = await prepare(rt.ops, workflow)  # type: ignore[arg-type]
        assert plan.allowed, plan.to_json()
        task = asyncio.create_task(execute(rt.ops, plan))
        await advance_until(n, task.done, step=step, max_sim_s=max_sim_s,
                            why=lambda: f"{workflow} did not end; lane {phase(n, OPS_LANE)}")
        return task.result()


@pytest.mark.timeout(900)
async def test_a_night_with_the_sentinel_a_console_and_the_operator_raises_no_alert(
        tmp_path: Path) -> None:
    """Issue 25's whole night: the sentinel watches, one console is attached
    over its socket, and the operator gates, stops, re-serves and gates the
    lane again from a shell over NIGHT_S simulated seconds. Not one alert in
    the sentinel or the console, no phone call, and the console reads the
    lane as the sentinel does at the end."""
    async with night(tmp_path, "normal", OPS_CLUSTER, start=False, own_recipes=True,
                     poll_interval_s=60.0) as n:
        with_phone(n)
        sentinel, lines = recording_sentinel(n)
        await boot_unwatched(n, OPS_LANE)
        stop = asyncio.Event()
        task = asyncio.create_task(sentinel.run(stop))
        console = Attached(n)
        began, wall = n.sim.clock.monotonic(), time.monotonic()
        outcomes: list[str] = []
        try:
            await advance_until(n, lambda: phase(n, OPS_LANE) == "serving", step=5.0,
                                max_sim_s=300, why=lambda: phase(n, OPS_LANE))
            await console.service.start(console.events.append)
            assert console.service.attached.startswith("attached to sentinel (pid ")

            async def until_hour(h: float) -> None:
                await advance_until(n, lambda: n.sim.clock.monotonic() - began >= h * 3600,
                                    step=STEP_S, max_sim_s=NIGHT_S)

            await until_hour(1.0)
            gate = await run_workflow(n, Qualify(OPS_LANE), step=1.0, max_sim_s=1800)
            outcomes.append(f"qualify: {gate.ok}")
            await until_hour(3.0)
            stopped = await run_workflow(n, Stop(OPS_LANE), step=1.0, max_sim_s=900)
            outcomes.append(f"stop: {stopped.ok}")
            await advance_until(n, lambda: phase(n, OPS_LANE) in ("stopped", "-"), step=5.0,
                                max_sim_s=600, why=lambda: phase(n, OPS_LANE))
            # today's fit refuses the seeds' safe lane by 0.59 GiB (issue 29): the
            # operator overrides it, as they ran it
            served = await run_workflow(n, Serve(load_recipe(n.config, OPS_LANE), OPS_CLUSTER,
                                                 ServeOptions(overrides=frozenset({Override.FIT}))),
                                        step=10.0, max_sim_s=3 * 3600)
            outcomes.append(f"serve: {served.ok}")
            await advance_until(n, lambda: phase(n, OPS_LANE) == "serving", step=5.0,
                                max_sim_s=600, why=lambda: phase(n, OPS_LANE))
            await until_hour(5.0)
            gate = await run_workflow(n, Qualify(OPS_LANE), step=1.0, max_sim_s=1800)
            outcomes.append(f"qualify: {gate.ok}")
            await until_hour(NIGHT_S / 3600)
            assert phase(n, OPS_LANE) == "serving"
            # the console has read what the sentinel has (the socket is a stream)
            await advance_until(n, lambda: console.service.lanes().get(OPS_LANE) is not None
                                and console.service.lanes()[OPS_LANE].phase == "serving",
                                step=1.0, max_sim_s=30)
        finally:
            await console.service.stop()
            stop.set()
            await task
        raised = [(round(t - began), e.alert.key, e.alert.evidence) for t, e in n.events
                  if isinstance(e, AlertRaised)]
        seen = [e.alert.key for e in console.events if isinstance(e, AlertRaised)]
        print(f"night with sentinel and console: {NIGHT_S / 3600:g} simulated h in "
              f"{time.monotonic() - wall:.0f} s wall, {outcomes}, {len(raised)} alert(s)")
        assert outcomes == ["qualify: True", "stop: True", "serve: True", "qualify: True"]
        assert raised == [] and seen == []
        assert n.sim.ha is not None and n.sim.ha.notifications == []
        assert not any(t.startswith("ALERT") for t in lines), lines


INCIDENT_LANE = "glm53-mxfp4-fp8-4x-r39-196k"
"""The 22:45 lane (seeds): its 150K-token prompt kills the engine and hangs dgx6 and dgx7."""


@pytest.mark.timeout(600)
async def test_the_incident_night_raises_exactly_its_alerts_each_once(tmp_path: Path) -> None:
    async with night(tmp_path, "long-prompt", OPS_CLUSTER, start=False,
                     poll_interval_s=20.0) as n:
        with_phone(n)
        sentinel, lines = recording_sentinel(n)
        await boot_unwatched(n, INCIDENT_LANE)
        stop = asyncio.Event()
        task = asyncio.create_task(sentinel.run(stop))
        console = Attached(n)
        try:
            await advance_until(n, lambda: phase(n, INCIDENT_LANE) == "serving", step=5.0,
                                max_sim_s=300, why=lambda: phase(n, INCIDENT_LANE))
            await console.service.start(console.events.append)
            began = n.sim.clock.monotonic()
            n.sim.run_prompt(INCIDENT_LANE, 150_000)

            def keys() -> set[str]:
                return {e.alert.key for _, e in n.events if isinstance(e, AlertRaised)}

            # the scenario (sim/scenarios.py): the head's pressure peaks in the
            # prefill before the engine dies; dgx6, dgx7 and dgx8 hang
            expected = [f"fatal:{INCIDENT_LANE}"] + [f"thrash:dgx{i}" for i in (5, 6, 7, 8)]
            await advance_until(n, lambda: keys() >= set(expected), step=2.0, max_sim_s=1800,
                                pace=PACE,
                                why=lambda: str(sorted(keys())))
            await advance_until(n, lambda: n.sim.clock.monotonic() - began >= 2400, step=5.0,
                                max_sim_s=2400)  # past dgx8's OOM kill, polls all along
            await advance_until(n, lambda: {e.alert.key for e in console.events
                                            if isinstance(e, AlertRaised)} >= set(expected),
                                step=1.0, max_sim_s=30)
        finally:
            await console.service.stop()
            stop.set()
            await task
        episodes = raised_episodes(n.events)
        print("incident alerts (key, raised, cleared; simulated s after the prompt):",
              [(k, round(r - began), c and round(c - began)) for k, r, c in episodes])
        assert sorted(k for k, _, _ in episodes) == sorted(expected), episodes  # each once
        ended = {k: c for k, _, c in episodes}
        # dgx6 and dgx7 stay hung (the runbook's plug cycle is the operator's); dgx8's
        # OOM killer frees it after ~25 min; the head's pressure ends with the engine
        assert ended["thrash:dgx6"] is None and ended["thrash:dgx7"] is None
        assert ended["thrash:dgx8"] is not None and ended["thrash:dgx8"] - began >= 1500
        assert ended["thrash:dgx5"] is not None
        seen = {e.alert.key for e in console.events if isinstance(e, AlertRaised)}
        assert seen == set(expected)
        printed = {t.split()[2].rstrip(":") for t in lines if t.startswith("ALERT thrash ")}
        assert printed == {f"dgx{i}" for i in (5, 6, 7, 8)}, lines  # the sentinel's own lines
        assert n.sim.ha is not None
        titles = [str(body["title"]) for _, body in n.sim.ha.notifications]
        assert sorted(t for t in titles if "RECOVERED" not in t) == sorted(
            [f"sparktui FATAL {INCIDENT_LANE}"] + [f"sparktui THRASH dgx{i}" for i in (5, 6, 7, 8)]
        ), titles
        # and one recovery message for each incident that ended, none for one still on
        for key, _, cleared in episodes:
            kind, _, subject = key.partition(":")
            told = titles.count(f"sparktui RECOVERED {kind.upper()} {subject}")
            assert told == (0 if cleared is None else 1), (key, cleared, titles)


def raised_episodes(events: list[tuple[float, ServiceEvent]]
                    ) -> list[tuple[str, float, float | None]]:
    """(key, raised at, cleared at or None) for each time an alert rose: a
    raise while the same key is active is an update (new evidence, the phone's
    mark), not another alert."""
    out: list[tuple[str, float, float | None]] = []
    active: dict[str, int] = {}
    for t, e in events:
        if isinstance(e, AlertRaised) and e.alert.key not in active:
            active[e.alert.key] = len(out)
            out.append((e.alert.key, t, None))
        elif isinstance(e, AlertCleared) and e.key in active:
            at = active.pop(e.key)
            out[at] = (out[at][0], out[at][1], t)
    return out
