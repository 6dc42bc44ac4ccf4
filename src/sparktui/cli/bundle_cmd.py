"""`sparktui bundle LANE|NODE [--since T]`: one incident bundle,
``<state_dir>/bundles/<time>-<lane-or-node>.tar.gz`` (ops/bundle.py); prints
its path and the summary's first lines."""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator

from sparktui.adapters.endpoints import EndpointError, resolve_endpoints
from sparktui.adapters.ssh import CommandResult
from sparktui.core.clock import SystemClock
from sparktui.core.config import Config
from sparktui.core.tomlschema import Range, number
from sparktui.ops.bundle import (
    DEFAULT_LINES,
    BundleResult,
    BundleSources,
    bundle_dir,
    check_subject,
    token_values,
    write_bundle,
)
from sparktui.ops.context import open_context
from sparktui.ops.journal import Journal
from sparktui.service.night import held_from_recordings
from sparktui.service.recording import night_path

from .ops_common import EXIT_OK, run_async
from .shiftlog_cmd import parse_since


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bundle", help="write an incident bundle of a lane or a node",
                       description="Collect every rank's last lines, the nodes' kernel "
                                   "journals, poll snapshots, the plan and guard verdicts, "
                                   "recipe, config (no token), commands and journal entries "
                                   "into <state_dir>/bundles/<time>-<lane-or-node>.tar.gz "
                                   "with SUMMARY.md on top. A node that does not answer "
                                   "contributes what the console recorded.")
    p.add_argument("subject", metavar="LANE|NODE")
    p.add_argument("--since", type=parse_since, default=None, metavar="T",
                   help="window start: 2h, 90m, 2026-11-29T22:00 (UTC); default: the "
                        "lane's last serve, else the last hour")
    p.add_argument("--lines", type=number(int, Range(1, 1_000_000)), default=DEFAULT_LINES,
                   metavar="N",
                   help=f"last lines per rank (default {DEFAULT_LINES})")
    p.set_defaults(func=lambda args: run_async("bundle", bundle, args))


async def bundle(config: Config, args: argparse.Namespace) -> int:
    check_subject(config, args.subject)  # before the cluster is asked anything
    bundle_dir(config.state_dir())
    try:
        endpoints = resolve_endpoints(config)
    except EndpointError as exc:  # nothing to ask: the record alone
        print(f"sparktui bundle: the cluster is not reachable ({exc}); bundling from the "
              f"recording and the journal", file=sys.stderr)
        clock, dark = SystemClock(), _Unreachable(str(exc))
        src = BundleSources(config=config, link=lambda node: dark,
                            journal=Journal.in_state_dir(config.state_dir(), clock),
                            clock=clock, state_dir=config.state_dir(),
                            secrets=token_values(config))
        return _report(await _write(src, args))
    extra = [endpoints.ha_token_file] if endpoints.simulated else []
    async with open_context(config, endpoints=endpoints) as ctx:
        src = BundleSources(config=config, link=ctx.link, journal=ctx.journal, clock=ctx.clock,
                            state_dir=config.state_dir(), secrets=token_values(config, extra),
                            snapshot=ctx.snapshot)
        result = await _write(src, args)
    return _report(result)


class _Unreachable:
    """A node link when no node can be asked: every command fails with why."""

    def __init__(self, why: str) -> None:
        self.why = why

    async def run(self, cmd: str, timeout: float) -> CommandResult:
        raise ConnectionError(self.why)

    async def read(self, cmd: str, timeout: float) -> CommandResult:
        raise ConnectionError(self.why)

    async def stream(self, cmd: str) -> AsyncIterator[bytes]:
        raise ConnectionError(self.why)
        yield b""  # an async generator, as NodeLink's stream is


async def _write(src: BundleSources, args: argparse.Namespace) -> BundleResult:
    now = src.clock.time()
    nights = sorted({night_path(src.state_dir, t) for t in (now - 86400, now)})
    held = held_from_recordings([p for p in nights if p.is_file()], src.clock)
    return await write_bundle(src, args.subject, held=held, since=args.since,
                              lines=max(1, args.lines))


def _report(result: BundleResult) -> int:
    inc = result.incident
    print(result.path)
    if inc.failure is not None:
        print(f"first fatal line: rank {inc.failure.rank}: {inc.failure.line}", file=sys.stderr)
    for missing in inc.missing:
        print(f"not collected: {missing}", file=sys.stderr)
    return EXIT_OK

