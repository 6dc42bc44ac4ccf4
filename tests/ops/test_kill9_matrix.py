"""kill -9 at every journaled step of serve, stop, power cycle and qualify
(issue 25, "crash-safe state"): the workflow runs as its own `python -m
sparktui` process against the simulator (real SSH and HTTP on loopback) and is
SIGKILLed the moment a step's intent is on disk; then a fresh start reads the
world: a console's `ClusterService` started anew finds the lane in its true
phase (never `stopping` on a stop that died, never blocked), every lock left
is stale and blocks no plan, an unfinished workflow is said stale; and the
next serve of the lane (after a stop, which the stale lock must not block)
reaches `serving`. The steps are not listed here: each workflow's
``--dry-run --json`` plan names them, in the order they run. The sentinel is
killed too, at every step of each of the four workflows it watches.

The console runs its workflows through the same `execute` as the CLI (one
plan, one runner, one journal), so the killed CLI process stands for a killed
console; the fresh start is the console's own service.

One simulator and one state dir per workflow, shared by its steps in turn: a
state dir that has seen a crash at every step before is the real test of
"poisoned state" (the issue's two demo starts after one crash)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sparktui.adapters.endpoints import resolve_endpoints
from sparktui.core.config import Config
from sparktui.core.state import NodeState
from sparktui.ops.journal import Journal
from sparktui.ops.resume import stale_note
from sparktui.ops.runlocks import RunLocks, owner_alive
from sparktui.service.cluster import ClusterService
from sparktui.sim.cluster import Sim

_spec = importlib.util.spec_from_file_location(
    "cli_harness", Path(__file__).parent / "cli_harness.py")
h = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(h)  # type: ignore[union-attr]

ROOT = Path(__file__).resolve().parents[2]
LANE = "glm53-flash-eugr-2x"
"""The lightest lane (two ranks); its protection is lifted in this test's config
so that it can be stopped."""
CLUSTER = "4nodes-switch-b"
NODE = "dgx6"
"""The node power-cycled: one of the lane's."""
KILL_WAIT_S = 60.0
"""Real seconds a step may take to be journaled (a power cycle's liveness wait
polls every few real seconds)."""

