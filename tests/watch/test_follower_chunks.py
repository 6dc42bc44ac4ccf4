"""The follower's whole-chunk split (ASCII chunks decoded and split at once)
delivers exactly what the line-at-a-time split delivers: the same lines,
stamps, texts and truncation flags, in the same batches, over any chunking
of any bytes (non-ASCII and invalid UTF-8, ``\\r``, empty lines, lines at,
under and beyond the length limit, partial lines across chunks)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.watch.follower import LogFollower, LogLine


class Chunks:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def stream(self, cmd: str) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


def reference(chunks: list[bytes], limit: int, rank: int = 3) -> list[list[LogLine]]:
    """The follower's line-at-a-time split (the path the whole-chunk one
    stands in for), driven chunk by chunk."""
    f = LogFollower.for_container(Chunks(chunks), "c", rank, follow=False,
                                  max_line_bytes=limit)
    batches: list[list[LogLine]] = []
    pending = bytearray()
    dropping = False
    for chunk in chunks:
        out, dropping = f._split(pending, chunk, dropping)
        if out:
            batches.append(out)
    if pending and not dropping:
        batches.append([f._line(bytes(pending), f._cut)])
    return batches


def followed(chunks: list[bytes], limit: int) -> list[list[LogLine]]:
    async def go() -> list[list[LogLine]]:
        f = LogFollower.for_container(Chunks(chunks), "c", 3, follow=False, max_line_bytes=limit)
        return [batch async for batch in f.batches()]

    return asyncio.run(go())


def cut(data: bytes, cuts: list[int]) -> list[bytes]:
    at = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in pairwise(at)]


_PIECE = st.sampled_from([
    b"2026-11-29T01:02:03.123456789Z ", b"2026-11-29T01:02:03Z ", b"2026-11-29T01:02:03.1+00:00 ",
    b"2026-11-29T01:02:03.123456789Z", b"abcd-efghiTjklmnopqrstuvw ", b"x", b" ", b"\n", b"\r",
    b"\r\n", b"\n\n", b"INFO:     127.0.0.1:1 - \"GET /health HTTP/1.1\" 200 OK", b"\xc3\xa9",
    b"\xe2\x96\x88", b"\xe2\x96", b"\xff", b"\x1b[0m", b"Loading 3/141", b"\t", b"0123456789"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECE, max_size=40), st.lists(st.integers(0, 2000), max_size=8),
       st.sampled_from([8, 24, 40, 64, 4096]))
def test_any_chunking_of_any_bytes_splits_as_line_by_line(pieces: list[bytes], cuts: list[int],
                                                          limit: int) -> None:
    chunks = cut(b"".join(pieces), cuts)
    assert followed(chunks, limit) == reference(chunks, limit)


def test_a_long_ascii_log_in_64_kib_chunks() -> None:
    lines = [f"2026-11-29T01:00:{i % 60:02d}.{i:09d}Z {'x' * (i % 300)} line {i}"
             + ("\r" if i % 7 == 0 else "") for i in range(5000)]
    data = ("\n".join(lines) + "\n").encode()
    for size in (65536, 1000, 333):
        chunks = [data[i:i + size] for i in range(0, len(data), size)]
        got = followed(chunks, 65536)
        assert got == reference(chunks, 65536)
        assert sum(map(len, got)) == 5000
