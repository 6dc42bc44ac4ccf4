"""A bundle's timeline is on one clock and says which (issue 25: a CLI bundle
on wall time interleaved a 60x simulator's log stamps with its own journal,
days apart): when the nodes stamp on another clock, the summary has two
timelines, each in its own clock's order, and no line of one between lines of
the other."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sparktui.core.incident import (
    NODES,
    OURS,
    TIMELINE_MAX,
    Clocks,
    Incident,
    TimelineItem,
    build_timeline,
    hhmmss,
    render_summary,
)

WALL = 1_796_000_000.0
SIM = WALL - 3 * 86_400  # the simulator's night, days behind this host's


def incident(timeline: tuple[TimelineItem, ...], clocks: Clocks) -> Incident:
    return Incident("lane-a", "lane", "manual", WALL - 3600, WALL, None, None, (), (), (), (),
                    timeline, clocks)


def section(summary: str, head: str) -> list[str]:
    lines = summary.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(head)) + 2
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("- "))
    return lines[start:end]


items = st.lists(st.tuples(st.sampled_from([OURS, NODES]), st.floats(0, 3000)), max_size=60)


@given(items)
def test_two_clocks_two_timelines_each_in_its_own_order(drawn):
    clocks = Clocks("wall clock (UTC)", shared=False)
    parts = [TimelineItem((WALL if c == OURS else SIM) - dt, f"{c} {i}", c)
             for i, (c, dt) in enumerate(drawn)]
    summary = render_summary(incident(build_timeline(clocks, parts), clocks))
    assert "window: " in summary and "(wall clock (UTC))" in summary
    for clock, head in ((OURS, "## Timeline on wall clock (UTC): journal, polls, alerts"),
                        (NODES, "## Timeline on the nodes' clocks")):
        got = section(summary, head)
        mine = sorted((i for i in parts if i.clock == clock), key=lambda i: i.t)
        assert got == ([f"- {hhmmss(i.t)[11:19]} {i.what}" for i in mine]
                       or ["- (nothing timed)"])


def test_one_clock_one_timeline_that_says_so():
    clocks = Clocks("the simulator's clock (simulated UTC)", shared=True)
    parts = [TimelineItem(SIM + 5, "kernel line", NODES), TimelineItem(SIM + 1, "serve began"),
             TimelineItem(SIM + 9, "alert thrash dgx6")]
    summary = render_summary(incident(build_timeline(clocks, parts), clocks))
    assert section(summary, "## Timeline (the simulator's clock (simulated UTC); the nodes' "
                            "stamps are on it too)") == [
        f"- {hhmmss(SIM + 1)[11:19]} serve began", f"- {hhmmss(SIM + 5)[11:19]} kernel line",
        f"- {hhmmss(SIM + 9)[11:19]} alert thrash dgx6"]
    assert "## Timeline on" not in summary


def test_each_clock_is_bounded_on_its_own():
    clocks = Clocks("wall clock (UTC)", shared=False)
    parts = [TimelineItem(WALL + i, f"ours {i}") for i in range(TIMELINE_MAX + 10)]
    parts += [TimelineItem(SIM + i, f"node {i}", NODES) for i in range(5)]
    out = build_timeline(clocks, parts)
    assert [i.what for i in out if i.clock == NODES] == [f"node {i}" for i in range(5)]
    ours = [i for i in out if i.clock == OURS]
    assert len(ours) == TIMELINE_MAX + 1 and "10 entries left out" in ours[TIMELINE_MAX // 2].what
