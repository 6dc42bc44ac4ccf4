"""`sparktui replay FILE [--speed X] [--from TIME]`: the console, read-only,
on a night the console recorded (``<state_dir>/recordings/night-*.jsonl.gz``),
with seek keys: space pause, , . one minute, [ ] ten minutes, a next alert."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from ..core.tomlschema import Range, number
from .common import load
from .shiftlog_cmd import parse_since

_OFFSET = re.compile(r"^\+(\d+(?:\.\d+)?)([smh])$")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="replay a recorded night in the console (read-only)",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", type=Path, metavar="FILE")
    p.add_argument("--speed", type=number(float, Range(0, 10_000, lo_open=True)), default=1.0,
                   metavar="X",
                   help="replay seconds per real second (default 1)")
    p.add_argument("--from", dest="start", default=None, metavar="TIME",
                   help="start at TIME: 2026-11-29T22:40 (UTC) or +90m after the start")
    p.set_defaults(func=run)


def start_time(text: str | None, first: float) -> float | None:
    if text is None:
        return None
    if m := _OFFSET.match(text.strip()):
        return first + float(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)]
    return parse_since(text)


def run(args: argparse.Namespace) -> int:
    from ..service.recording import Damage, read_recording
    from ..service.replay import ReplaySource
    from ..tui.replay import ReplayApp

    config = load(args)
    if not args.file.is_file():
        print(f"sparktui replay: {args.file}: no such recording", file=sys.stderr)
        return 2
    if not args.speed > 0:
        print("sparktui replay: --speed must be greater than 0", file=sys.stderr)
        return 2
    try:  # a malformed --from is refused before the file is read
        start_time(args.start, 0.0)
    except argparse.ArgumentTypeError as exc:
        print(f"sparktui replay: --from: {exc}", file=sys.stderr)
        return 2
    damage = Damage()
    try:
        events = list(read_recording(args.file, damage))
    except OSError as exc:
        print(f"sparktui replay: {args.file}: not a recording ({exc})", file=sys.stderr)
        return 2
    if damage:
        print(f"sparktui replay: {args.file}: {damage.describe()}", file=sys.stderr)
    if not events:
        print(f"sparktui replay: {args.file}: holds no event", file=sys.stderr)
        return 2
    start = start_time(args.start, events[0][0])
    source = ReplaySource(config, events, speed=args.speed, start=start)
    ReplayApp(config, source).run()
    return 0
