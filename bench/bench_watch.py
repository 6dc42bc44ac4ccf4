"""Watcher benchmarks (issue 5).

1. ingest: lines/s through the log follower (chunk splitting, decoding,
   timestamps) and the phase tracker (signature table) — target >= 100k/s;
2. fatal line -> watcher exit: from the moment a rank's fatal line is
   written to its log stream until ``LaneWatch.run()`` returns — target
   <= 100 ms;
3. thrash flag: from the poll whose probe is starved to the THRASH verdict.

Parts 1 and 2 use in-memory log streams (no network); ``--sim`` adds the
same measurements over real SSH against the simulator when it is available.

Usage: .venv/bin/python bench/bench_watch.py [--lines 500000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import AsyncIterator

from sparktui.core.logsig import classify
from sparktui.core.phases import PhaseTracker
from sparktui.core.state import MemInfo, NodeSnapshot, NodeState, ProbeResult, Psi, PsiLine
from sparktui.core.thrash import ThrashLevel
from sparktui.watch.follower import LogFollower
from sparktui.watch.readiness import LaneWatch, RankContainer
from sparktui.watch.thrash import ThrashDetector

P = "(EngineCore_DP0 pid=312) INFO 11-29 01:02:03 [gpu_model_runner.py:5089] "
A = "(APIServer pid=1) INFO 11-29 01:02:03 [loggers.py:236] "
MIX = [
    A + "Engine 000: Avg prompt throughput: 1234.5 tokens/s, Avg generation throughput: 45.6 "
        "tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 12.5%, Prefix cache "
        "hit rate: 40.0%",
    'INFO:     127.0.0.1:53422 - "GET /health HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:53422 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "\rLoading safetensors checkpoint shards:  25% Completed | 35/141 [23:20<70:40, 40.00s/it]",
    P + "Using max model len 131072",
    "\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO 11-29 01:02:03 [a.py:1] some informational text",
    "[2026-11-29 01:02:03 TP0] Decode batch, #running-req: 3, token usage: 0.12, gen "
    "throughput (token/s): 40.1",
    P + "Available KV cache memory: 24.5 GiB",
]


def log_bytes(n: int) -> bytes:
    out = []
    for i in range(n):
        s, ns = divmod(i, 1000)
        out.append(f"2026-11-29T01:{s // 60 % 60:02d}:{s % 60:02d}.{ns:06d}000Z "
                   f"{MIX[i % len(MIX)]}\n")
    return "".join(out).encode()


class Chunks:
    """A finished container log served in 64 KiB chunks (what asyncssh hands over)."""

    def __init__(self, data: bytes, chunk: int = 65536) -> None:
        self.data, self.chunk = data, chunk

    async def stream(self, cmd: str) -> AsyncIterator[bytes]:
        for i in range(0, len(self.data), self.chunk):
            yield self.data[i:i + self.chunk]


async def bench_ingest(n: int) -> dict[str, float]:
    data = log_bytes(n)
    follower = LogFollower.for_container(Chunks(data), "c", follow=False)
    tracker = PhaseTracker("bench", stall_after_s=900, start=0.0)
    t0 = time.perf_counter()
    count = 0
    async for batch in follower.batches():
        now = time.perf_counter()
        for line in batch:
            tracker.feed(0, line.text, now, line.ts)
        count += len(batch)
    dt = time.perf_counter() - t0
    lines = data.decode().splitlines()
    t1 = time.perf_counter()
    for line in lines:
        classify(line)
    dt_parse = time.perf_counter() - t1
    return {"lines": count, "follower_and_tracker_lines_per_s": count / dt,
            "classify_only_lines_per_s": len(lines) / dt_parse}


class OneNode:
    """A node whose single container log gets lines pushed by the bench."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()

    async def stream(self, cmd: str) -> AsyncIterator[bytes]:
        while True:
            yield await self.queue.get()

    async def run(self, cmd: str, timeout: float) -> object:
        out = "MemTotal: 127600748 kB\nMemAvailable: 60000000 kB\n"
        return type("R", (), {"stdout": out if "meminfo" in cmd else "{}"})()


async def bench_fatal_exit(repeat: int) -> dict[str, float]:
    samples = []
    for i in range(repeat):
        nodes = {f"n{r}": OneNode() for r in range(8)}
        ranks = [RankContainer(r, f"n{r}", f"sparktui-m-r{r}", 8, None, "vllm", True)
                 for r in range(8)]
        watch = LaneWatch("m", ranks, nodes, "127.0.0.1", stall_after_s=900)  # type: ignore[arg-type]
        task = asyncio.create_task(watch.run())
        for node in nodes.values():
            node.queue.put_nowait(f"2026-11-29T01:00:00.000000001Z {P}Starting to load model m"
                                  f"...\n".encode())
        await asyncio.sleep(0.01)
        victim = nodes[f"n{5 + i % 3}"]
        t0 = time.perf_counter()
        victim.queue.put_nowait(b"2026-11-29T01:00:01.000000001Z huggingface_hub.errors."
                                b"LocalEntryNotFoundError: Cannot find an appropriate cached "
                                b"snapshot folder\n")
        result = await task
        samples.append(time.perf_counter() - t0)
        assert result.failure is not None and result.failure.rank >= 5
    return {"repeat": repeat, "p50_ms": statistics.median(samples) * 1e3,
            "max_ms": max(samples) * 1e3}


def bench_thrash_verdict(repeat: int) -> dict[str, float]:
    """Time from the starved snapshot to the THRASH verdict (the rest of the
    detection latency is the poll interval plus the probe timeout)."""
    samples = []
    for _ in range(repeat):
        det = ThrashDetector()
        t = time.time()
        probe = ProbeResult(meminfo=MemInfo(127_600_748, 400_000),
                            psi=Psi(PsiLine(40, 30, 10, 9), PsiLine(25, 10, 5, 9)))
        det.on_snapshot(NodeSnapshot("dgx1", NodeState.ONLINE, t - 2, probe=probe,
                                     liveness=True))
        t0 = time.perf_counter()
        v = det.on_snapshot(NodeSnapshot("dgx1", NodeState.STARVED, t, liveness=True,
                                         stalled=True))
        samples.append(time.perf_counter() - t0)
        assert v.level is ThrashLevel.THRASH
    return {"repeat": repeat, "verdict_p50_us": statistics.median(samples) * 1e6}


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    report = {
        "ingest": await bench_ingest(args.lines),
        "fatal_line_to_exit": await bench_fatal_exit(args.repeat),
        "thrash_verdict": bench_thrash_verdict(args.repeat),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
