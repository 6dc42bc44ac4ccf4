"""`sparktui logs` over real SSH against the simulator."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from sparktui.cli.logs_cmd import FATAL_MARK, PHASE_MARK, PROGRESS_MARK, show_logs

sys.path.insert(0, str(Path(__file__).parents[1] / "watch"))
from test_readiness_sim import serve, world


async def test_logs_of_a_booted_lane_with_markers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with world(tmp_path, "normal") as w:
        launch = await serve(w, "dsv41-flash-8x")
        await w.sim.advance(3 * 3600)
        code = await show_logs(w.config, launch.lane, rank=0, clock=w.sim.clock)
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"{PHASE_MARK} dsv41-flash-8x rank 0 on dgx1 (sparktui-dsv41-flash-8x-r0)"
    assert f"{PHASE_MARK} dsv41-flash-8x: loading weights" in lines
    assert any(ln.startswith(f"{PROGRESS_MARK} shard ") and "ETA" in ln for ln in lines)
    assert any(ln.startswith(f"{PHASE_MARK} dsv41-flash-8x: KV allocation") for ln in lines)
    assert any(ln.startswith(f"{PHASE_MARK} dsv41-flash-8x: serving") for ln in lines)
    assert not any(ln.startswith(FATAL_MARK) for ln in lines)
    assert not any("\r" in ln or "\x1b" in ln for ln in lines)


async def test_logs_marks_the_fatal_line_of_a_dead_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with world(tmp_path, "cache-not-symlink") as w:
        launch = await serve(w, "dsv41-flash-8x")
        await w.sim.advance(300)
        code = await show_logs(w.config, launch.lane, rank=6, clock=w.sim.clock)
        # the lane's failure is the watcher's decision across ranks: the
        # earliest LocalEntryNotFoundError by the nodes' clocks
        first = {r.rank: next(ln.t for ln in w.sim.nodes[r.node].docker.containers[
            r.container].logs if "LocalEntryNotFoundError" in ln.text)
            for r in launch.ranks if r.node in ("dgx6", "dgx7", "dgx8")}
    out = capsys.readouterr().out
    assert code == 0
    fatal = [ln for ln in out.splitlines() if ln.startswith(FATAL_MARK)]
    assert "LocalEntryNotFoundError" in fatal[0]
    earliest = min(first, key=lambda r: first[r])
    assert fatal[-1] == (f"{FATAL_MARK} lane failed on rank {earliest} (hf_entry_missing)"
                         if earliest == 6 else
                         f"{FATAL_MARK} lane failed on rank {earliest} (hf_entry_missing): "
                         f"{fatal[0].split(' ', 2)[2]}")


async def test_logs_follow_stops_when_the_container_exits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with world(tmp_path, "normal") as w:
        launch = await serve(w, "dsv41-flash-8x")
        task = asyncio.create_task(
            show_logs(w.config, launch.lane, rank=3, follow=True, tail=5, clock=w.sim.clock))
        container = w.sim.nodes["dgx4"].docker.containers[launch.ranks[3].container]
        # V2's first "Graph capturing finished" is its profiling pass: wait for the capture
        while not any("Graph capturing finished in 54" in ln.text for ln in container.logs):
            await w.sim.advance(10)
            await asyncio.sleep(0.002)
        await asyncio.sleep(0.2)  # let the stream deliver
        assert not task.done()
        result = await w.fleet.get("dgx4").run(
            f"docker stop -t 1 {launch.ranks[3].container}", 30)
        assert result.ok, result.stderr
        for _ in range(200):
            if task.done():
                break
            await w.sim.advance(1)
            await asyncio.sleep(0.01)
        assert task.done() and task.result() == 0
    out = capsys.readouterr().out
    assert "Graph capturing finished in 54 secs" in out
    # a worker rank prints no KV pool size (the engine core's line, on the head)
    assert f"{PHASE_MARK} dsv41-flash-8x: API starting" in out


async def test_logs_unknown_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async with world(tmp_path, "normal") as w:
        launch = await serve(w, "dsv41-flash-8x")
        code = await show_logs(w.config, launch.lane, rank=9, clock=w.sim.clock)
    assert code == 1
    assert "has no rank 9 (ranks found: 0, 1, 2, 3, 4, 5, 6, 7)" in capsys.readouterr().err
