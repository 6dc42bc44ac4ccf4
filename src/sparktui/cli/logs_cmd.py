"""`sparktui logs LANE [--rank N] [-f]`: one rank's log with the boot phases
marked (phase changes, shard progress with ETA, KV pool) and fatal lines
flagged; ``-f`` follows (resuming after a dropped connection).

It is a consumer of the one lane watcher (watch/lane.LaneWatcher), as `wait`
and the console are: every rank of the lane is read, so the lane's failure it
reports is the watcher's decision across ranks, not this rank's first error."""

from __future__ import annotations

import argparse
import asyncio
import sys

from ..adapters.endpoints import EndpointError, resolve_endpoints
from ..adapters.ssh import Fleet
from ..core.clock import Clock, SystemClock
from ..core.config import Config
from ..core.errors import RemoteError
from ..core.logsig import Kind, LogEvent, Severity, clean
from ..core.phases import PhaseTracker
from ..core.tomlschema import Range, number
from ..watch.lane import FatalDecided, LaneEvent, LaneWatcher, LinesArrived
from ..watch.readiness import discover_lane
from .common import load

FATAL_MARK = "!!"
PHASE_MARK = "=="
PROGRESS_MARK = ">>"
_LOAD_BARS = frozenset({Kind.LOAD_SHARD, Kind.LOAD_BYTES, Kind.LOAD_TENSORS})
"""The loaders' bars: shards, vLLM InstantTensor's bytes, SGLang InstantTensor's tensors."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("logs", help="a lane's boot log with phases and fatal lines marked",
                       description="Print the log of one rank of LANE (rank 0 by default) "
                                   "with phase markers, progress and ETA; fatal lines are "
                                   f"marked {FATAL_MARK}.")
    p.add_argument("lane")
    p.add_argument("--rank", type=number(int, Range(0, 1023)), default=0,
                   help="which rank (default 0)")
    p.add_argument("-f", "--follow", action="store_true", help="keep following the log")
    p.add_argument("--tail", type=number(int, Range(0, 1_000_000)), default=None, metavar="N",
                   help="start from the last N lines (default: the whole boot)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = load(args)
    return asyncio.run(show_logs(config, args.lane, rank=args.rank, follow=args.follow,
                                 tail=args.tail))


class LogPrinter:
    """What `logs` prints of the lane watcher's events for one rank: its
    lines (the fatal one marked), the phase changes and shard progress (ETA)
    of this rank's log, and the lane's failure once the watcher decided it.

    The markers come from a tracker of this rank alone, fed the events the
    watcher already classified (progress only: failures are the watcher's),
    so they sit among this rank's lines as the boot moved through them."""

    def __init__(self, watched: PhaseTracker, rank: int) -> None:
        self.watched = watched
        self.rank = rank
        self.markers = PhaseTracker(watched.lane, float("inf"), watched.start)
        self._marked = False

    def lines(self, event: LaneEvent) -> list[str]:
        if isinstance(event, FatalDecided):
            f = event.failure
            text = f"{FATAL_MARK} lane failed on rank {f.rank} ({f.kind.value})"
            return [text if f.rank == self.rank else f"{text}: {clean(f.line)}"]
        if not isinstance(event, LinesArrived) or event.rank != self.rank:
            return []
        out = []
        for line, ev in zip(event.lines, event.events, strict=True):
            when = f"{line.ts[11:19]} " if line.ts else ""
            mark = FATAL_MARK if self._fatal(ev) else "  "
            out.append(f"{mark} {when}{clean(line.text)}")
            if ev is None or ev.severity is not Severity.PROGRESS:
                continue
            before = self.markers.phase
            self.markers.feed_event(self.rank, ev, self.markers.start, line.ts)
            if self.markers.phase is not before:
                out.append(f"{PHASE_MARK} {self.markers.summary()}")
            elif ev.kind in _LOAD_BARS and (lp := self.markers.load_progress()):
                out.append(f"{PROGRESS_MARK} {lp.describe()}")
        return out

    def _fatal(self, ev: LogEvent | None) -> bool:
        """A fatal line, or the line the lane's failure names (an exception
        line made fatal by the traceback before it)."""
        if ev is None:
            return False
        if ev.fatal:
            return True
        f = self.watched.failure
        if not self._marked and f is not None and f.rank == self.rank and f.line == ev.text:
            self._marked = True
            return True
        return False


async def show_logs(
    config: Config,
    lane: str,
    *,
    rank: int = 0,
    follow: bool = False,
    tail: int | None = None,
    clock: Clock | None = None,
) -> int:
    clock = clock or SystemClock()
    try:
        endpoints = resolve_endpoints(config)
    except EndpointError as exc:
        print(f"sparktui logs: {exc}", file=sys.stderr)
        return 1
    async with Fleet.from_config(config, endpoints, clock=clock) as fleet:
        links = {name: fleet.get(name) for name in config.nodes}
        found = await discover_lane(links, lane)  # type: ignore[arg-type]
        target = next((r for r in found if r.rank == rank), None)
        if target is None:
            known = ", ".join(str(r.rank) for r in sorted(found, key=lambda r: r.rank)) \
                or "none"
            print(f"sparktui logs: lane {lane!r} has no rank {rank} (ranks found: {known})",
                  file=sys.stderr)
            return 1
        # a log viewer never declares a stall and sends the engine no request
        watch = LaneWatcher(
            lane, found, links, endpoints.node(target.node).api_host,
            stall_after_s=float("inf"), clock=clock, tail=tail, resource_poll_s=None,
            follow=follow, probe_endpoint=False, io_poll_s=None)
        printer = LogPrinter(watch.tracker, rank)

        def write(event: LaneEvent) -> None:
            if out := printer.lines(event):
                sys.stdout.write("\n".join(out) + "\n")
                sys.stdout.flush()

        watch.subscribe(write)
        print(f"{PHASE_MARK} {lane} rank {rank} on {target.node} ({target.container})",
              flush=True)
        watch.start()
        try:
            # following: until this rank's container exits; once: every rank
            # read to its end (the lane's failure is decided across them)
            await watch.settled(rank if follow else None)
        except RemoteError as exc:
            print(f"sparktui logs: {exc.node}: {exc.command}: {exc.message}", file=sys.stderr)
            return 1
        finally:
            await watch.stop()
    return 0