pytestmark = pytest.mark.timeout(600)  # each runs in 20-80 s on a loaded 2-core host


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process commands (the recovery) re-check every 0.05 s real (see
    tests/cli/conftest.py quick_polls); the killed process keeps its own pace."""
    from sparktui.ops.workflows import power, stop

    monkeypatch.setattr(power, "WAIT_POLL_S", 0.05)
    monkeypatch.setattr(stop, "MEMORY_POLL_S", 0.05)


def config_for(tmp_path: Path) -> Config:
    cfg = h.fleet(tmp_path)
    text = cfg.path.read_text().replace(f'protected_lanes = ["{LANE}"]', "protected_lanes = []")
    assert text != cfg.path.read_text()
    cfg.path.write_text(text)
    return h.load_config(cfg.path)


class World:
    def __init__(self, config: Config, sim: Sim, capsys: Any, monkeypatch: Any) -> None:
        self.config, self.sim = config, sim
        self.capsys, self.monkeypatch = capsys, monkeypatch
        self.journal = Journal.in_state_dir(config.state_dir())
        self.locks = RunLocks.in_state_dir(config.state_dir())

    async def cli(self, *argv: str) -> tuple[int, str, str]:
        """`sparktui ARGV` in this process (a fresh start: nothing is carried over
        but the state dir)."""
        self.capsys.readouterr()
        code = await h.sparktui(self.config, *argv, monkeypatch=self.monkeypatch)
        out, err = self.capsys.readouterr()
        return code, out, err

    async def plan_steps(self, *argv: str) -> list[tuple[str, str]]:
        """(step, target) of each step of ``argv``'s plan, from its dry run."""
        code, out, err = await self.cli(*argv, "--dry-run", "--json")
        assert code == 0, err
        return [(s["step"], s["target"]) for s in json.loads(out)["steps"]]

    async def kill_at(self, step: tuple[str, str], *argv: str) -> int:
        """Run `sparktui ARGV [--yes]` as its own process; SIGKILL it once ``step``'s
        intent is journaled. Returns the killed pid."""
        env = {k: v for k, v in os.environ.items() if k != "SPARKTUI_HA_TOKEN"}
        env["PYTHONPATH"] = str(ROOT / "src")
        self.watch_from = self.journal_size()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "sparktui", "--config", str(self.config.path), *argv,
            *(() if argv[0] == "qualify" else ("--yes",)),  # the gate changes nothing
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, env=env)
        try:
            await self.until_intent(step, lambda: None if proc.returncode is None
                                    else f"{' '.join(argv)} ended ({proc.returncode})")
        except BaseException as exc:
            if proc.returncode is None:
                proc.kill()
            _out, err = await proc.communicate()
            pytest.fail(f"{exc}\n{err.decode()[-2000:]}")
        proc.send_signal(signal.SIGKILL)
        assert await proc.wait() == -signal.SIGKILL
        return proc.pid

    def journal_size(self) -> int:
        return self.journal.path.stat().st_size if self.journal.path.exists() else 0

    async def until_intent(self, step: tuple[str, str], ended: Callable[[], Any]) -> None:
        """Until ``step`` (its name) is journaled as an intent after `watch_from`:
        only the new bytes are read, every 5 ms, so the kill lands within a
        command or two of the intent (the step's own command may or may not have
        been sent: the window a crash-safe journal exists for). ``ended``: what
        ended before it did (None while it runs)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + KILL_WAIT_S
        buf = b""
        while not self.journal.path.exists() and loop.time() < deadline:
            await asyncio.sleep(0.005)
        with open(self.journal.path, "rb") as f:
            f.seek(self.watch_from)
            while True:
                buf += f.read()
                *lines, buf = buf.split(b"\n")
                for raw in lines:
                    e = json.loads(raw)
                    if e.get("kind") == "intent" and e.get("step") == step[0]:
                        return
                if (why := ended()) is not None or loop.time() > deadline:
                    pytest.fail(f"{step} was never journaled: {why or 'timed out'}")
                await asyncio.sleep(0.005)

    # -- what a fresh start finds ------------------------------------------------------
    async def console_phase(self) -> str | None:
        """The lane's phase in a console started now (None: no lane), once it has
        read every node and, for a lane with a running rank, its first phase."""
        service = ClusterService(self.config, clock=self.sim.clock,
                                 endpoints=resolve_endpoints(self.config))
        await service.start(lambda event: None)
        try:
            nodes = self.config.clusters[CLUSTER].nodes
            running = any(c.status == "running" for n in nodes
                          for c in self.sim.nodes[n].docker.containers.values())

            def read() -> bool:
                snaps = {s.node: s for s in service.snapshot().nodes}
                if any(n not in snaps or snaps[n].state is NodeState.UNKNOWN for n in nodes):
                    return False
                view = service.lanes().get(LANE)
                return not running or (view is not None and view.phase != "starting")

            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30.0
            while not read() and loop.time() < deadline:
                await asyncio.sleep(0.05)
            assert read(), "the console never read the cluster"
            await asyncio.sleep(0.5)  # a few polls more: a phase that flips shows
            deadline = loop.time() + 10.0  # a poll or two: the console comes to the truth
            while (wrong := self.wrong_nodes(service)) and loop.time() < deadline:
                await asyncio.sleep(0.1)
            assert not wrong, f"the console shows {wrong}"
            view = service.lanes().get(LANE)
            return None if view is None else view.phase
        finally:
            await service.stop()

    def wrong_nodes(self, service: ClusterService) -> list[str]:
        """The nodes the console shows otherwise than the simulator has them."""
        true = {"on": {NodeState.ONLINE},
                "off": {NodeState.POWERED_OFF, NodeState.UNREACHABLE},
                "halted": {NodeState.UNREACHABLE}}  # plug on, OS shut down
        return [f"{s.node} {s.state} (it is {power})" for s in service.snapshot().nodes
                if (power := self.sim.nodes[s.node].power) in true and s.state not in true[power]]

    def check_stale(self, pid: int, where: str) -> None:
        """Every lock left is the killed process's, stale (pid, age shown), blocking
        nothing; its unfinished workflow says it is stale."""
        for lock in self.locks.list():
            assert lock.pid == pid, f"{where}: a lock of another process: {lock}"
            assert owner_alive(lock) is False, where
        for line in self.locks.lines(now=0.0):
            assert "STALE" in line and f"pid {pid} is gone" in line, (where, line)
        (record,) = [r for r in self.journal.unfinished() if r.detail.get("pid") == pid]
        assert f"pid {pid}) is gone" in stale_note(record, record.began_at + 5, record.clock), where

    async def serve_reaches_serving(self, where: str) -> None:
        """The operator's next serve of the lane: stop what is left (the stale lock
        must not block it), then serve; it reaches serving."""
        if self.lane_containers():
            code, _, err = await self.cli("stop", LANE, "--yes")
            assert code == 0, f"{where}: stop after the kill: {err[-1500:]}"
        assert not self.lane_containers(), where
        code, _, err = await self.cli(*SERVE, "--yes")
        refused = "\n".join(line for line in err.splitlines() if "[REFUSE]" in line)
        assert code == 0, f"{where}: the next serve: {refused or err[-1500:]}"
        end = [e for e in self.journal.entries() if e.kind == "end" and e.workflow == "serve"][-1]
        assert end.ok and end.detail.get("outcome") == "ready", (where, end)

    def true_phase(self, phase: str | None) -> bool:
        """Is ``phase`` what the lane's containers are: no lane when none is left;
        a live phase (not stopping, not failed) when every rank runs; failed or
        booting when some are missing (a serve or a stop cut half-way); never
        `stopping` for a stop whose process is gone."""
        ranks = [c for n in self.config.clusters[CLUSTER].nodes
                 for c in self.sim.nodes[n].docker.containers.values()
                 if c.labels.get("sparktui.lane") == LANE]
        if not ranks:
            return phase is None
        whole = all(c.status == "running" for c in ranks) and \
            len(ranks) == int(ranks[0].labels["sparktui.nranks"])
        return phase not in (None, "stopping") and (not whole or phase != "failed")

    async def no_lane(self) -> None:
        if self.lane_containers():
            code, _, err = await self.cli("stop", LANE, "--yes")
            assert code == 0, err[-1500:]

    async def serving(self) -> None:
        if not self.lane_containers():
            code, _, err = await self.cli(*SERVE, "--yes")
            assert code == 0, err[-1500:]

    async def node_back(self, node: str, real_s: float = 60.0) -> None:
        """Until ``node`` answers SSH again (a cycle killed after its plug came back
        leaves it booting)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + real_s
        while not self.sim.nodes[node].up:
            assert loop.time() < deadline, f"{node} never came back"
            await asyncio.sleep(0.05)

    def lane_containers(self) -> list[str]:
        return [c.name for n in self.config.clusters[CLUSTER].nodes
                for c in self.sim.nodes[n].docker.containers.values()
                if c.labels.get("sparktui.lane") == LANE]


