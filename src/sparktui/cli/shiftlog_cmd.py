"""`sparktui shiftlog [--since T]`: the journal as a markdown night log."""

from __future__ import annotations

import argparse
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from sparktui.core.clock import SystemClock
from sparktui.core.errors import InputError, Problem
from sparktui.ops.journal import Journal, clock_of
from sparktui.ops.shiftlog import render

from .common import load

MAX_AGO_S = 10 * 366 * 86_400.0
_AGO = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")


def parse_since(text: str, now: float | None = None) -> float:
    """``12h`` / ``90m`` (ago), ``2026-11-29T22:00`` or ``2026-11-29`` (UTC) -> epoch s."""
    text = text.strip()
    now = time.time() if now is None else now
    if len(text) > 40:  # 400 digits parse to infinity
        raise argparse.ArgumentTypeError(f"not a time: {text[:20]!r}... is too long")
    if m := _AGO.match(text):
        ago = float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
        if not ago <= MAX_AGO_S:
            raise argparse.ArgumentTypeError(f"--since {text!r} is more than ten years ago")
        return now - ago
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a time: {text!r} (e.g. 12h, 2026-11-29T22:00, 2026-11-29)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def parse_window(text: str) -> tuple[float | None, float | None]:
    """``--since``: (a UTC time, None) or (None, seconds ago): an age is
    measured back from each clock's own now (ops/shiftlog.py `render`), a time
    is read on each clock as its own UTC."""
    if _AGO.match(text.strip()):
        now = time.time()
        return None, now - parse_since(text, now)
    return parse_since(text), None


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("shiftlog", help="render the journal as a markdown night log",
                       description="Boots with phases, durations and KV pool; failures with "
                                   "the first fatal line; power cycles, stops, refusals, "
                                   "overrides and what is left unfinished.")
    p.add_argument("--since", type=parse_window, default=(None, None), metavar="T",
                   help="only workflows begun since T: 12h, 90m (ago, on each entry's own "
                        "clock), 2026-11-29T22:00 (UTC)")
    p.add_argument("--output", "-o", default=None, help="write to this file instead of stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = load(args)
    out = _open_output(args.output) if args.output else None  # before any work
    journal = Journal.in_state_dir(config.state_dir())
    since, ago = args.since
    text = render(journal.entries(), since=since, ago=ago, now=time.time(),
                  clock=clock_of(SystemClock()))
    if out is None:
        sys.stdout.write(text)
        return 0
    try:
        with out:
            out.write(text)
    except OSError as exc:
        raise _output_error(args.output, exc) from None
    return 0


def _open_output(path: str) -> TextIO:
    """``-o PATH`` opened for writing, or InputError saying why it cannot be
    (a missing folder, a directory, a name too long) before the journal is read."""
    try:
        if Path(path).is_dir():
            raise InputError([Problem(Path(path), None, "--output", "is a directory -> give "
                                                                    "a file name")])
        return open(path, "w")  # closed by the caller's with
    except OSError as exc:
        raise _output_error(path, exc) from None


def _output_error(path: str, exc: OSError) -> InputError:
    why = exc.strerror or type(exc).__name__
    return InputError([Problem(Path(path), None, "--output", f"cannot write: {why}")])
