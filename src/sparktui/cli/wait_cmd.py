"""`sparktui wait LANE [--stall-after DURATION]`: block while the lane's boot
makes progress. Exit 0 when ready (stage times printed), 1 when failed (rank,
first fatal line and its root cause), 2 when stalled (last progress seen and
which ranks still run). There is no total timeout; Ctrl-C detaches and leaves
the lane running. The boot is watched by `watch/lane.LaneWatcher`."""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Callable

from ..adapters.endpoints import EndpointError, resolve_endpoints
from ..adapters.ssh import Fleet
from ..core.clock import Clock, SystemClock
from ..core.config import Config
from ..core.errors import InputError
from ..core.loadprogress import format_duration
from ..core.logsig import Phase
from ..core.recipe import Recipe
from ..core.recipe_load import load_recipe
from ..ops.journal import Journal
from ..ops.stop_intents import StopIntents
from ..watch.lane import (
    BarRedrawn,
    LaneEvent,
    LaneWatcher,
    LinesArrived,
    MemoryRead,
    PhaseChanged,
)
from ..watch.oom import OomWatch, lane_load_plan
from ..watch.readiness import Outcome, WaitResult, discover_lane
from .common import load

EXIT = {Outcome.READY: 0, Outcome.FAILED: 1, Outcome.STALLED: 2, Outcome.STOPPED: 1}
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?$")


STALL_MIN_S = 1.0
STALL_MAX_S = 86_400.0
"""A stall window's bounds (console.stall_after_s has the same upper bound)."""


def parse_duration(text: str) -> float:
    """``900``, ``900s``, ``15m``, ``1h30m`` -> seconds (> 0)."""
    m = _DURATION.match(text.strip())
    if m is None or not any(m.groups()):
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 900, 15m, 1h30m)")
    if len(text) > 32:  # 400 digits parse to infinity
        raise argparse.ArgumentTypeError(f"not a duration: {text[:20]!r}... is too long")
    h, mins, s = (float(g) if g else 0.0 for g in m.groups())
    seconds = h * 3600 + mins * 60 + s
    if not STALL_MIN_S <= seconds <= STALL_MAX_S:  # NaN/inf fail too
        raise argparse.ArgumentTypeError(
            f"the stall window {text!r} must be {STALL_MIN_S:g} s to {STALL_MAX_S:g} s (a "
            f"shorter one calls a healthy lane stalled between two log lines)")
    return seconds


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "wait", help="wait for a lane's boot: ready, failed or stalled (no total timeout)",
        description="Block while LANE's boot makes progress. Exit 0 when the endpoint is "
                    "ready, 1 on the first fatal line or a rank's exit, 2 when no progress "
                    "arrived for the stall window.")
    p.add_argument("lane")
    p.add_argument("--stall-after", type=parse_duration, default=None, metavar="DURATION",
                   help="stalled after this long without progress (default: console."
                        "stall_after_s from config)")
    p.add_argument("--no-first-token", action="store_true",
                   help="ready at /v1/models, without the one-token completion")
    p.add_argument("--quiet", action="store_true", help="print only the verdict")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = load(args)
    stall = args.stall_after if args.stall_after is not None else config.console.stall_after_s
    return asyncio.run(wait_lane(config, args.lane, stall_after_s=stall,
                                 first_token=not args.no_first_token, quiet=args.quiet))


