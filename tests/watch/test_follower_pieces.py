"""What the follower makes of a line docker logged in pieces (moby
``daemon/logger/copier.go``: 16 KiB pieces of a line without its newline,
every piece under the first one's stamp; ``docker logs --timestamps`` prints
each piece with that stamp and no newline between them,
``api/server/httputils/write_log_stream.go:55-62``; docs/DIALECTS.md "What
docker prints of a bar"): one line with one stamp whatever the chunking, a
held piece never delivered as a line (not at a stream drop, not by a
catch-up read), a redrawn line past the limit keeping its latest redraw, and
the held line's latest complete redraw delivered early as an OpenLine."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

from hypothesis import given, settings
from hypothesis import strategies as st
from test_follower_chunks import cut

from sparktui.core.errors import RemoteError
from sparktui.core.logsig import message_of
from sparktui.watch.follower import PIECE_BYTES, LogFollower, LogLine, OpenLine


def stamp(i: int) -> str:
    return f"2026-12-02T01:{i // 60 % 60:02d}:{i % 60:02d}.{i:09d}Z"


def printed(ts: str, line: bytes) -> bytes:
    """``line`` as ``docker logs --timestamps`` prints it (the copier's rule)."""
    whole = len(line) // PIECE_BYTES * PIECE_BYTES
    pieces = [line[i:i + PIECE_BYTES] for i in range(0, whole, PIECE_BYTES)] + [line[whole:]]
    return b"".join(ts.encode() + b" " + p for p in pieces) + b"\n"


def bar(n: int, total: int = 9000) -> str:
    return (f"Loading safetensors using InstantTensor: {100 * n // total:3d}% Completed | "
            f"{n}/{total} [00:{n % 60:02d}<09:59, 15.00it/s]")


def bar_line(redraws: int, step: int = 15) -> bytes:
    return "".join("\r" + bar(k * step) for k in range(redraws)).encode()


class Chunks:
    """The chunks, on the first stream only (the read after the container
    stopped finds nothing new)."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def stream(self, cmd: str) -> AsyncIterator[bytes]:
        chunks, self.chunks = self.chunks, []
        for chunk in chunks:
            yield chunk


def followed(chunks: list[bytes], *, follow: bool = False, limit: int = 64 * 1024
             ) -> list[LogLine]:
    async def go() -> list[LogLine]:
        async def dead() -> bool:
            return False

        f = LogFollower(Chunks(chunks), lambda since: "docker logs", 0, follow=follow,
                        still_running=dead if follow else None, max_line_bytes=limit,
                        redraws=follow)
        return [line async for line in f.lines()]

    return asyncio.run(go())


_LINE = st.one_of(
    st.builds(lambda n: b"x" * n, st.integers(0, 3 * PIECE_BYTES + 5)),
    st.builds(bar_line, st.integers(1, 600)),
    st.sampled_from([b"", b"INFO:     Application startup complete.", b"\xc3\xa9" * 9000,
                     b"a\r\n"[:2], b"\xe2\x96\x88" * 6000]),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_LINE, min_size=1, max_size=6), st.lists(st.integers(0, 10**6), max_size=12))
def test_pieces_cut_anywhere_give_each_line_once_with_its_stamp(lines: list[bytes],
                                                                cuts: list[int]) -> None:
    data = b"".join(printed(stamp(i), line) for i, line in enumerate(lines))
    got = followed(cut(data, cuts))
    assert [(ln.ts, ln.text.encode()) for ln in got] == [
        (stamp(i), line.removesuffix(b"\r")) for i, line in enumerate(lines)]
    assert not any(ln.truncated for ln in got)


def pieces_printed(line: bytes, ts: str) -> list[bytes]:
    """What docker -f prints of ``line``, in the order it prints it: a
    chunk per piece as the piece fills, the last with the newline."""
    data, step = printed(ts, line), len(ts) + 1 + PIECE_BYTES
    return [data[i:i + step] for i in range(0, len(data), step)]


def done_of(line: LogLine) -> int:
    m = re.fullmatch(r"Loading safetensors using InstantTensor: +\d+% Completed \| (\d+)/9000 "
                     r"\[00:\d\d<09:59, 15.00it/s\]", message_of(line.text))
    assert m is not None, line.text[-200:]
    return int(m[1])


def test_each_piece_of_a_held_bar_gives_the_latest_redraw_it_completes() -> None:
    line = bar_line(700)  # ~66 KB: three whole pieces before the newline
    chunks = pieces_printed(line, stamp(1))
    got = followed(chunks, follow=True, limit=1 << 20)
    opens = [ln for ln in got if isinstance(ln, OpenLine)]
    held = b""
    want = []
    for chunk in chunks[:-1]:
        held += chunk[len(stamp(1)) + 1:]
        want.append(int(held.decode().rsplit("\r", 2)[-2].split("| ")[1].split("/")[0]))
    assert [done_of(ln) for ln in opens] == want and len(want) == len(line) // PIECE_BYTES
    assert all(ln.ts == stamp(1) and not ln.truncated for ln in opens)
    assert [(ln.ts, ln.text) for ln in got if not isinstance(ln, OpenLine)] == [
        (stamp(1), line.decode())]


@settings(max_examples=40, deadline=None)
@given(st.integers(200, 700), st.lists(st.integers(0, 10**6), max_size=12))
def test_the_held_bar_cut_anywhere_gives_whole_redraws_that_only_move_forward(
        redraws: int, cuts: list[int]) -> None:
    """Cut at docker's piece boundaries and anywhere else: every OpenLine is
    a whole redraw under the line's stamp, they only move forward, and the
    bar's line is delivered once, whole, at the end."""
    line = bar_line(redraws)
    data = b"".join(pieces_printed(line, stamp(1)))
    boundaries = [k * (len(stamp(1)) + 1 + PIECE_BYTES)
                  for k in range(1, len(line) // PIECE_BYTES + 1)]
    got = followed(cut(data, cuts + boundaries), follow=True)
    opens = [ln for ln in got if isinstance(ln, OpenLine)]
    assert [(ln.ts, ln.text) for ln in got if not isinstance(ln, OpenLine)] == [
        (stamp(1), line.decode())]
    done = [done_of(ln) for ln in opens]
    assert done == sorted(set(done)) and len(done) >= len(boundaries)
    assert all(ln.ts == stamp(1) for ln in opens)


def test_a_bar_past_the_limit_keeps_its_latest_redraws_and_a_bounded_buffer() -> None:
    line = bar_line(4000, step=2)  # ~390 KB: 24 pieces
    data = printed(stamp(3), line) + printed(stamp(4), b"after")
    chunks = cut(data, list(range(0, len(data), 4093)))
    got = followed(chunks, follow=True, limit=64 * 1024)
    whole = [ln for ln in got if not isinstance(ln, OpenLine)]
    assert [ln.ts for ln in whole] == [stamp(3), stamp(4)]
    assert whole[0].truncated and len(whole[0].text) <= 64 * 1024
    assert message_of(whole[0].text) == bar(3999 * 2) and "2026-12-02T" not in whole[0].text
    opens = [ln for ln in got if isinstance(ln, OpenLine)]
    assert opens and all(len(ln.text) <= 64 * 1024 for ln in opens)
    assert message_of(opens[-1].text).startswith("Loading safetensors using InstantTensor:")


def test_a_plain_line_past_the_limit_is_still_cut() -> None:
    got = followed([printed(stamp(1), b"y" * 100_000) + printed(stamp(2), b"z")], limit=4096)
    assert [(ln.ts, ln.truncated, len(ln.raw)) for ln in got][:1] == [(stamp(1), True, 4096)]
    assert got[1].text == "z"


class Dropping:
    """``docker logs`` over a log whose last line is a bar still being
    written (two pieces printed so far): the first stream drops after the
    first piece, the resume (``--since``, inclusive) prints both again, then
    the bar ends."""

    def __init__(self) -> None:
        self.bar = bar_line(400)
        head = printed(stamp(1), b"Load weight begin. avail mem=119.42 GB")
        self.open = head + printed(stamp(2), self.bar)[:2 * (len(stamp(2)) + 1 + PIECE_BYTES)]
        self.done = head + printed(stamp(2), self.bar) + printed(stamp(3), b"Load weight end.")
        self.commands: list[str] = []

    async def stream(self, cmd: str) -> AsyncIterator[bytes]:
        self.commands.append(cmd)
        if len(self.commands) == 1:
            yield self.open[:len(self.open) - PIECE_BYTES]
            raise RemoteError("dgx1", cmd, "connection lost")
        since = re.search(r"--since (\S+)", cmd)
        start = self.done.index(since[1].encode()) if since else 0
        if len(self.commands) == 2:
            yield self.open[start:]
            raise RemoteError("dgx1", cmd, "connection lost")
        yield self.done[start:]


class NoClock:
    def time(self) -> float:
        return 0.0

    def monotonic(self) -> float:
        return 0.0

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)


async def test_a_held_piece_at_a_drop_is_not_a_line_and_the_resume_delivers_it_whole() -> None:
    docker = Dropping()

    async def stopped() -> bool:  # asked only when a stream ends without an error
        return False

    f = LogFollower.for_container(docker, "c", still_running=stopped, clock=NoClock())
    got = [line async for line in f.lines()]
    whole = [(ln.ts, ln.text) for ln in got if not isinstance(ln, OpenLine)]
    assert whole == [(stamp(1), "Load weight begin. avail mem=119.42 GB"),
                     (stamp(2), docker.bar.decode()), (stamp(3), "Load weight end.")]
    assert f.reconnects == 2 and f"--since {stamp(1)}" in docker.commands[1]
    assert any(isinstance(ln, OpenLine) for ln in got)


class Runner:
    def __init__(self, stdout: str) -> None:
        self.stdout = stdout

    async def run(self, cmd: str, timeout: float) -> object:
        return self


async def test_catch_up_leaves_a_held_piece_to_the_stream() -> None:
    bar_bytes = bar_line(300)
    text = (printed(stamp(1), b"Load weight begin.") + printed(stamp(2), bar_bytes)
            [:len(stamp(2)) + 1 + PIECE_BYTES]).decode()
    f = LogFollower.for_container(Chunks([]), "c")
    got = await f.catch_up(Runner(text))
    assert [ln.text for ln in got] == ["Load weight begin."]
    assert f.last_time is not None and f._since() == stamp(1)
