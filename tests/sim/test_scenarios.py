"""One integration test per seed incident: the scenario's world, what the
operator did that night, and the signature that follows from the model."""

from __future__ import annotations

import asyncio
import json
import re

import asyncssh
import httpx
import pytest

from sparktui.sim.testing import connect, running_sim

from .conftest import exec_on, logs_cmd


async def psi_full_avg10(sim, node: str) -> float:
    out, _, _ = await exec_on(sim, node, "cat /proc/pressure/memory")
    return float(re.search(r"^full avg10=([\d.]+)", out, re.M).group(1))


async def banner_arrives(sim, node: str, wait: float = 1.0) -> bool:
    port = sim.endpoints()["nodes"][node]["port"]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        line = await asyncio.wait_for(reader.readline(), wait)
        return line.startswith(b"SSH-2.0-")
    except TimeoutError:
        return False
    finally:
        writer.close()


async def liveness_accepts(sim, node: str) -> bool:
    ep = sim.endpoints()["nodes"][node]
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(ep["api_host"], ep["liveness_port"]), 2)
    except OSError:
        return False
    writer.close()
    return True


async def test_boot_d_thrashes_all_four_during_the_load(fleet, serve):
    async with running_sim(fleet, scenario="boot-d-oom") as sim:
        async with connect(sim, "dgx2") as early:  # a session open before the thrash
            await serve(sim, "dsv41-flash-r37-4x-eager")
            await sim.advance(600)
            assert not sim.nodes["dgx1"].thrashing
            # each rank streams the 510 GB checkpoint at 130 MB/s and keeps its 118.8 GiB
            # slice: the four go under together, late in the ~65-min eager load
            waited = 600
            while not sim.nodes["dgx1"].thrashing and waited < 3 * 3600:
                await sim.advance(300)
                waited += 300
            assert 1800 <= waited <= 4200, waited
            assert all(sim.nodes[n].thrashing for n in ("dgx1", "dgx2", "dgx3", "dgx4"))
            assert not sim.nodes["dgx5"].thrashing
            await sim.advance(120)
            # the old session's next command never answers; new ones get no banner
            with pytest.raises(TimeoutError):
                await early.run("cat /proc/loadavg", timeout=0.5)
            assert not await banner_arrives(sim, "dgx2")
            assert await liveness_accepts(sim, "dgx2")  # "ping answers"
            assert await banner_arrives(sim, "dgx5")
        node = sim.nodes["dgx1"]
        assert node.memory.full.avg10 > 60.0
        assert node.memory.meminfo_text().split("\n")[2] == "MemAvailable:          0 kB"
        lines = [node.journal.render(e) for e in node.journal.entries]
        assert any("systemd-journald[412]: Under memory pressure, flushing caches." in x
                   for x in lines)
        assert any("kernel: NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory "
                   "[NV_ERR_NO_MEMORY] (0x00000051) returned from _memdescAllocInternal" in x
                   for x in lines)
        # recovery only by a power cycle
        await sim.advance(3600)
        assert sim.nodes["dgx1"].thrashing
        await sim.power("dgx1", False)
        assert not await liveness_accepts(sim, "dgx1")
        await sim.power("dgx1", True)
        await sim.advance(60)
        out, _, _ = await exec_on(sim, "dgx1", "docker ps -a -q; cat /proc/pressure/memory "
                                               "/proc/uptime")
        assert out.startswith("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
        assert 20 < float(out.splitlines()[2].split()[0]) < 60


async def test_long_prompt_kills_the_engine_and_hangs_the_workers(fleet, serve):
    lane = "glm53-mxfp4-fp8-4x-r39-196k"
    async with running_sim(fleet, scenario="long-prompt") as sim:
        await serve(sim, lane)
        await sim.advance(3 * 3600)
        assert sim.lane_rank0(lane).phase == "ready"
        assert not any(n.thrashing for n in sim.nodes.values())
        small = sim.run_prompt(lane, 8000)
        await sim.advance(30)
        assert small.done and not small.error
        req = sim.run_prompt(lane, 150_000)  # ~165 s of prefill at 99 GiB/rank, then 300 s
        await sim.advance(600)
        assert req.done and req.error == "EngineDeadError"
        logs, _, _ = await exec_on(sim, "dgx5", logs_cmd(f"sparktui-{lane}-r0"))
        assert "TimeoutError: RPC call to sample_tokens timed out." in logs
        assert re.search(r"Avg prompt throughput: 0\.0 tokens/s, Avg generation throughput: "
                         r"0\.0 tokens/s, Running: 1 reqs", logs)  # the engine-stall evidence
        assert "No available shared memory broadcast block found in 60 seconds." in logs
        assert "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue." \
            in logs
        st, _, _ = await exec_on(sim, "dgx5", f"docker inspect --format '{{{{json .State}}}}' "
                                             f"sparktui-{lane}-r0")
        assert json.loads(st)["Status"] == "exited"
        assert sim.nodes["dgx6"].thrashing and sim.nodes["dgx7"].thrashing
        assert not sim.nodes["dgx5"].thrashing  # rank 0 exited, its memory is back
        assert not await banner_arrives(sim, "dgx6")
        assert await liveness_accepts(sim, "dgx7")
        port = sim.endpoints()["nodes"]["dgx8"]["port"]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)  # held, no banner
        await sim.advance(1800)
        assert not sim.nodes["dgx8"].thrashing  # the OOM killer got its worker
        banner = await asyncio.wait_for(reader.readline(), 5)  # sshd answers its backlog
        assert banner.startswith(b"SSH-2.0-")
        writer.close()
        journal, _, _ = await exec_on(sim, "dgx8", "journalctl -k --no-pager -n 200")
        assert re.search(r"kernel: Out of memory: Killed process \d+ \(python3\) total-vm:",
                         journal)
        st, _, _ = await exec_on(sim, "dgx8", f"docker inspect --format '{{{{json .State}}}}' "
                                             f"sparktui-{lane}-r3")
        state = json.loads(st)
        assert (state["ExitCode"], state["OOMKilled"]) == (137, False)
        assert sim.nodes["dgx6"].thrashing and sim.nodes["dgx7"].thrashing


