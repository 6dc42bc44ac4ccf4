"""The replay tells each alert at its recorded times: after a seek (or `a`,
the next alert) the console's alert book holds every alert of the night so
far with the time it was raised, last updated and cleared, never the time
sought to; `a` from an active alert goes to the next new one, not to an
update of the same FATAL."""

from __future__ import annotations

from sparktui.core.config_load import load_config
from sparktui.service.events import Alert, AlertCleared, AlertRaised, ServiceEvent
from sparktui.service.replay import ReplaySource
from sparktui.tui.replay import ReplayApp

from .harness import wait_for
from .test_replay_snapshot import ROOT, T0, node_sample

FATAL = Alert("fatal:lane", "fatal", "lane", ("EngineCore encountered a fatal error",), "x")
THRASH = Alert("thrash:dgx6", "thrash", "dgx6", ("PSI full 70%",), "reduce load")


def night() -> list[tuple[float, ServiceEvent]]:
    out: list[tuple[float, ServiceEvent]] = [
        (T0 + 30 * i, node_sample("dgx1", T0 + 30 * i, 100.0, 0.0)) for i in range(40)]
    out += [(T0 + 100, AlertRaised(THRASH)), (T0 + 160, AlertRaised(FATAL)),
            (T0 + 190, AlertRaised(FATAL)),  # the same FATAL again (the phone was told)
            (T0 + 400, AlertCleared("thrash:dgx6")), (T0 + 700, AlertRaised(THRASH))]
    out.sort(key=lambda p: p[0])
    return out


async def test_alerts_after_a_seek_and_next_alert_carry_their_recorded_times() -> None:
    config = load_config(ROOT / "config.toml")
    source = ReplaySource(config, night(), start=T0 + 600)
    source.paused = True
    app = ReplayApp(config, source)
    async with app.run_test(size=(160, 48)) as pilot:
        book = app.main_screen.alerts
        await wait_for(pilot, lambda: "fatal:lane" in book.active)
        fatal = book.active["fatal:lane"]
        assert (fatal.raised_at, fatal.updated_at) == (T0 + 160, T0 + 190)
        assert [(e.alert.key, e.raised_at, e.cleared_at) for e in book.cleared] == \
            [("thrash:dgx6", T0 + 100, T0 + 400)]
        await pilot.press("left_square_bracket")  # back ten minutes: the night's start
        await wait_for(pilot, lambda: app.main_screen.alerts is not book)
        assert source.now == T0 and not app.main_screen.alerts.active
        for at in (T0 + 100, T0 + 160, T0 + 700):  # not T0 + 190, the FATAL's update
            await pilot.press("a")
            await wait_for(pilot, lambda at=at: source.now == at)  # type: ignore[misc]
        book = app.main_screen.alerts
        assert book.active["thrash:dgx6"].raised_at == T0 + 700
        assert book.active["fatal:lane"].raised_at == T0 + 160
