"""`sparktui replay FILE [--speed X] [--from TIME]`: the console, read-only,
on a night the console recorded (``<state_dir>/recordings/night-*.jsonl.gz``),
with seek keys: space pause, , . one minute, [ ] ten minutes, a next alert."""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.tomlschema import Range, number
from .common import load
from .shiftlog_cmd import parse_since

if TYPE_CHECKING:
    from ..service.recorded import Recorded

_OFFSET = re.compile(r"^\+(\d{1,9}(?:\.\d{1,6})?)([smh])$")
MAX_OFFSET_S = 7 * 86400.0
"""An offset past a week is past any night (400 digits would be infinity)."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="replay a recorded night in the console (read-only)",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", type=Path, metavar="FILE")
    p.add_argument("--speed", type=number(float, Range(0, 10_000, lo_open=True)), default=1.0,
                   metavar="X",
                   help="replay seconds per real second (default 1)")
    p.add_argument("--from", dest="start", type=from_flag, default=None, metavar="TIME",
                   help="start at TIME: 2026-11-29T22:40 (UTC) or +90m after the start")
    p.set_defaults(func=run)


def start_time(text: str | None, first: float) -> float | None:
    if text is None:
        return None
    if m := _OFFSET.match(text.strip()):
        offset = float(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)]
        if not offset <= MAX_OFFSET_S:
            raise argparse.ArgumentTypeError(f"{text!r} is more than a week after the start")
        return first + offset
    if text.strip().startswith("+"):
        raise argparse.ArgumentTypeError(f"not an offset: {text[:20]!r} (e.g. +90m, +2h, +30s)")
    return parse_since(text)


def from_flag(text: str) -> str:
    """``--from`` checked when the flags are read, before any file is."""
    start_time(text, 0.0)
    return text


def pick_session(sessions: list[Recorded], text: str | None
                 ) -> tuple[Recorded, float | None]:
    """The session and start a ``--from`` asks for: a time picks the last
    session that holds it (else the nearest), an offset counts from the last
    session's start; no ``--from``: the last session from its start."""
    last = sessions[-1]
    if text is None or _OFFSET.match(text.strip()):
        return last, start_time(text, last.times[0])
    t = start_time(text, last.times[0])
    assert t is not None
    holding = [s for s in sessions if s.times[0] <= t <= s.times[-1]]
    if holding:
        return holding[-1], t
    return min(sessions, key=lambda s: min(abs(s.times[0] - t), abs(s.times[-1] - t))), t


def _hm(t: float) -> str:
    return time.strftime("%H:%M:%SZ", time.gmtime(t))


def run(args: argparse.Namespace) -> int:
    from ..service.recorded import Damage, open_sessions
    from ..service.replay import ReplaySource
    from ..tui.replay import ReplayApp

    config = load(args)
    if not args.file.is_file():
        print(f"sparktui replay: {args.file}: no such recording", file=sys.stderr)
        return 2
    if not args.speed > 0:
        print("sparktui replay: --speed must be greater than 0", file=sys.stderr)
        return 2
    damage = Damage()
    try:
        sessions = open_sessions(args.file, damage)
    except OSError as exc:
        print(f"sparktui replay: {args.file}: not a recording ({exc})", file=sys.stderr)
        return 2
    if damage:
        print(f"sparktui replay: {args.file}: {damage.describe()}", file=sys.stderr)
    if not sessions:
        print(f"sparktui replay: {args.file}: holds no event", file=sys.stderr)
        return 2
    events, start = pick_session(sessions, args.start)
    if len(sessions) > 1:
        spans = ", ".join(f"{_hm(s.times[0])}-{_hm(s.times[-1])}" for s in sessions)
        print(f"sparktui replay: {args.file} holds {len(sessions)} sessions ({spans}); "
              f"replaying the one of {_hm(events.times[0])}-{_hm(events.times[-1])} "
              f"(--from TIME picks by recorded time)", file=sys.stderr)
    source = ReplaySource(config, events, speed=args.speed, start=start)
    said = damage.describe()
    ReplayApp(config, source, tune_gc=True).run()
    if damage.describe() != said:  # lines found damaged when the replay decoded them
        print(f"sparktui replay: {args.file}: {damage.describe()}", file=sys.stderr)
    return 0