async def test_cache_dir_not_symlink_kills_those_ranks(fleet, serve):
    async with running_sim(fleet, scenario="cache-not-symlink") as sim:
        out, _, _ = await exec_on(sim, "dgx6", "stat -c '%F|%N' /home/kilork/.cache/huggingface")
        assert out == "directory|'/home/kilork/.cache/huggingface'\n"
        await serve(sim, "dsv41-flash-8x")
        await sim.advance(120)
        for node, rank in (("dgx6", 5), ("dgx7", 6), ("dgx8", 7)):
            logs, _, _ = await exec_on(sim, node, logs_cmd(f"sparktui-dsv41-flash-8x-r{rank}"))
            assert "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate " \
                   "cached snapshot folder" in logs
        st, _, _ = await exec_on(sim, "dgx6", "docker ps -a --format '{{json .}}'")
        assert json.loads(st)["Status"].startswith("Exited (1) ")
        logs, _, _ = await exec_on(sim, "dgx1", logs_cmd("sparktui-dsv41-flash-8x-r0"))
        assert "died unexpectedly" in logs


async def test_nas_missing_leaves_a_dangling_cache_link(fleet, serve):
    async with running_sim(fleet, scenario="nas-missing") as sim:
        out, err, status = await exec_on(sim, "dgx7", "stat -c '%F|%N' /mnt/nas; df -Pk /mnt/nas")
        assert (out, status) == ("", 1)
        assert err == ("stat: cannot statx '/mnt/nas': No such file or directory\n"
                       "df: /mnt/nas: No such file or directory\n")
        results = await serve(sim, "dsv41-flash-8x")
        by_node = {r[0]: r for r in results}
        assert by_node["dgx7"][3] == 125
        assert "error while creating mount source path '/home/kilork/.cache/huggingface'" \
            in by_node["dgx7"][2]
        assert by_node["dgx5"][3] == 0
        await sim.advance(700)  # the other ranks wait for dgx7/dgx8 at distributed init
        logs, _, _ = await exec_on(sim, "dgx1", logs_cmd("sparktui-dsv41-flash-8x-r0"))
        assert "torch.distributed.DistStoreError: Timed out after 601 seconds waiting for " \
               "clients. 6/8 clients joined." in logs


