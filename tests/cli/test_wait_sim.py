"""`sparktui wait` over real SSH against the simulator: exit 0 ready with
stage times, 1 failed with rank and first fatal line, 2 stalled with the
last progress seen."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from sparktui.cli.wait_cmd import wait_lane

sys.path.insert(0, str(Path(__file__).parents[1] / "watch"))
from test_readiness_sim import World, serve, world


async def run_wait(w: World, lane: str, *, step: float, max_sim_s: float, **kw: object) -> int:
    task = asyncio.create_task(wait_lane(w.config, lane, clock=w.sim.clock, **kw))  # type: ignore[arg-type]
    start = w.sim.clock.monotonic()
    while not task.done():
        assert w.sim.clock.monotonic() - start < max_sim_s
        await w.sim.advance(step)
        await asyncio.sleep(0.002)
    return task.result()


async def test_wait_exits_0_when_ready(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async with world(tmp_path, "normal") as w:
        launch = await serve(w, "dsv41-flash-8x")
        code = await run_wait(w, launch.lane, step=5.0, max_sim_s=3 * 3600, stall_after_s=900)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "watching 8/8 rank(s)" in out
    assert "loading weights" in out and "KV pool" in out
    progress = [ln for ln in out.splitlines() if "loading weights, shard " in ln]
    assert len(progress) >= 5 and all("ETA" in ln for ln in progress[1:])
    last = out.strip().splitlines()[-1]
    assert last.startswith("dsv41-flash-8x: ready (port ")
    assert "health" in last and "first token" in last


async def test_wait_exits_1_with_rank_and_first_fatal_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with world(tmp_path, "cache-not-symlink") as w:
        launch = await serve(w, "dsv41-flash-8x")
        code = await run_wait(w, launch.lane, step=1.0, max_sim_s=900, stall_after_s=900,
                              quiet=True)
    out = capsys.readouterr().out
    assert code == 1
    first = out.strip().splitlines()[0]
    assert first.startswith("dsv41-flash-8x: failed on rank ")
    assert int(first.split("rank ")[1].split(":")[0]) in (5, 6, 7)
    assert "LocalEntryNotFoundError" in first


async def test_wait_exits_2_when_no_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rank 7 never started: the others wait for it (up to the store's 600 s
    timeout), printing nothing; stalled at 300 s they still run."""
    async with world(tmp_path, "normal") as w:
        launch = await serve(w, "dsv41-flash-8x", ranks=range(7))
        code = await run_wait(w, launch.lane, step=5.0, max_sim_s=3600, stall_after_s=300)
    out = capsys.readouterr().out
    assert code == 2, out
    verdict = out.strip().splitlines()[-3:]
    assert verdict[0].startswith("dsv41-flash-8x: stalled; last progress: ")
    assert verdict[1] == "    ranks still running: r0, r1, r2, r3, r4, r5, r6"
    assert "`sparktui stop dsv41-flash-8x` stops them" in verdict[2]


async def test_wait_unknown_lane_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with world(tmp_path, "normal") as w:
        code = await run_wait(w, "no-such-lane", step=1.0, max_sim_s=60, stall_after_s=60)
    assert code == 1
    assert "no rank containers" in capsys.readouterr().out
