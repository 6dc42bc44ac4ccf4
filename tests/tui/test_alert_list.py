"""Issue 28 item 1: the alerts list (`!`) at 80x24 — a FATAL whose last context
lines are the engine's stats line, repeated, and three THRASH alerts: every
alert is in view, the highlighted one shows its evidence once each and its
`next:` line, the highlight reads without colour, PgDn / ctrl+d move, the
cursor stops at the end instead of wrapping, cleared alerts and messages are
reachable, and the hint is whole."""

from __future__ import annotations

from sparktui.service.events import LANE_GONE, Alert, AlertCleared, AlertRaised, LaneGone
from sparktui.tui.messages import ServiceReported
from sparktui.tui.screens.alerts import MARK, AlertList, AlertsScreen

from .harness import build, wait_for
from .screen_text import screen_text

LANE = "glm53-mxfp4-fp8-4x-r39-196k"
STATS = ("Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, "
         "Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 68.5%")
FATAL = Alert(f"fatal:{LANE}", "fatal", LANE,
              ("rank 0 (failed): EngineCore encountered a fatal error.",
               "cause: TimeoutError: RPC call to sample_tokens timed out.",
               STATS, STATS, STATS),
              "stop the lane (x), then recover the starved nodes (R)")


def thrash(node: str) -> Alert:
    return Alert(f"thrash:{node}", "thrash", node,
                 ("MemAvailable 3.2 GiB < 4 GiB (2.6% < 5%)",
                  "ping answers, SSH probe failed 5x in a row"),
                 f"SSH retry 1/3 (~30 s apart); if all fail: plug-cycle {node} only")


def marked(text: str) -> list[str]:
    return [line for line in text.splitlines() if MARK.strip() in line]


async def test_the_alert_list_at_80x24_keeps_every_alert_and_the_next_step_in_view() -> None:
    c = build()
    async with c.app.run_test(size=(80, 24)) as pilot:
        screen = c.app.main_screen
        for alert in (FATAL, thrash("dgx6"), thrash("dgx7"), thrash("dgx8"),
                      thrash("dgx5")):
            screen.post_message(ServiceReported(AlertRaised(alert)))
        await wait_for(pilot, lambda: len(c.app.alerts.active) == 5)
        screen.post_message(ServiceReported(AlertCleared("thrash:dgx5")))
        await wait_for(pilot, lambda: len(c.app.alerts.cleared) == 1)
        await pilot.press("exclamation_mark")
        await wait_for(pilot, lambda: isinstance(c.app.screen, AlertsScreen))
        await pilot.pause(0.2)
        text = screen_text(c.app)
        # the FATAL first, whole: its stats line once (with its count), its next step
        assert text.count("Avg prompt throughput") == 1, text
        assert "(3x)" in text and "next: stop the lane" in text, text
        # every other alert in view, one line each
        for node in ("dgx6", "dgx7", "dgx8"):
            assert f"THRASH dgx{node[-1]}" in text, text
        # the highlight without colour: a marker on the FATAL's line only
        assert len(marked(text)) == 1 and "FATAL" in marked(text)[0], text
        # the hint whole (it was cut to "escape: █")
        assert "esc close" in text, text

        olist = c.app.screen.query_one(AlertList)
        await pilot.press("pagedown")
        assert olist.highlighted is not None and olist.highlighted > 0
        await pilot.press("home", "ctrl+d")
        assert olist.highlighted is not None and olist.highlighted > 0
        # down to the cleared alert and the messages, and no wrap at the end
        await pilot.press("home", *["down"] * 4)
        await pilot.pause(0.1)
        text = screen_text(c.app)
        assert "THRASH dgx5" in marked(text)[0] and "cleared" in text, text
        await pilot.press(*["down"] * (olist.option_count + 2))
        assert olist.highlighted == olist.option_count - 1
        # `a` on the cleared one does nothing; on a THRASH it acknowledges it
        await pilot.press("home", "down", "a")
        await pilot.pause(0.1)
        assert c.app.alerts.active["thrash:dgx6"].acked, screen_text(c.app)
        text = screen_text(c.app)
        assert "acknowledged" in marked(text)[0] and "dgx6" in marked(text)[0], text