async def wait_lane(
    config: Config,
    lane: str,
    *,
    stall_after_s: float,
    first_token: bool = True,
    quiet: bool = False,
    clock: Clock | None = None,
    poll_s: float = 1.0,
) -> int:
    try:
        endpoints = resolve_endpoints(config)
    except EndpointError as exc:
        print(f"sparktui wait: {exc}", file=sys.stderr)
        return 1
    async with Fleet.from_config(config, endpoints, clock=clock) as fleet:
        links = {name: fleet.get(name) for name in config.nodes}
        ranks = await discover_lane(links, lane)  # type: ignore[arg-type]
        if not ranks:
            print(f"{lane}: failed: no rank containers labelled sparktui.lane={lane}")
            return 1
        rank0 = next((r for r in ranks if r.rank == 0), ranks[0])
        if not quiet:
            where = ", ".join(f"r{r.rank}@{r.node}" for r in ranks)
            print(f"{lane}: watching {len(ranks)}/{rank0.nranks} rank(s) ({where}); "
                  f"stalled after {format_duration(stall_after_s)} without progress")
            if rank0.rank != 0 or rank0.port is None:
                print(f"{lane}: warning: no rank 0 with a sparktui.port label; the endpoint "
                      "cannot be probed, so the wait can only end failed or stalled")
        watch = LaneWatcher(
            lane, ranks, links, endpoints.node(rank0.node).api_host,
            stall_after_s=stall_after_s, clock=clock or SystemClock(), poll_s=poll_s,
            first_token=first_token,
            stop_intent=StopIntents(Journal.in_state_dir(config.state_dir())).from_now(),
        )
        if not quiet:
            watch.subscribe(_phase_printer(watch))
        if (load := lane_load_plan(config, _recipe(config, lane),
                                   [r.node for r in ranks])) is not None:
            watch.subscribe(memory_to(OomWatch(
                lane, ranks, watch.tracker, load, watch.clock,
                lambda w: print(f"{lane}: PREDICTED OOM: {w.message()}", flush=True)).on_memory))
        result = await watch.run()
    print(describe(result))
    return EXIT[result.outcome]


def memory_to(on_memory: Callable[[str, int], None]) -> Callable[[LaneEvent], None]:
    """The watcher's memory reads handed to ``on_memory(node, MemAvailable KiB)``."""

    def on_event(event: LaneEvent) -> None:
        if isinstance(event, MemoryRead):
            on_memory(event.node, event.available_kib)

    return on_event


def _phase_printer(watch: LaneWatcher) -> Callable[[LaneEvent], None]:
    """Prints a status line when the lane's phase changes, and during the
    weight load at every further tenth of the shards (with the ETA)."""
    last: list[tuple[Phase, int] | None] = [None]

    def on_event(event: LaneEvent) -> None:
        if not isinstance(event, LinesArrived | PhaseChanged | BarRedrawn):
            return
        tr = watch.tracker
        if tr.phase is Phase.FAILED:
            return
        lp = tr.load_progress() if tr.phase is Phase.LOADING else None
        state = (tr.phase, int(lp.fraction * 10) if lp else -1)
        if state != last[0]:
            last[0] = state
            print(f"  [{format_duration(watch.clock.monotonic() - tr.start)}] {tr.summary()}",
                  flush=True)

    return on_event


def describe(result: WaitResult) -> str:
    if result.outcome is Outcome.READY:
        stages = ", ".join(f"{k} {format_duration(v)}" for k, v in result.stages.items())
        return f"{result.lane}: ready ({stages})"
    if result.outcome is Outcome.FAILED and result.failure is not None:
        f = result.failure
        lines = [f"{result.lane}: failed on rank {f.rank}: {f.line}"]
        if f.cause:
            lines.append(f"    cause: {f.cause}")
        lines += [f"    | {c}" for c in f.context[-5:]]
        lines += [f"    (not read: {u})" for u in result.unread]
        if result.port_taken:
            lines.append(f"    {result.port_taken}")
        return "\n".join(lines)
    text = f"{result.lane}: {result.outcome.value}; last progress: {result.last_progress}"
    if result.outcome is Outcome.STALLED:
        ranks = result.ranks_text()
        text += (f"\n    ranks {ranks}" if ranks else "") + (
            f"\n    wait does not stop anything: the ranks keep running; "
            f"`sparktui stop {result.lane}` stops them")
    return text


def _recipe(config: Config, lane: str) -> Recipe | None:
    """The lane's recipe (same name), for the OOM prediction; None when absent."""
    try:
        return load_recipe(config, lane)
    except InputError:
        return None
