"""Issue 15 in the console: `b` in the alert list writes the incident bundle of
the alert's lane or node (ops/bundle, as `sparktui bundle`), in a worker, and
the notice line says where it is."""

from __future__ import annotations

import tarfile
from pathlib import Path

from sparktui.service.events import Alert, AlertRaised
from sparktui.tui.messages import ServiceReported
from sparktui.tui.screens.alerts import AlertsScreen
from sparktui.tui.widgets.alerts import NoticeLine

from .harness import build, wait_for


async def test_b_in_the_alert_list_writes_the_nodes_bundle_and_names_the_file(
        tmp_path: Path) -> None:
    c = build(state_dir=tmp_path)
    async with c.app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: all(s.probe is not None
                                          for s in c.service.snapshot().nodes))
        alert = Alert("thrash:dgx6", "thrash", "dgx6", ("MemAvailable 1.5 GiB",),
                      "recover dgx6 (R)")
        c.app.main_screen.post_message(ServiceReported(AlertRaised(alert)))
        await wait_for(pilot, lambda: "thrash:dgx6" in c.app.alerts.active)
        await pilot.press("exclamation_mark")
        await wait_for(pilot, lambda: isinstance(c.app.screen, AlertsScreen))
        await pilot.press("b")
        bundles = tmp_path / "bundles"
        await wait_for(pilot, lambda: bundles.is_dir() and any(bundles.glob("*.tar.gz")),
                       timeout=30)
        (path,) = bundles.glob("*.tar.gz")
        assert path.name.endswith("-dgx6.tar.gz")
        with tarfile.open(path) as tar:
            names = tar.getnames()
            summary = tar.extractfile(next(n for n in names if n.endswith("SUMMARY.md")))
            assert summary is not None and b"dgx6" in summary.read()
        await pilot.press("escape")
        notice = c.app.main_screen.query_one(NoticeLine)
        await wait_for(pilot, lambda: path.name in str(notice.render()))
        assert "bundle" in str(notice.render())


async def test_a_read_only_console_offers_no_bundle() -> None:
    c = build(read_only=True)
    async with c.app.run_test(size=(80, 24)) as pilot:
        alert = Alert("thrash:dgx6", "thrash", "dgx6", ("MemAvailable 1.5 GiB",), "")
        c.app.main_screen.post_message(ServiceReported(AlertRaised(alert)))
        await wait_for(pilot, lambda: "thrash:dgx6" in c.app.alerts.active)
        await pilot.press("exclamation_mark")
        await wait_for(pilot, lambda: isinstance(c.app.screen, AlertsScreen))
        assert c.app.screen.on_bundle is None