async def test_a_lane_alert_cleared_as_its_lane_is_gone_leaves_the_list() -> None:
    """Issue 28 item 7: a FATAL stayed "1 acknowledged alert(s) still active"
    after its lane was gone. The service clears a lane's alerts as the lane
    goes (`AlertCleared.why`: lane gone, before its LaneGone), acknowledged or
    not; the console shows that clear, and a LaneGone alone clears nothing
    (the one decision is the service's); a node's alert is not the lane's."""
    c = build()
    async with c.app.run_test(size=(80, 24)) as pilot:
        screen = c.app.main_screen
        screen.post_message(ServiceReported(AlertRaised(FATAL)))
        screen.post_message(ServiceReported(AlertRaised(thrash("dgx6"))))
        await wait_for(pilot, lambda: len(c.app.alerts.active) == 2)
        c.app.acknowledge(f"fatal:{LANE}")
        c.app.acknowledge("thrash:dgx6")
        await pilot.pause(0.1)
        assert " 2 acknowledged alert(s) still active" in screen_text(c.app)
        screen.post_message(ServiceReported(AlertCleared(f"fatal:{LANE}", why=LANE_GONE)))
        screen.post_message(ServiceReported(LaneGone(LANE)))
        await wait_for(pilot, lambda: f"fatal:{LANE}" not in c.app.alerts.active)
        assert "thrash:dgx6" in c.app.alerts.active
        await pilot.pause(0.1)
        assert " 1 acknowledged alert(s) still active" in screen_text(c.app)  # the THRASH
        await pilot.press("exclamation_mark")
        await wait_for(pilot, lambda: isinstance(c.app.screen, AlertsScreen))
        await pilot.pause(0.1)
        text = screen_text(c.app)
        assert "lane gone" in text, text
        fatal = [ln for ln in text.splitlines() if "FATAL" in ln]
        assert fatal and all("[cleared" in ln for ln in fatal), text  # listed as cleared
        await pilot.press("escape")

        # raised again, never acknowledged: the lane's clear clears it all the same
        screen.post_message(ServiceReported(AlertRaised(FATAL)))
        await wait_for(pilot, lambda: f"fatal:{LANE}" in c.app.alerts.active)
        screen.post_message(ServiceReported(LaneGone(LANE)))
        await pilot.pause(0.1)
        assert f"fatal:{LANE}" in c.app.alerts.active  # no clear from the service yet
        screen.post_message(ServiceReported(AlertCleared(f"fatal:{LANE}", why=LANE_GONE)))
        await wait_for(pilot, lambda: f"fatal:{LANE}" not in c.app.alerts.active)
        assert not any("FATAL" in ln and "a:ack" in ln for ln in screen_text(c.app).splitlines())
        assert c.app.alerts.cleared[0].why_cleared == LANE_GONE


async def test_a_fatal_with_long_distinct_evidence_keeps_its_next_step_in_view() -> None:
    """The tmux walk of the incident at 80x24: a FATAL whose four evidence lines
    are all different and long (the engine's words) put `next:` below the fold."""
    long_fatal = Alert(f"fatal:{LANE}", "fatal", LANE, (
        "rank 0 (failed): EngineCore encountered a fatal error.",
        "cause: TimeoutError: RPC call to sample_tokens timed out.",
        "Engine 000: " + STATS + ", Prefix cache hit rate: 0.0%",
        "No available shared memory broadcast block found in 60 seconds. This typically "
        "happens when some processes are hanging or doing some time-consuming work (e.g. "
        "compilation, weight/kv cache quantization)."),
        "stop the lane (x), then recover the starved nodes (R)")
    c = build()
    async with c.app.run_test(size=(80, 24)) as pilot:
        c.app.main_screen.post_message(ServiceReported(AlertRaised(long_fatal)))
        await wait_for(pilot, lambda: len(c.app.alerts.active) == 1)
        await pilot.press("exclamation_mark")
        await wait_for(pilot, lambda: isinstance(c.app.screen, AlertsScreen))
        await pilot.pause(0.2)
        text = screen_text(c.app)
        assert "next: stop the lane (x), then recover the starved nodes (R)" in text, text
