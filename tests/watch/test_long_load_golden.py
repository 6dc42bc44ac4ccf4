"""A long SGLang 0.5.23 load, from the golden transcript ``sglang05-long-load``
(tests/fixtures/dialects/build_transcripts.py ``sglang_instanttensor_load``:
InstantTensor's tqdm over 9000 tensors, a ``\\r`` redraw a second for ten
minutes, ``srt/model_loader/weight_utils.py:1258-1266``, BAR_FORMAT without a
newline, ``srt/utils/common.py:1414``), as ``docker logs --timestamps``
prints it: the bar's ~56 KB line in 16 KiB pieces, its stamp before each
(moby ``daemon/logger/copier.go:133``, ``:142-150``;
``api/server/httputils/write_log_stream.go:55-62``). Read by the follower
chunked anywhere it is one line with one stamp; read as docker -f prints it,
piece by piece, the lane watcher's load progress moves at every piece, not
only when the bar closes. The boot itself plays through real sshd as
``ready`` (tests/adapters/test_dialects_openssh.py, every transcript)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the fixtures
sys.path.insert(0, str(Path(__file__).parent))
from test_follower_chunks import Chunks, cut
from test_readiness import FakeNode, FastClock, labels, until

from fixtures.dialects import build_transcripts
from fixtures.dialects.golden import TRANSCRIPTS, read, scenario
from sparktui.core.logsig import Phase, message_of
from sparktui.core.phases import PhaseTracker
from sparktui.watch.follower import PIECE_BYTES, LogFollower, LogLine, OpenLine
from sparktui.watch.lane import BarRedrawn, LaneEvent, LaneWatcher, LinesArrived
from sparktui.watch.readiness import discover_lane

NAME = "sglang05-long-load"
CONTAINER = "sparktui-m-r0"


def printed() -> bytes:
    return read(TRANSCRIPTS / NAME / "rank0.log").encode()


def logged() -> list[tuple[str, str]]:
    """(docker's stamp, line) as the engine logged them, before docker's split."""
    s = next(s for s in build_transcripts.scenarios() if s.name == NAME)
    return [(build_transcripts.docker_ts(t), line) for t, line in s.ranks[0].lines]


def as_docker_prints(data: bytes) -> list[bytes]:
    """The log cut where docker -f writes: a whole line, or a piece as it fills."""
    out: list[bytes] = []
    for line in data.split(b"\n")[:-1]:
        step = line.index(b" ") + 1 + PIECE_BYTES
        out += [line[i:i + step] for i in range(0, len(line), step)]
        out[-1] += b"\n"
    return out


def test_docker_printed_the_bar_in_pieces_under_its_first_stamp() -> None:
    meta, _ = scenario(NAME)
    want = meta["expect"]["load"]
    bar = next(line for line in printed().split(b"\n") if b"using InstantTensor" in line)
    ts = bar[:bar.index(b" ") + 1]
    pieces = bar.split(ts)[1:]
    assert len(pieces) == want["pieces"] == 4 and bar.startswith(ts)
    assert [len(p) for p in pieces[:-1]] == [PIECE_BYTES] * 3
    assert sum(map(len, pieces)) == want["bytes"]
    # the first piece's stamp: when its 16 KiB had been written, minutes before the close
    load_end = next(line for line in printed().split(b"\n") if b"Load weight end." in line)
    assert ts.decode() < load_end.decode()[:31]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 10**6), max_size=16))
def test_the_follower_gives_every_logged_line_once_with_its_stamp(cuts: list[int]) -> None:
    async def go() -> list[LogLine]:
        f = LogFollower.for_container(Chunks(cut(printed(), cuts)), CONTAINER, follow=False)
        return [line async for line in f.lines()]

    got = asyncio.run(go())
    assert [(ln.ts, ln.text) for ln in got] == logged()


def test_the_tracker_reads_the_load_advancing_piece_by_piece() -> None:
    """Fed as the lane watcher feeds it (whole lines, a held bar's redraw
    through ``feed_redraw``): tensors done rise at each of the three pieces
    before the bar closes, then the bar's own last redraw says 9000/9000."""
    async def go() -> list[list[LogLine]]:
        f = LogFollower(Chunks(as_docker_prints(printed())), lambda since: "docker logs",
                        redraws=True)
        return [batch async for batch in f.batches()]

    tracker = PhaseTracker(NAME, stall_after_s=600.0, start=0.0)
    seen: list[tuple[Phase, int | None]] = []
    for now, batch in enumerate(asyncio.run(go())):
        lines = [ln for ln in batch if not isinstance(ln, OpenLine)]
        tracker.feed_lines(0, lines, float(now))
        for ln in batch[len(lines):]:
            assert tracker.feed_redraw(0, ln.text, float(now), ln.ts)
        lp = tracker.load_progress()
        if tracker.phase is Phase.LOADING:
            seen.append((tracker.phase, lp.done if lp else None))
    done = [d for _, d in seen if d is not None]
    assert len(done) >= 4 and done == sorted(done) and len(set(done)) == len(done)
    assert 0 < done[0] < done[1] < done[2] < 9000 == done[-1]
    assert tracker.phase is Phase.SERVING or tracker.phase is Phase.API_STARTING \
        or tracker.phase is Phase.KV_ALLOC


async def release(node: FakeNode, text: bytes) -> None:
    """What docker -f writes next: a line, or a piece of one."""
    async with node.new_line:
        node.logs[CONTAINER].append(text.decode())
        node.new_line.notify_all()


async def test_the_lane_watcher_reports_the_load_advancing_as_docker_prints_pieces() -> None:
    node = FakeNode("dgx1")
    node.add(CONTAINER, labels("m", 0, 1, 1) | {"sparktui.engine": "sglang"})
    ranks = await discover_lane({"dgx1": node}, "m")
    watch = LaneWatcher("m", ranks, {"dgx1": node}, "127.0.0.1", stall_after_s=7200,
                        clock=FastClock(), resource_poll_s=None, io_poll_s=None,
                        probe_endpoint=False, first_token=False)
    events: list[LaneEvent] = []
    watch.subscribe(events.append)
    watch.start()
    try:
        writes = as_docker_prints(printed())
        bar_at = next(i for i, w in enumerate(writes) if b"using InstantTensor" in w)
        for w in writes[:bar_at]:
            await release(node, w)
        await until(lambda: watch.tracker.phase is Phase.LOADING)
        assert watch.tracker.load_progress() is None
        done: list[int] = []
        for w in writes[bar_at:bar_at + 4]:  # three pieces, then the last with the newline
            await release(node, w)
            await until(lambda: (lp := watch.tracker.load_progress()) is not None
                        and lp.done > (done[-1] if done else 0))
            lp = watch.tracker.load_progress()
            assert lp is not None and lp.measure == "tensors" and lp.total == 9000
            done.append(lp.done)
            assert watch.tracker.phase is Phase.LOADING
        assert done[-1] == 9000 and len(done) == 4
        redrawn = [e for e in events if isinstance(e, BarRedrawn)]
        assert len(redrawn) == 3  # one a piece held; the line itself arrives as a line
        arrived = [ln for e in events if isinstance(e, LinesArrived) for ln in e.lines]
        assert not any(isinstance(ln, OpenLine) for ln in arrived)
        bars = [ln for ln in watch.buffers[0] if "using InstantTensor" in ln.text]
        assert len(bars) == 1 and message_of(bars[0].text).endswith("9000/9000 [10:00<00:00, "
                                                                     "15.00it/s]")
    finally:
        await watch.stop()
