"""Issue 27: a deeply nested line silently ended a client's subscription (a
RecursionError escaped the line loop). It is now one rejected line; the lines
after it are still read."""

from __future__ import annotations

import asyncio

from sparktui.core.clock import SystemClock
from sparktui.service.attach import SentinelHub


async def test_a_deeply_nested_line_is_rejected_and_the_next_one_read(tmp_path) -> None:
    seen: list[str] = []
    hub = SentinelHub(tmp_path / "s.sock", clock=SystemClock(), pid=1,
                      on_stopping=seen.append)
    reader = asyncio.StreamReader()
    reader.feed_data(b"[" * 50_000 + b"\n")
    reader.feed_data(b'{"k": "stopping", "lane": "a"}\n')
    reader.feed_eof()
    await hub._listen(reader)
    assert seen == ["a"]
