"""The night's recording (issue 15): what it costs the console per event and
what a night weighs on disk, side by side with the work the event already
costs (building the snapshot row a bundle keeps).

    .venv/bin/python bench/bench_record.py [--nodes 8] [--polls 2000]

A poll of every node is ``--nodes`` NodeSampled events carrying the full
probe (eight containers, mounts, images), like the console's; every 15th poll
also a batch of 20 boot-log lines. Reported: microseconds of recorder CPU per
event, compressed bytes per node poll, and the projected size of a 12-hour
night at the default 2 s interval against the default ``[record] max_mb``.
Then what `sparktui replay` pays to open that file (index it, then fold the
state at ``--from`` the middle), with the writer's index beside it and
without (the night decompressed), and the index's size beside the night's;
beside decoding every event (what open did before the index), to seek in it
(forward to three quarters, back to a quarter), and the open projected to a
12-hour night of the same mix (the index grows with the night; the fold at
``--from`` does not); last, a
malformed ``--from`` refused by ``python -m sparktui replay`` on that file.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import MappingProxyType

from sparktui.core.config import RecordConfig
from sparktui.core.config_load import load_config
from sparktui.core.incident import snapshot_row
from sparktui.core.state import (
    ContainerInfo,
    DiskFree,
    HistoryPoint,
    ImageInfo,
    LoadAvg,
    MemInfo,
    Mount,
    NodeSnapshot,
    NodeState,
    ProbeResult,
    Psi,
    PsiLine,
)
from sparktui.core.thrash import ThrashLevel, ThrashVerdict
from sparktui.service import recording
from sparktui.service.events import LogLinesArrived, NodeSampled
from sparktui.service.recorded import Damage, open_sessions, read_recording
from sparktui.service.recordindex import index_path
from sparktui.service.recording import Recorder
from sparktui.service.replay import ReplaySource
from sparktui.watch.follower import LogLine

GIB = 1024 * 1024


class Clock:
    def __init__(self) -> None:
        self.t = 1_764_450_000.0

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, s: float) -> None:
        self.t += s


def event(node: str, t: float, i: int) -> NodeSampled:
    labels = MappingProxyType({"sparktui.lane": "glm53-mxfp4-fp8-4x-r39-196k",
                               "sparktui.rank": "1", "sparktui.nranks": "4",
                               "sparktui.port": "8000", "sparktui.engine": "vllm"})
    probe = ProbeResult(
        meminfo=MemInfo(int(121.6 * GIB), int((40 + i % 7) * GIB), 1_000_000, 0, 0),
        psi=Psi(PsiLine(1.2 + i % 3, 0.8, 0.5, 123_456 + i), PsiLine(0.1, 0.1, 0.0, 4_567 + i)),
        loadavg=LoadAvg(3.1, 2.9, 2.5, 2, 1234), uptime_s=3600.0 + t, kernel="6.17.0-1031-nvidia",
        mounts=tuple(Mount(f"/dev/x{k}", f"/mnt/{k}", "ext4", "rw,relatime") for k in range(6)),
        disks=(DiskFree("/dev/nvme0n1p2", 3_905_109_820, 812_345_600, 3_000_000_000, "/"),),
        containers=tuple(ContainerInfo(f"sparktui-lane{k}-r1", "vllm-node:latest", "running",
                                       "Up 2 hours", labels, "2026-11-29 20:00:00 +0000 UTC",
                                       f"{k:064x}", 7200.0) for k in range(8)),
        images=tuple(ImageInfo(f"repo/img{k}", "latest", f"sha256:{k:064x}", "31GB")
                     for k in range(4)),
        docker_ok=True)
    snap = NodeSnapshot(node, NodeState.ONLINE, t, probe, probe_latency_s=0.02, liveness=True,
                        powered=True, last_ok_at=t)
    return NodeSampled(snap, ThrashVerdict(node, ThrashLevel.OK, (), "", 0),
                       HistoryPoint(t, probe.meminfo.available_kib, probe.meminfo.total_kib,  # type: ignore[union-attr]
                                    1.2, 0.1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--polls", type=int, default=2000)
    args = ap.parse_args()
    clock = Clock()
    events = []
    for i in range(args.polls):
        t = clock.t + 2.0 * i
        events += [event(f"dgx{n}", t, i + n) for n in range(1, args.nodes + 1)]
        if i % 15 == 0:
            events.append(LogLinesArrived("lane", 0, tuple(
                LogLine(0, f"2026-11-29T22:{i % 60:02d}:00.{k:09d}Z",
                        f"INFO Avg prompt throughput: {k}.0 tokens/s, Running: 1 reqs")
                for k in range(20)), 20 * (i // 15 + 1)))
    path = Path(tempfile.mkdtemp(prefix="bench-record-")) / "night.jsonl.gz"
    recording.CLOSE_WAIT_S = 3600.0  # a whole night queued at once: close waits for all of it
    rec = Recorder(path, max_bytes=1 << 40, clock=clock)  # type: ignore[arg-type]
    rec.open()
    samples = [e for e in events if isinstance(e, NodeSampled)]
    c0 = time.process_time()
    for e in samples:
        snapshot_row(e.snapshot, e.verdict.level.label if e.verdict else "")
    row_s = time.process_time() - c0
    c0 = time.process_time()
    for e in events:
        if isinstance(e, NodeSampled):
            clock.t = e.snapshot.taken_at
        rec.write(e)
    rec.close()  # the writer thread's work counts (process time covers every thread)
    rec_s = time.process_time() - c0
    size = path.stat().st_size
    per_poll = size / len(samples)
    night = per_poll * args.nodes * (12 * 3600 / 2.0)
    load = os.getloadavg()
    print(f"host: {platform.node()} {platform.machine()} {os.cpu_count()} CPU, "
          f"Python {platform.python_version()}, load {load[0]:.1f} {load[1]:.1f}")
    print(f"events: {len(events)} ({len(samples)} node polls of {args.nodes} nodes, "
          f"{len(events) - len(samples)} log batches)")
    print(f"recorder CPU per event: {rec_s / len(events) * 1e6:.0f} us "
          f"(snapshot row for a bundle: {row_s / len(samples) * 1e6:.0f} us; "
          f"ratio {rec_s / len(events) / (row_s / len(samples)):.1f}x)")
    print(f"recorder CPU at 8 nodes / 2 s: {rec_s / len(events) * args.nodes / 2.0 * 100:.2f} % "
          f"of one core")
    print(f"compressed: {per_poll:.0f} bytes per node poll; a 12-hour night of {args.nodes} "
          f"nodes at 2 s: {night / 1e6:.1f} MB (default max_mb {RecordConfig().max_mb:g})")
    config = load_config(Path(__file__).parents[1] / "config.toml")
    scale = (12 * 3600 / 2.0) / args.polls
    c0 = time.perf_counter()
    damage = Damage()
    back = list(read_recording(path, damage))
    whole_s = time.perf_counter() - c0
    del back
    index = index_path(path)
    aside = path.with_name("aside.idx")
    opens = {}
    for how in ("with its index", "without it"):  # the same night, side by side
        if how == "without it":
            os.replace(index, aside)
        sessions = []
        gc.collect()  # each starts from the same heap
        c0 = time.perf_counter()
        sessions = open_sessions(path, damage)
        index_s = time.perf_counter() - c0
        night = sessions[-1]
        middle = (night.times[0] + night.times[-1]) / 2
        c0 = time.perf_counter()
        source = ReplaySource(config, night, start=middle)
        source.seek(middle)  # what the replay's start does: the state at --from
        opens[how] = (len(night), index_s, time.perf_counter() - c0)
    os.replace(aside, index)
    print(f"index beside the night: {index.stat().st_size / 1e6:.1f} MB "
          f"(the night {size / 1e6:.1f} MB)")
    for how, (n, index_s, from_s) in opens.items():
        print(f"replay open {how}: {n} events indexed in {index_s:.2f} s "
              f"({damage.describe() or 'no damage'}); at --from the middle "
              f"{index_s + from_s:.2f} s in all (a 12-hour night: "
              f"~{index_s * scale + from_s:.1f} s)")
    c0 = time.perf_counter()
    source.seek(night.times[0] + (night.times[-1] - night.times[0]) * 3 / 4)
    fwd_s = time.perf_counter() - c0
    c0 = time.perf_counter()
    source.seek(night.times[0] + (night.times[-1] - night.times[0]) / 4)
    back_s = time.perf_counter() - c0
    source.seek(middle + 600)  # on ten minutes (as played), then back one, then back ten
    c0 = time.perf_counter()
    source.seek(middle + 540)
    step_s = time.perf_counter() - c0
    c0 = time.perf_counter()
    source.seek(middle - 60)
    step10_s = time.perf_counter() - c0
    print(f"  (decoding every event, what open did before the index: {whole_s:.2f} s; "
          f"a 12-hour night ~{whole_s * scale:.0f} s)")
    print(f"replay seek: forward to three quarters {fwd_s * 1000:.0f} ms, back to a quarter "
          f"{back_s * 1000:.0f} ms (each folds from the tail or a kept copy: "
          f"no longer with the night)")
    print(f"replay step back through what was just played: one minute {step_s * 1000:.0f} ms, "
          f"ten minutes {step10_s * 1000:.0f} ms")
    c0 = time.perf_counter()
    refused = subprocess.run([sys.executable, "-m", "sparktui", "replay", str(path), "--from",
                              "yesterday-ish"], capture_output=True, timeout=120, check=False)
    reject_s = time.perf_counter() - c0
    print(f"replay --from yesterday-ish on this night: exit {refused.returncode} in "
          f"{reject_s:.2f} s, a whole process (the flag is checked before the file is read)")
    path.unlink()
    index.unlink()


if __name__ == "__main__":
    main()
