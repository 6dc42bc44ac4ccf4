"""Exit 137 against the simulator (real SSH on loopback, manual clock): a rank
the host's global OOM killer takes mid-load (its container exits 137 with
OOMKilled false, the kernel's report in its node's journal) is the lane's
failure as an OOM with the kernel's evidence, in `sparktui wait`'s words too;
SGLang's own SIGKILL of its tree after a Python error (137, no oom-killer line
for it, another process's kill on the node) is never called an OOM."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_readiness_sim import drive, lane_watch, serve, world

from sparktui.cli.wait_cmd import describe
from sparktui.core.logsig import Kind, Phase
from sparktui.core.recipe_load import load_recipe
from sparktui.core.render import plan
from sparktui.sim.engine import Engine
from sparktui.sim.journal import oom_kill_lines
from sparktui.sim.memory import GIB
from sparktui.watch.readiness import Outcome

SERVING = "glm53-flash-eugr-2x"      # 2nodes-dac: dgx1 (head), dgx2
SGLANG_LANE = "dsv41-flash-sglang-4x"  # 4nodes-switch-b: dgx5 (head) .. dgx8


async def test_a_rank_the_kernel_oom_kills_fails_the_lane_as_an_oom(tmp_path: Path) -> None:
    async with world(tmp_path, "normal") as w:
        launch = await serve(w, SERVING)
        watch = await lane_watch(w, launch.lane, first_token=False)
        task = asyncio.create_task(watch.run())
        node = w.sim.nodes["dgx2"]
        rank1 = next(c for c in node.docker.running() if isinstance(c.engine, Engine))
        await w.sim.clock.step_until(
            lambda: task.done() or node.memory.holdings.get(rank1.id, 0) > 20 * GIB,
            step=30.0, max_s=3600, why=watch.tracker.summary)
        assert not task.done() and watch.tracker.phase is Phase.LOADING
        # something outside the lane grows on dgx2: the host runs out of memory and
        # the kernel's global OOM killer takes the biggest process, the rank's engine
        node.spec.oom_kill_after_s = 0.0
        node.memory.set("someone-elses-job", (node.memory.headroom_gib() + 2.0) * GIB)
        await drive(w.sim, task, step=1.0, max_sim_s=600, why=watch.tracker.summary)
        result = task.result()
        state = json.loads((await w.fleet.get("dgx2").run(
            f"docker inspect --format '{{{{json .State}}}}' {rank1.name}", 30)).stdout)
    assert (state["ExitCode"], state["OOMKilled"]) == (137, False)
    assert result.outcome is Outcome.FAILED
    f = result.failure
    assert f is not None and f.rank == 1 and f.kind is Kind.KERNEL_OOM_KILL, f
    assert f.line.startswith("OOM: the kernel's OOM killer killed python3 (pid "), f.line
    assert "anon-rss 2" in f.line and f.line.endswith(
        "(host out of memory on dgx2); container killed (SIGKILL)")
    text = describe(result)
    assert text.startswith(f"{launch.lane}: failed on rank 1: OOM: the kernel's OOM killer "
                           "killed python3"), text


async def test_sglangs_own_sigkill_of_its_tree_is_never_an_oom(tmp_path: Path) -> None:
    """cache-not-symlink: dgx6-8's SGLang ranks die of LocalEntryNotFoundError,
    sigquit, and the tree's own SIGKILL (137). dgx6's kernel journal meanwhile
    holds an OOM kill of another process (not the rank's cgroup, not its pid)."""
    async with world(tmp_path, "cache-not-symlink") as w:
        recipe = load_recipe(w.config, SGLANG_LANE)
        launch = plan(w.config, recipe, "4nodes-switch-b")  # dgx6-8 lack the symlink
        for r in launch.ranks:
            assert (await w.fleet.get(r.node).run(r.command(3), 30)).ok
        await w.sim.advance(1.0)  # within the ranks' lives
        for line in oom_kill_lines("0" * 64, 77, 4 * 1024 * 1024):
            w.sim.nodes["dgx6"].journal.kernel(w.sim.wall(), line)
        watch = await lane_watch(w, launch.lane, first_token=False)
        watch.start()
        try:
            task = asyncio.create_task(watch.verdict())
            await drive(w.sim, task, step=1.0, max_sim_s=900, why=watch.tracker.summary)
            result = task.result()
            # on past the verdict until every rank's container is gone and its exit read
            settled = asyncio.create_task(watch.settled())
            await drive(w.sim, settled, step=1.0, max_sim_s=900, why=watch.tracker.summary)
            # each rank's exit as the watch read it (its node's journal asked)
            exits = {rank: st.exit for rank, st in watch._ranks.items()}
        finally:
            await watch.stop()
        codes = {c.exit_code for n in w.sim.nodes.values() for c in n.docker.containers.values()
                 if c.labels.get("sparktui.lane") == SGLANG_LANE and c.status == "exited"}
    assert 137 in codes
    f = result.failure
    assert f is not None and f.line.startswith("Scheduler hit an exception:"), f
    assert f.cause is not None and "LocalEntryNotFoundError" in f.cause
    assert f.kind is not Kind.KERNEL_OOM_KILL and f.why is not Kind.KERNEL_OOM_KILL
    assert "OOM" not in describe(result) and "OOM" not in f.describe()
    sigkilled = {rank: e[0].text for rank, e in exits.items() if e is not None
                 and e[0].fields.get("exit_code") == "137"}
    assert set(sigkilled) == {1, 2, 3}, exits  # dgx6-8, dgx6's among them
    assert set(sigkilled.values()) == {"container killed (SIGKILL)"}
