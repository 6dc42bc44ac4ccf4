"""Issue 25: "a boot that fails within a second gets no automatic bundle". In
the demo (the console's service on the simulator's clock at 60x) a lane whose
ranks cannot find the model die LocalEntryNotFoundError 4 simulated seconds
after they start (sim/engine.py `_boot`: 3 s, then 1 s), 0.07 real seconds:
the incident must be raised and bundled like any other failed boot."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import tarfile
import time
from pathlib import Path

import pytest

from sparktui.cli.demo_cmd import demo_console
from sparktui.core.state import NodeState
from sparktui.ops.guards import Override
from sparktui.service.cluster import ClusterService
from sparktui.service.events import AlertRaised, ServiceEvent
from sparktui.service.sentinel import Sentinel

_spec = importlib.util.spec_from_file_location(
    "cli_harness", Path(__file__).parents[1] / "ops" / "cli_harness.py")
h = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(h)  # type: ignore[union-attr]

pytestmark = pytest.mark.usefixtures("quick_polls")

SPEED = 60.0
LANE = "glm53-mxfp4-fp8-4x-r39-196k"
"""On dgx5-8: the scenario's dgx6-8 have a local HF cache dir, not the NAS's."""
OVERRIDES = frozenset({Override.FIT, Override.HF_CACHE})
BOUND_S = 120.0


async def until(pred, why) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + BOUND_S
    while not pred():
        assert time.monotonic() < end, why()
        await asyncio.sleep(0.05)


@pytest.mark.timeout(600)
async def test_a_boot_that_dies_at_once_is_bundled(tmp_path: Path) -> None:
    cfg = h.fleet(tmp_path)
    alerts: list[str] = []

    def seen(ev: ServiceEvent) -> None:
        if isinstance(ev, AlertRaised):
            alerts.append(ev.alert.key)

    async with h.published(cfg, scenario="cache-not-symlink", speed=SPEED) as sim:
        console = dataclasses.replace(cfg, console=demo_console(cfg, SPEED))
        service = ClusterService(console, clock=sim.clock)
        await service.start(seen)
        try:
            await until(lambda: service.snapshot().count(NodeState.ONLINE) == len(cfg.nodes),
                        service.snapshot)
            preview = await service.preview_serve(LANE, overrides=OVERRIDES)
            assert preview.allowed and preview.run is not None, preview.refusals
            result = await asyncio.wait_for(preview.run(), BOUND_S)
            assert not result.ok and "LocalEntryNotFoundError" in result.message, result.message
            night = service.night
            await until(lambda: night.bundles, lambda: (alerts, result.message))
            assert f"fatal:{LANE}" in alerts, alerts
            text = summary(night.bundles[-1].path)
            assert "LocalEntryNotFoundError" in text, text[:3000]
            assert len(night.bundles) == 1
        finally:
            await service.stop()


@pytest.mark.timeout(600)
async def test_a_boot_that_dies_at_once_beside_a_sentinel_is_bundled(tmp_path: Path, capsys,
                                                                     monkeypatch) -> None:
    """The same boot served from a shell (`sparktui serve`) while the sentinel
    watches on wall time: the ranks die and the failed serve removes them
    (`docker stop && docker rm`) well within one of the sentinel's container
    reads (the slow tier, every 15 s), so no watcher of the sentinel ever sees
    the lane: the journal, which the sentinel follows, is the only witness."""
    cfg = h.fleet(tmp_path)
    alerts: list[str] = []
    async with h.published(cfg, scenario="cache-not-symlink", speed=SPEED):
        service = ClusterService(cfg)  # the system clock, as the sentinel runs
        sentinel = Sentinel(cfg, service, emit=lambda _p, _text: None)
        on_event = sentinel.on_event

        def seen(ev: ServiceEvent) -> None:
            if isinstance(ev, AlertRaised):
                alerts.append(ev.alert.key)
            on_event(ev)

        sentinel.on_event = seen  # type: ignore[method-assign]
        stop = asyncio.Event()
        task = asyncio.create_task(sentinel.run(stop))
        try:
            await until(lambda: service.snapshot().count(NodeState.ONLINE) == len(cfg.nodes),
                        service.snapshot)
            code = await asyncio.wait_for(h.sparktui(
                cfg, "serve", LANE, "--override", "fit", "--override", "hf-cache",
                stdin=h.Terminal(f"{LANE}\n"), monkeypatch=monkeypatch), BOUND_S)
            out, err = capsys.readouterr()
            assert code != 0 and "LocalEntryNotFoundError" in out + err, (code, out, err)
            night = service.night
            await until(lambda: night.bundles, lambda: alerts)
            assert LANE not in service.lanes(), "the sentinel saw the lane after all"
            text = summary(night.bundles[-1].path)
            assert "LocalEntryNotFoundError" in text, text[:3000]
            assert len(night.bundles) == 1
        finally:
            stop.set()
            await asyncio.wait_for(task, 60)


def summary(path: Path) -> str:
    with tarfile.open(path) as tar:
        first = tar.getmembers()[0]
        return tar.extractfile(first).read().decode()  # type: ignore[union-attr]