async def each_step(world: World, argv: tuple[str, ...], prepare: Callable[[], Any],
                    after: Callable[[int], Any] | None = None,
                    phase_after: Callable[[str | None], bool] | None = None) -> list[str]:
    """Kill ``argv`` at each step its plan names (once per step name: a step run
    on several nodes is one code path), ``prepare`` readying the world before the
    plan and before each kill; after each: a fresh console's phase for the lane
    (``phase_after`` says which are true), the stale locks, ``after`` (what the
    operator does about an unfinished workflow), then the next serve."""
    await prepare()
    names: list[str] = []
    for name, target in await world.plan_steps(*argv):
        if name in names:
            continue
        names.append(name)
        where = f"{' '.join(argv)}, killed at {name} [{target}]"
        await prepare()
        pid = await world.kill_at((name, target), *argv)
        world.check_stale(pid, where)
        phase = await world.console_phase()
        assert (phase_after or world.true_phase)(phase), \
            f"{where}: the console shows the lane {phase}; its ranks: {world.lane_containers()}"
        if after is not None:
            await after(pid)
        await world.serve_reaches_serving(where)
    assert names, argv
    return names


SERVE = ("serve", LANE, "--cluster", CLUSTER, "--no-qualify")


async def test_kill_serve_at_every_step(tmp_path, capsys, monkeypatch, quick):
    cfg = config_for(tmp_path)
    async with h.published(cfg) as sim:
        world = World(cfg, sim, capsys, monkeypatch)
        steps = await each_step(world, SERVE, world.no_lane)
        assert {"start rank 0", "readiness"} <= set(steps), steps


async def test_kill_stop_at_every_step(tmp_path, capsys, monkeypatch, quick):
    cfg = config_for(tmp_path)
    async with h.published(cfg) as sim:
        world = World(cfg, sim, capsys, monkeypatch)
        steps = await each_step(world, ("stop", LANE), world.serving)
        assert {"stop rank 0", "memory freed"} <= set(steps), steps


async def test_kill_qualify_at_every_step(tmp_path, capsys, monkeypatch, quick):
    """A killed gate leaves the lane serving: the console says so."""
    cfg = config_for(tmp_path)
    async with h.published(cfg) as sim:
        world = World(cfg, sim, capsys, monkeypatch)
        steps = await each_step(world, ("qualify", LANE), world.serving,
                                phase_after=lambda p: p == "serving")
        assert {"qualify identifiers", "qualify bench"} <= set(steps), steps


