"""Start-up at fleet and beyond-fleet size, the speed clock, and followers."""

from __future__ import annotations

import asyncio

import asyncssh

from sparktui.sim.spec import small_spec
from sparktui.sim.testing import connect, running_sim

from .conftest import exec_on


async def test_sixty_four_nodes_start_and_answer():
    async with running_sim(spec=small_spec(64)) as sim:
        assert len(sim.nodes) == 64
        ports = {ep["port"] for ep in sim.endpoints()["nodes"].values()}
        assert len(ports) == 64
        hosts = {ep["api_host"] for ep in sim.endpoints()["nodes"].values()}
        assert len(hosts) == 64 and all(h.startswith("127.") for h in hosts)
        outs = await asyncio.gather(*(exec_on(sim, n, "uname -r") for n in ("node1", "node64")))
        assert [o[0] for o in outs] == ["6.17.0-1031-nvidia\n"] * 2


async def test_two_sims_in_one_process_do_not_collide(fleet):
    async with running_sim(fleet) as a, running_sim(fleet) as b:
        hosts_a = {ep["api_host"] for ep in a.endpoints()["nodes"].values()}
        hosts_b = {ep["api_host"] for ep in b.endpoints()["nodes"].values()}
        assert hosts_a.isdisjoint(hosts_b)


async def test_speed_clock_runs_the_cluster_by_itself(fleet, serve):
    async with running_sim(fleet, speed=2000.0) as sim:
        await serve(sim, "glm53-flash-eugr-2x")
        engine = sim.lane_rank0("glm53-flash-eugr-2x")
        await asyncio.wait_for(sim.wait_until(lambda: engine.phase == "ready"), 20)
        assert sim.clock.monotonic() > 300


async def test_journal_follow_sees_thrash_lines(fleet, serve):
    async with running_sim(fleet, scenario="boot-d-oom") as sim:
        async with connect(sim, "dgx3") as conn:
            proc = await conn.create_process(
                "journalctl -k -f -o short-iso-precise --no-pager -n 2", stderr=asyncssh.STDOUT)
            first = await asyncio.wait_for(proc.stdout.readline(), 5)
            assert " dgx3 kernel: " in first
            await serve(sim, "dsv41-flash-r37-4x-eager")
            await sim.advance(1600)
            assert any("NVRM" in e.message for e in sim.nodes["dgx3"].journal.entries)
            # a thrashing node's sshd writes nothing more; power it off and the stream ends
            await sim.power("dgx3", False)
            rest = await asyncio.wait_for(proc.stdout.read(), 5)
        assert "NVRM" not in rest  # never delivered: the node stalled before writing


async def test_journal_follow_delivers_new_lines(fleet):
    async with running_sim(fleet) as sim:
        async with connect(sim, "dgx5") as conn:
            proc = await conn.create_process("journalctl -k -f -o short-iso-precise --no-pager")
            for _ in range(8):
                await asyncio.wait_for(proc.stdout.readline(), 5)
            sim.nodes["dgx5"].journal.kernel(sim.wall(), "mlx5_core 0000:01:00.0: link up")
            sim.notify()
            line = await asyncio.wait_for(proc.stdout.readline(), 5)
        assert line.endswith(" dgx5 kernel: mlx5_core 0000:01:00.0: link up\n")
