"""`sparktui logs LANE [--rank N] [-f]`: one rank's log with the boot phases
marked (phase changes, shard progress with ETA, KV pool) and fatal lines
flagged; ``-f`` follows (resuming after a dropped connection)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from ..adapters.endpoints import EndpointError, resolve_endpoints
from ..adapters.ssh import Fleet
from ..core.clock import Clock, SystemClock
from ..core.config import Config
from ..core.logsig import Kind, Phase, Severity, clean, split_timestamp
from ..core.phases import PhaseTracker
from ..core.tomlschema import Range, number
from ..watch.follower import LogFollower, running_check
from ..watch.readiness import discover_lane
from .common import load

FATAL_MARK = "!!"
PHASE_MARK = "=="
PROGRESS_MARK = ">>"


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


class Annotator:
    """Turns raw log lines into printable lines plus phase/progress markers."""

    def __init__(self, lane: str, clock: Clock) -> None:
        self.clock = clock
        # a log viewer never declares a stall: the window is infinite
        self.tracker = PhaseTracker(lane, stall_after_s=float("inf"), start=clock.monotonic())
        self.fatal_seen = False

    def annotate(self, rank: int, raw: str) -> list[str]:
        tr = self.tracker
        before = tr.phase
        failed_before = tr.failure is not None
        ev = tr.feed(rank, raw, self.clock.monotonic())
        ts, body = split_timestamp(raw)
        when = f"{ts[11:19]} " if ts else ""
        text = clean(body)
        out = []
        if ev is not None and (ev.fatal or (tr.failure is not None and not failed_before)):
            out.append(f"{FATAL_MARK} {when}{text}")
        else:
            out.append(f"   {when}{text}")
        if tr.failure is not None and not failed_before:
            self.fatal_seen = True
            out.append(f"{FATAL_MARK} lane failed on rank {tr.failure.rank} "
                       f"({tr.failure.kind.value})")
        elif tr.phase is not before and tr.phase is not Phase.FAILED:
            out.append(f"{PHASE_MARK} {tr.summary()}")
        elif ev is not None and ev.severity is Severity.PROGRESS and ev.kind is Kind.LOAD_SHARD:
            lp = tr.load_progress()
            if lp is not None:
                out.append(f"{PROGRESS_MARK} {lp.describe()}")
        return out


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
        ranks = {r.rank: r for r in await discover_lane(links, lane)}  # type: ignore[arg-type]
        target = ranks.get(rank)
        if target is None:
            known = ", ".join(str(r) for r in sorted(ranks)) or "none"
            print(f"sparktui logs: lane {lane!r} has no rank {rank} (ranks found: {known})",
                  file=sys.stderr)
            return 1
        link = fleet.get(target.node)
        follower = LogFollower.for_container(
            link, target.container, rank, follow=follow, tail=tail,
            still_running=running_check(link, target.container) if follow else None,
            clock=clock)
        notes = Annotator(lane, clock)
        print(f"{PHASE_MARK} {lane} rank {rank} on {target.node} ({target.container})")
        async for batch in follower.batches():
            out = []
            for line in batch:
                out += notes.annotate(rank, line.raw)
            sys.stdout.write("\n".join(out) + "\n")
            sys.stdout.flush()
    return 0