async def test_kill_power_cycle_at_every_step(tmp_path, capsys, monkeypatch, quick):
    """After each kill the operator completes (`power resume`) or closes the
    unfinished cycle, as the next start offers it; the node is back, and the
    lane served on it reaches serving."""
    cfg = config_for(tmp_path)
    async with h.published(cfg) as sim:
        world = World(cfg, sim, capsys, monkeypatch)

        async def settle(pid: int) -> None:
            code, out, err = await world.cli("power", "resume", "--json")
            assert code == 0, err
            (offer,) = [o for o in json.loads(out) if o["workflow"] == "power-cycle"]
            assert f"(pid {pid}) is gone" in offer["what"], offer
            if offer["action"]:
                code, _, err = await world.cli("power", "resume", offer["wf"], "--yes")
                assert code == 0, f"resume: {err[-1500:]}"
            else:
                code, _, err = await world.cli("power", "resume", offer["wf"], "--close",
                                               "killed; nothing left to complete", "--yes")
                assert code == 0, err
            await world.node_back(NODE)

        steps = await each_step(world, ("power", "cycle", NODE, "--off-seconds", "2"),
                                world.no_lane, after=settle,
                                phase_after=lambda p: p is None)
        # killed after the shutdown with the plug-off in doubt, the plug reading on and
        # the node dark: resume cuts it and cycles it (power_resume.cut_and_cycle)
        assert {"plug off", "plug on", "liveness"} <= set(steps), steps


async def start_sentinel(world: World) -> asyncio.subprocess.Process:
    """`sparktui sentinel` as its own process, once it has read every node."""
    env = {k: v for k, v in os.environ.items() if k not in ("SPARKTUI_HA_TOKEN",
                                                            "JOURNAL_STREAM")}
    env["PYTHONPATH"] = str(ROOT / "src")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sparktui", "--config", str(world.config.path), "sentinel",
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, env=env)
    assert proc.stdout is not None
    seen: list[str] = []
    async with asyncio.timeout(60):
        while sum(" online" in line for line in seen) < len(world.config.nodes):
            line = (await proc.stdout.readline()).decode()
            assert line, f"the sentinel ended early: {seen}"
            seen.append(line.strip())
    return proc


SENTINEL_CASES = {
    # workflow -> (argv, the world before it, the lane's true phase after it)
    "serve": (SERVE, "no_lane", "serving"),
    "stop": (("stop", LANE), "serving", None),
    "qualify": (("qualify", LANE), "serving", "serving"),
    "power-cycle": (("power", "cycle", NODE, "--off-seconds", "2"), "no_lane", None),
}


@pytest.mark.parametrize("workflow", list(SENTINEL_CASES))
async def test_kill_the_sentinel_at_every_step(workflow, tmp_path, capsys, monkeypatch, quick):
    """The sentinel watches while a CLI workflow runs; killed at each step of
    it, the workflow goes on to its end (the sentinel only watches), a console
    started afterwards shows the lane's true phase, a new sentinel starts (the
    dead one's pid file holds nothing) and watches, and the next serve of the
    lane reaches serving."""
    argv, before, phase_after = SENTINEL_CASES[workflow]
    cfg = config_for(tmp_path)
    async with h.published(cfg) as sim:
        world = World(cfg, sim, capsys, monkeypatch)
        prepare = getattr(world, before)
        await prepare()
        names: list[str] = []
        for name, target in await world.plan_steps(*argv):
            if re.sub(r"\d+", "N", name) in names:
                continue  # which rank the workflow is at is nothing to the sentinel
            names.append(re.sub(r"\d+", "N", name))
            where = f"sentinel killed at {workflow}'s {name} [{target}]"
            await prepare()
            sentinel = await start_sentinel(world)
            world.watch_from = world.journal_size()
            world.capsys.readouterr()
            run = asyncio.create_task(h.sparktui(
                cfg, *argv, *(() if workflow == "qualify" else ("--yes",)),
                monkeypatch=monkeypatch))
            try:
                await world.until_intent((name, target), lambda task=run: f"{workflow} ended"
                                         if task.done() else None)
            finally:
                sentinel.send_signal(signal.SIGKILL)
                assert await sentinel.wait() == -signal.SIGKILL
            assert await run == 0, f"{where}: {world.capsys.readouterr().err[-1500:]}"
            if workflow == "power-cycle":
                await world.node_back(NODE)
            phase = await world.console_phase()
            assert phase == phase_after, f"{where}: the console shows the lane {phase}"
            again = await start_sentinel(world)
            again.send_signal(signal.SIGTERM)
            await asyncio.wait_for(again.communicate(), 30)
            assert again.returncode == 0, where
            if workflow != "serve":  # the serve under test is that serve
                await world.serve_reaches_serving(where)
        assert len(names) >= 2, names
        if workflow == "serve":
            assert {"start rank N", "readiness"} <= set(names), names