async def test_slow_8way_nfs_is_a_long_healthy_load(fleet, serve):
    async with running_sim(fleet, scenario="slow-8way-nfs") as sim:
        await serve(sim, "dsv41-flash-8x")
        await sim.advance(1800)  # the launcher's readiness wait would give up here
        rank0 = sim.lane_rank0("dsv41-flash-8x")
        assert rank0.phase == "loading"
        await sim.advance(7000)
        assert rank0.phase == "ready"
        logs, _, _ = await exec_on(sim, "dgx1", logs_cmd("sparktui-dsv41-flash-8x-r0"))
        took = re.search(r"Model loading took 49\.55 GiB memory and (\d+)\.\d+ seconds", logs)
        assert took and 7000 < int(took.group(1)) < 7800
        assert re.search(r"GPU KV cache size: 2,58\d,\d{3} tokens, Maximum concurrency for "
                         r"524,288 tokens per request: 4\.9\dx", logs)


async def test_gmu_091_is_refused_at_admission(fleet, serve):
    async with running_sim(fleet, scenario="gmu-091") as sim:
        await serve(sim, "dsv41-flash-8x-lab-gmu091")
        await sim.advance(60)
        logs, _, _ = await exec_on(sim, "dgx1", logs_cmd("sparktui-dsv41-flash-8x-lab-gmu091-r0"))
        assert ("ValueError: Free memory on device cuda:0 (108.78/121.6 GiB) on startup is less "
                "than desired GPU memory utilization (0.91, 110.66 GiB).") in logs


async def test_kv_pin_80mb_short(fleet, serve):
    lane = "glm53-full-mxfp4-4x-dspark8-pin8"
    async with running_sim(fleet, scenario="kv-pin-short") as sim:
        await serve(sim, lane)
        await sim.advance(4 * 3600)
        logs, _, _ = await exec_on(sim, "dgx1", logs_cmd(f"sparktui-{lane}-r0"))
        assert ("ValueError: To serve at least one request with the model's max seq len (131072), "
                "(8.08 GiB KV cache is needed, which is larger than the available KV cache memory "
                "(8.0 GiB).") in logs


async def test_stale_container_conflicts(fleet, serve):
    lane = "glm53-full-native-8x-dspark8"
    async with running_sim(fleet, scenario="stale-container") as sim:
        out, _, _ = await exec_on(sim, "dgx1", "docker ps -a --no-trunc --format '{{json .}}'")
        row = json.loads(out)
        assert row["Names"] == f"sparktui-{lane}-r0"
        assert row["Status"] == "Exited (137) About an hour ago"
        results = await serve(sim, lane)
        node, _, err, status = results[0]
        assert (node, status) == ("dgx1", 125)
        assert err.startswith(f'docker: Error response from daemon: Conflict. The container name '
                              f'"/sparktui-{lane}-r0" is already in use by container "{row["ID"]}"')


async def test_bad_kernel_breaks_nccl(fleet, serve):
    async with running_sim(fleet, scenario="bad-kernel") as sim:
        out, _, _ = await exec_on(sim, "dgx8", "uname -r")
        assert out == "7.0.0-1019-nvidia\n"
        await serve(sim, "dsv41-flash-8x")
        await sim.advance(120)
        logs, _, _ = await exec_on(sim, "dgx1", logs_cmd("sparktui-dsv41-flash-8x-r0"))
        assert "NCCL WARN Call to ibv_modify_qp failed with 61" in logs
        assert "RuntimeError: NCCL error: unhandled system error" in logs


