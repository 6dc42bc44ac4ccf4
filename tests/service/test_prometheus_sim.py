"""A real Prometheus (Debian's prometheus package; .ci/run installs it) on
loopback scrapes `sparktui sentinel` watching the simulator: the query API
returns every node, a node switched off in the simulated Home Assistant
shows as powered_off by the second scrape after the switch, and a lane
started on other nodes is there with its phase, one-hot."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import time
from pathlib import Path

import httpx
import pytest

from sparktui.core.recipe_load import load_recipe
from sparktui.core.render import plan
from sparktui.service.export import label
from sparktui.service.lanes import LANE_STATES
from sparktui.sim.testing import connect

from .simnight import sentinel_process, state_in

SCRAPE_S = 3.0
POLL_S = 1.0
"""The sentinel polls three times a scrape: what it saw by one scrape after the
switch is what the next scrape gets, so 'within two scrapes' holds whenever
the switch falls, and is measured from the switch itself."""
NODE = "dgx3"
LANE, CLUSTER = "glm53-flash-eugr-2x", "4nodes-switch-b"
"""A lane on four nodes other than NODE."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("prometheus is missing: .ci/run installs Debian's prometheus package")
        pytest.skip("prometheus is not installed (.ci/run installs Debian's prometheus)")
    return found


async def query(client: httpx.AsyncClient, promql: str) -> list[dict[str, object]]:
    r = await client.get("/api/v1/query", params={"query": promql})
    r.raise_for_status()
    body = r.json()
    assert body["status"] == "success", body
    return list(body["data"]["result"])


@pytest.mark.timeout(240)
async def test_prometheus_scrapes_the_sentinel_and_sees_a_node_go_dark(
        tmp_path: Path, config_copy) -> None:  # type: ignore[no-untyped-def]
    binary = prometheus_binary()
    metrics_port, prom_port = free_port(), free_port()

    def edit(text: str) -> str:
        text = text.replace("poll_interval_s = 2.0", f"poll_interval_s = {POLL_S}", 1)
        assert f"poll_interval_s = {POLL_S}" in text
        return state_in(tmp_path)(text) + f'\n[export]\nlisten = "127.0.0.1:{metrics_port}"\n'

    prom_dir = tmp_path / "prometheus"
    prom_dir.mkdir()
    (prom_dir / "prometheus.yml").write_text(
        f"global:\n  scrape_interval: {SCRAPE_S:g}s\n  evaluation_interval: {SCRAPE_S:g}s\n"
        "scrape_configs:\n  - job_name: sparktui\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{metrics_port}']\n")
    async with sentinel_process(tmp_path, config_copy(edit)) as sp:
        assert sp.proc.stdout is not None
        lines: list[str] = []

        async def read_until(what: str) -> tuple[str, float]:
            async with asyncio.timeout(90):
                while True:
                    line = (await sp.proc.stdout.readline()).decode()  # type: ignore[union-attr]
                    assert line, f"the sentinel ended: {lines[-20:]}"
                    lines.append(line.strip())
                    if what in line:
                        return line, time.time()

        await read_until(f"Prometheus metrics at http://127.0.0.1:{metrics_port}/metrics")
        prom = await asyncio.create_subprocess_exec(
            binary, f"--config.file={prom_dir / 'prometheus.yml'}",
            f"--storage.tsdb.path={prom_dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{prom_port}",
                                         timeout=5) as client:
                nodes: set[str] = set()
                async with asyncio.timeout(90):
                    while nodes != set(sp.config.nodes):
                        await asyncio.sleep(SCRAPE_S / 2)
                        with contextlib.suppress(httpx.HTTPError):
                            nodes = {r["metric"]["node"]  # type: ignore[index]
                                     for r in await query(client, "sparktui_node_up == 1")}
                before = await query(
                    client, f'sparktui_node_state{{node="{NODE}",state="online"}}')
                assert before and before[0]["value"][1] == "1"  # type: ignore[index]
                entity = sp.config.nodes[NODE].switch
                switched_at = time.time()
                assert sp.sim.ha is not None and sp.sim.ha.switch(entity, False)
                await read_until(f"node {NODE}: ")
                while "powered_off" not in lines[-1]:
                    await read_until(f"node {NODE}: ")
                # every scrape since the switch: how many passed before Prometheus had it
                series = f'sparktui_node_state{{node="{NODE}",state="powered_off"}}'
                async with asyncio.timeout(30):
                    while True:
                        await asyncio.sleep(SCRAPE_S)
                        got = await query(client, f"{series}[30s]")
                        after = [(float(t), v) for t, v in got[0]["values"]  # type: ignore[index]
                                 if float(t) > switched_at] if got else []
                        if any(v == "1" for _, v in after):
                            break
                late = [t for t, v in after if v != "1" and t < min(
                    t for t, v in after if v == "1")]
                assert len(late) <= 1, f"{len(late)} scrapes after the switch still said 0"
                assert (await query(client, f'sparktui_node_up{{node="{NODE}"}}'))[0][
                    "value"][1] == "0"  # type: ignore[index]
                # a lane started by hand on the other four: its phase, one-hot, by query
                recipe = load_recipe(sp.config, LANE)
                for rank in plan(sp.config, recipe, CLUSTER).ranks:
                    async with connect(sp.sim, rank.node) as conn:
                        assert (await conn.run(rank.command(3), timeout=30)).exit_status == 0
                shown: list[dict[str, object]] = []
                async with asyncio.timeout(90):
                    while not shown:
                        await asyncio.sleep(SCRAPE_S)
                        shown = await query(client, f'sparktui_lane_state{{lane="{LANE}"}} == 1')
                assert len(shown) == 1 and shown[0]["metric"]["state"] in {  # type: ignore[index]
                    label(s) for s in LANE_STATES}, shown
                total = await query(client, f'sum(sparktui_lane_state{{lane="{LANE}"}})')
                assert total[0]["value"][1] == "1"  # type: ignore[index]
                assert await query(client, f'sparktui_lane_qualified{{lane="{LANE}"}}')
        finally:
            prom.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(prom.wait(), 15)
            if prom.returncode is None:
                prom.kill()
                await prom.wait()
