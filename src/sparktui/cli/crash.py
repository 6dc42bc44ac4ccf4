"""The last line of defence of the `sparktui` command: an error nobody
expected becomes one clear line on stderr plus a pointer to a debug log (in
the state dir) that holds the traceback — never a traceback on the terminal,
never a raw exception repr, never a secret (everything is redacted).

What was typed while the command ran and was not read yet (a lane's name
going into the console's confirm field as it closed) is discarded: meant for
the command, it would otherwise reach the login shell as a command line."""

from __future__ import annotations

import contextlib
import os
import sys
import termios
import time
import traceback
from pathlib import Path

from ..core.config import ConsoleConfig
from ..core.config_load import load_config
from ..core.errors import OperatorError, describe_error
from ..core.redact import redact
from ..core.terminal import strip_controls
from ..ops.private import open_private, private_dir

DEBUG_LOG = "debug.log"


def report(exc: BaseException, command: str | None, argv: list[str],
           default_config: Path) -> int:
    """Print one line for `exc` and write its traceback to the debug log; exit code."""
    prog = f"sparktui {command}" if command else "sparktui"
    if isinstance(exc, OperatorError):
        print(f"{prog}: {strip_controls(redact(str(exc)))}", file=sys.stderr)
        return 1
    log = _write_log(exc, prog, _state_dir(argv, default_config))
    where = f"details in {log}" if log else "no debug log could be written"
    what = describe_error(exc, with_type=True)
    discard_typeahead()
    print(f"{prog}: unexpected error: {strip_controls(what)} ({where})", file=sys.stderr)
    return 70


def discard_typeahead() -> None:
    """Drop what waits unread on stdin, if stdin is a terminal."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, ValueError, OSError):  # no stdin, or not a real file
        return
    if os.isatty(fd):
        with contextlib.suppress(termios.error, OSError):
            termios.tcflush(fd, termios.TCIFLUSH)


def _state_dir(argv: list[str], default_config: Path) -> Path | None:
    """The state dir of the config the command was given, if it loads."""
    config = default_config
    for i, arg in enumerate(argv):
        if arg == "--config" and i + 1 < len(argv):
            config = Path(argv[i + 1])
        elif arg.startswith("--config="):
            config = Path(arg.partition("=")[2])
    try:
        return load_config(config).state_dir()
    except Exception:  # any config fault: the default dir
        return None


def _write_log(exc: BaseException, prog: str, state_dir: Path | None) -> Path | None:
    text = "".join(traceback.format_exception(exc))
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for folder in (state_dir, Path(ConsoleConfig().state_dir).expanduser()):
        if folder is None:
            continue
        path = folder / DEBUG_LOG
        try:
            private_dir(folder)
            fd = open_private(path, os.O_WRONLY | os.O_APPEND)
            with os.fdopen(fd, "a", encoding="utf-8") as f:
                f.write(f"--- {stamp} {prog} (pid {os.getpid()})\n{redact(text)}\n")
            return path
        except OSError:
            continue
    return None
