"""The `sparktui` command: a subcommand per `*_cmd.py` module in this package.

Each module exposes `register(subparsers)` and sets `func(args) -> int` on
its parser. Bad input files exit 2 with every problem listed (file:line: key:
message); usage errors exit 2 through argparse.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from pathlib import Path

from .. import __version__
from ..core.errors import InputError
from .output_guard import redacted_output


def default_config_path() -> Path:
    """--config, else $SPARKTUI_CONFIG, ./config.toml, ~/.config/sparktui/config.toml,
    else the config.toml shipped at the top of this source checkout."""
    if env := os.environ.get("SPARKTUI_CONFIG"):
        return Path(env)
    for candidate in (Path("config.toml"), Path("~/.config/sparktui/config.toml").expanduser()):
        if candidate.is_file():
            return candidate
    return Path(__file__).resolve().parents[3] / "config.toml"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or (``command`` given and known) one with only that
    sub-command registered, so a one-shot imports what it uses and nothing
    else (no textual, aiohttp or simulator for `check`, `fit`, `health` ...)."""
    parser = argparse.ArgumentParser(
        prog="sparktui",
        description="Night-shift console for a DGX Spark cluster. Without a command, "
                    "opens the console.")
    parser.add_argument("--config", type=Path, default=None,
                        help="config.toml (default: $SPARKTUI_CONFIG, ./config.toml, "
                             "~/.config/sparktui/config.toml, the shipped one)")
    parser.add_argument("--version", action="version", version=f"sparktui {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = _command_modules()
    module = f"{(command or '').replace('-', '_')}_cmd"
    wanted = [module] if module in modules else modules
    for name in wanted:
        importlib.import_module(f"{__package__}.{name}").register(sub)
    for sp in _subcommands(parser).values():
        sp.add_argument("--config", type=Path, default=argparse.SUPPRESS,
                        help="config.toml (see sparktui --help)")
    return parser


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _command_modules() -> list[str]:
    """The ``*_cmd`` modules of this package, by name (a directory listing: no import)."""
    return sorted(info.name for info in pkgutil.iter_modules([str(Path(__file__).parent)])
                  if info.name.endswith("_cmd"))


def _command_in(argv: list[str]) -> str | None:
    """The sub-command named on the command line: the first word that is
    neither an option nor the value of ``--config`` (None without one)."""
    words = iter(argv)
    for word in words:
        if word == "--config":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def main(argv: list[str] | None = None) -> int:
    """The entry point: any error nobody expected becomes one line plus a
    debug log (cli/crash.py), never a traceback."""
    argv = sys.argv[1:] if argv is None else argv
    with redacted_output():
        try:
            return _dispatch(argv)
        except Exception as exc:
            from . import crash
            return crash.report(exc, _command_in(argv), argv, default_config_path())


def _dispatch(argv: list[str]) -> int:
    parser = build_parser(_command_in(argv))
    args = parser.parse_args(argv)
    if args.config is None:
        args.config = default_config_path()
    func = getattr(args, "func", None)
    if func is None:
        console = _subcommands(parser).get("console")
        if console is None:
            parser.print_help()
            return 0
        args = console.parse_args([], namespace=args)
        func = args.func
    try:
        return int(func(args) or 0)
    except InputError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
