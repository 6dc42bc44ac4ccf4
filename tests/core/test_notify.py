"""The phone-alert policy: selection, one message per incident per node/lane,
the hourly rate limit, the next step in the text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sparktui.core.config import NotifyConfig
from sparktui.core.notify import RECOVERY_HOLD_S, Happening, NotifyPolicy

ON = NotifyConfig(service="notify.mobile_app_pixel", dedup_s=600.0, max_per_hour=3)


def thrash(node: str) -> Happening:
    return Happening("thrash", node, "ping answers, SSH probe failed 3x",
                     "3 SSH retries ~30 s apart, then `sparktui recover " + node + "`")


def test_off_without_a_service_and_for_unselected_events() -> None:
    assert NotifyPolicy(NotifyConfig()).consider(thrash("dgx6"), 0.0) is None
    ready = Happening("lane-ready", "lane", "serving", "")
    assert NotifyPolicy(ON).consider(ready, 0.0) is None  # not in the default events


def test_one_message_per_incident_per_node_with_the_next_step() -> None:
    p = NotifyPolicy(ON)
    first = p.consider(thrash("dgx6"), 0.0)
    assert first is not None and first.title == "sparktui THRASH dgx6"
    assert "Next: 3 SSH retries" in first.message and "sparktui recover dgx6" in first.message
    assert p.consider(thrash("dgx6"), 10.0) is None  # the same incident, re-raised
    assert p.consider(thrash("dgx7"), 10.0) is not None  # another node
    assert p.consider(thrash("dgx6"), 7200.0) is None  # still the same incident, hours on
    p.close("thrash", "dgx6")
    assert p.consider(thrash("dgx6"), 7300.0) is not None  # a new one, past the window


def test_a_flapping_node_is_one_message_within_the_window() -> None:
    p = NotifyPolicy(ON)
    assert p.consider(thrash("dgx6"), 0.0) is not None
    p.close("thrash", "dgx6")
    assert p.consider(thrash("dgx6"), 60.0) is None  # cleared and back within dedup_s


def test_rate_limit_holds_back_and_says_so() -> None:
    p = NotifyPolicy(ON)
    sent = [p.consider(thrash(f"dgx{i}"), float(i)) for i in range(1, 6)]
    for i in range(1, 9):
        p.close("thrash", f"dgx{i}")
    assert [m is not None for m in sent] == [True, True, True, False, False]
    later = p.consider(thrash("dgx8"), 3700.0)
    assert later is not None and "(+2 held back by the rate limit)" in later.message


@given(st.lists(st.tuples(st.sampled_from(["dgx5", "dgx6", "dgx7", "lane"]),
                          st.floats(0, 20_000)), max_size=60))
def test_never_more_than_the_limit_in_any_hour(events: list[tuple[str, float]]) -> None:
    p = NotifyPolicy(ON)
    times = []
    for node, t in sorted(events, key=lambda e: e[1]):
        if p.consider(thrash(node), t) is not None:
            times.append(t)
        p.close("thrash", node)
    for t in times:
        assert sum(1 for u in times if t <= u < t + 3600.0) <= ON.max_per_hour


def test_an_incident_messaged_gets_one_recovery_message_under_the_same_limit() -> None:
    p = NotifyPolicy(ON)
    p.recover("thrash", "dgx6", 0.0, "alert cleared")  # never messaged: nothing to tell
    assert p.due(1000.0) == []
    first = p.consider(thrash("dgx6"), 0.0)
    assert first is not None and first.tag == "sparktui-thrash-dgx6"
    assert p.consider(thrash("dgx6"), 60.0) is None  # re-raised: the same incident
    p.recover("thrash", "dgx6", 720.0, "alert cleared")
    assert p.due(720.0 + RECOVERY_HOLD_S - 1) == []  # not over for long enough yet
    done = p.due(720.0 + RECOVERY_HOLD_S)
    assert [m.title for m in done] == ["sparktui RECOVERED THRASH dgx6"]
    assert done[0].message == ("dgx6: thrash is over (alert cleared); it lasted 12 min "
                               "from the alert.")
    assert done[0].tag == first.tag  # the phone shows it in the alert's place
    assert p.due(5000.0) == []  # once


def test_an_incident_back_within_the_hold_goes_on_without_a_page() -> None:
    p = NotifyPolicy(ON)
    assert p.consider(thrash("dgx6"), 0.0) is not None
    p.recover("thrash", "dgx6", 100.0, "alert cleared")
    assert p.consider(thrash("dgx6"), 110.0) is None  # flapped back: the same incident
    assert p.due(1000.0) == []  # and it is not over
    p.recover("thrash", "dgx6", 2000.0, "alert cleared")
    assert len(p.due(2000.0 + RECOVERY_HOLD_S)) == 1


def test_news_has_no_recovery_and_a_recovery_counts_toward_the_limit() -> None:
    ready = Happening("lane-ready", "x", "serving", "")
    p = NotifyPolicy(NotifyConfig(service="notify.x", events=("thrash", "lane-ready"),
                                  max_per_hour=2))
    assert p.consider(ready, 0.0) is not None
    p.recover("lane-ready", "x", 1.0, "moved on")
    assert p.consider(thrash("dgx6"), 2.0) is not None
    p.recover("thrash", "dgx6", 3.0, "alert cleared")
    assert p.due(3.0 + RECOVERY_HOLD_S) == []  # the hour's two messages are spent
    later = p.consider(thrash("dgx7"), 3700.0)
    assert later is not None and "(+1 held back by the rate limit)" in later.message


def test_no_escape_byte_reaches_the_phone() -> None:
    colored = Happening("fatal", "lane", "rank 0: \x1b[1;36m(APIServer pid=1)\x1b[0;0m ERROR "
                        "EngineDeadError\r\n", "stop the lane (x)")
    m = NotifyPolicy(NotifyConfig(service="notify.x", events=("fatal",))).consider(colored, 0.0)
    assert m is not None and "\x1b" not in m.message + m.title and "\r" not in m.message
    assert m.message.startswith("lane: rank 0: (APIServer pid=1) ERROR EngineDeadError")


def test_no_escape_byte_reaches_the_phone_in_a_recovery_either() -> None:
    p = NotifyPolicy(NotifyConfig(service="notify.x", events=("stall",)))
    lane = "lane\x1b]0;pwned\x07"  # a lane's name is a container label: anyone's text
    assert p.consider(Happening("stall", lane, "no progress", ""), 0.0) is not None
    p.recover("stall", lane, 10.0, "the boot moved on: \x1b[31mfailed\x1b[0m\r\n\x9d2;t\x9c")
    (m,) = p.due(10.0 + RECOVERY_HOLD_S)
    assert m.title == "sparktui RECOVERED STALL lane"
    assert m.message == "lane: stall is over (the boot moved on: failed ); it lasted 10 s " \
        "from the alert."


def restarted(p: NotifyPolicy, now: float) -> NotifyPolicy:
    """A new policy taking up ``p``'s memory, as a restarted sentinel does."""
    again = NotifyPolicy(p.config)
    again.restore(p.memory(now), now)
    return again