async def test_switch_off_hides_the_fabric(fleet, serve):
    async with running_sim(fleet, scenario="switch-off") as sim:
        token = sim.token_file.read_text()
        async with httpx.AsyncClient(base_url=sim.endpoints()["ha_url"], timeout=5,
                                     headers={"Authorization": f"Bearer {token}"}) as ha:
            assert (await ha.get("/api/states/switch.sw6_mt")).json()["state"] == "off"
        await serve(sim, "glm53-full-mxfp4-4x-dspark8")
        await serve(sim, "glm53-flash-eugr-2x")  # 2nodes-dac: no switch in its path
        await sim.advance(120)
        logs, _, _ = await exec_on(sim, "dgx1", logs_cmd("sparktui-glm53-full-mxfp4-4x-dspark8-r0"))
        assert "RuntimeError: NCCL error: remote process exited or there was a network error" \
            in logs
        assert sim.lane_rank0("glm53-flash-eugr-2x").phase != "dead"


async def test_shared_host_key(fleet):
    async with running_sim(fleet, scenario="shared-host-key") as sim:
        keys = {line.split()[2] for line in sim.known_hosts_path.read_text().splitlines()}
        assert len(keys) == 1
        async with connect(sim, "dgx8") as conn:
            assert (await conn.run("uname -r", timeout=5)).exit_status == 0


async def test_images_missing_then_synced(fleet, serve):
    async with running_sim(fleet, scenario="images-missing") as sim:
        out, _, _ = await exec_on(sim, "dgx6", "docker images --format '{{json .}}'")
        assert out == ""
        image = "ghcr.io/jovian-judgement/vllm-sm121:r39"
        _, err, status = await exec_on(sim, "dgx6", f"docker run -d --name x {image} vllm serve m")
        assert status == 125 and err.startswith(f"Unable to find image '{image}' locally\n")
        async with connect(sim, "dgx5") as src, connect(sim, "dgx6") as dst:
            saved = await src.run(f"docker save {image}", encoding=None, timeout=10)
            loaded = await dst.run("docker load", input=saved.stdout, encoding=None, timeout=10)
        assert loaded.stdout == f"Loaded image: {image}\n".encode()
        label, _, _ = await exec_on(sim, "dgx6", "docker image inspect --format "
                                                 "'{{index .Config.Labels \"sparktui.checksum\"}}' "
                                                 + image)
        ref, _, _ = await exec_on(sim, "dgx5", "docker image inspect --format "
                                               "'{{index .Config.Labels \"sparktui.checksum\"}}' "
                                               + image)
        assert label == ref and len(label.strip()) == 16


async def test_wrong_key_still_refused_in_scenarios(fleet):
    async with running_sim(fleet, scenario="normal") as sim:
        with pytest.raises(asyncssh.PermissionDenied):
            async with connect(sim, "dgx1", client_keys=[asyncssh.generate_private_key(
                    "ssh-ed25519")]):
                pass


async def test_gid_drift(fleet):
    from sparktui.core.recipe_load import load_recipe
    from sparktui.core.render import choose_gid, plan

    lane = "glm53-full-mxfp4-4x-dspark8"
    p = plan(fleet, load_recipe(fleet, lane), "4nodes-switch-b")
    for detect in (False, True):
        async with running_sim(fleet, scenario="gid-drift") as sim:
            listings = {r.node: (await exec_on(sim, r.node, r.gid_probe))[0] for r in p.ranks}
            found = {n: choose_gid(text, p.ranks[0].hcas) for n, text in listings.items()}
            assert found == {"dgx5": 3, "dgx6": 4, "dgx7": 3, "dgx8": 3}
            for r in p.ranks:  # pinned to 3 everywhere, or detected per node
                await exec_on(sim, r.node, r.command(found[r.node] if detect else 3))
            await sim.advance(3 * 3600)
            logs, _, _ = await exec_on(sim, "dgx5", logs_cmd(f"sparktui-{lane}-r0"))
            failed = "NCCL WARN Call to ibv_modify_qp failed with 61 No data available" in logs
            assert failed is not detect
            assert ("Application startup complete." in logs) is detect