def test_a_restart_does_not_message_an_open_incident_again() -> None:
    p = NotifyPolicy(ON)
    assert p.consider(thrash("dgx6"), 0.0) is not None
    again = restarted(p, 7200.0)  # past the dedup window: only the open incident holds it
    again.seen("thrash", "dgx6")  # its alert raised again by the new process
    assert again.consider(thrash("dgx6"), 7201.0) is None
    assert again.consider(thrash("dgx7"), 7201.0) is not None  # a new incident is not held
    assert again.due(7200.0 + 2 * RECOVERY_HOLD_S) == []
    assert again.is_open("thrash", "dgx6")  # seen: it goes on until it ends
    # it ends as incidents end: a recovery message, then a next one is new
    again.recover("thrash", "dgx6", 7300.0, "alert cleared")
    [over] = again.due(7300.0 + RECOVERY_HOLD_S)
    assert over.title == "sparktui RECOVERED THRASH dgx6" and "lasted 2 h 02 min" in over.message
    assert restarted(again, 9000.0).consider(thrash("dgx6"), 9000.0) is not None


def test_a_restored_incident_not_seen_again_ended_unwatched() -> None:
    """Not raised again within the hold: it ended while nobody watched; closed
    with no recovery message (nothing saw it end), and a next one is new
    once the dedup window is past, as without a restart."""
    p = NotifyPolicy(ON)
    assert p.consider(thrash("dgx6"), 0.0) is not None
    again = restarted(p, 100.0)
    assert again.due(100.0 + RECOVERY_HOLD_S) == []
    assert not again.is_open("thrash", "dgx6")
    assert again.consider(thrash("dgx6"), 300.0) is None  # within dedup_s of its message
    assert again.consider(thrash("dgx6"), 700.0) is not None


def test_a_restart_keeps_an_ending_incident_and_the_hourly_count() -> None:
    p = NotifyPolicy(ON)
    for i, node in enumerate(("dgx5", "dgx6")):
        assert p.consider(thrash(node), float(i)) is not None
    p.recover("thrash", "dgx5", 50.0, "alert cleared")
    again = restarted(p, 60.0)
    [over] = again.due(50.0 + RECOVERY_HOLD_S)  # its hold goes on across the restart
    assert over.title == "sparktui RECOVERED THRASH dgx5"
    assert again.consider(thrash("dgx8"), 200.0) is None  # 3 an hour: 3 sent already
    assert again.held_back == 1


def test_an_ending_incident_seen_again_goes_on_at_any_level() -> None:
    """Cleared, then raised again within the hold as "thrash suspected" (not a
    level that messages): the same incident, no recovery message."""
    p = NotifyPolicy(ON)
    assert p.consider(thrash("dgx6"), 0.0) is not None
    p.recover("thrash", "dgx6", 10.0, "alert cleared")
    p.seen("thrash", "dgx6")
    assert p.due(10.0 + RECOVERY_HOLD_S) == [] and p.is_open("thrash", "dgx6")
