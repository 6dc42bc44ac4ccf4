"""`sparktui sentinel`: watch the cluster without a console, all night.

The console's service (poller, lane watches, serving canary, thrash
detector) as a long-running read-only process: one line per event on
stdout (the journal under systemd), one sentinel per state directory
(`<state_dir>/sentinel.pid`), a clean exit on SIGTERM or Ctrl-C.

`--install-unit` writes a systemd user unit instead and checks it with
`systemd-analyze verify` where that exists; then:

    systemctl --user daemon-reload
    systemctl --user enable --now sparktui-sentinel.service
    journalctl --user -u sparktui-sentinel -f
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from ..adapters.endpoints import EndpointError, resolve_endpoints
from ..adapters.exposition import ListenError
from ..core.advice import SENTINEL_UNIT
from ..core.config import Config
from ..core.errors import InputError, Problem
from ..ops.files import replace_file
from ..ops.private import make_dirs
from ..service.cluster import ClusterService
from ..service.sentinel import Sentinel, SentinelRunning, line_writer
from .common import load

UNIT_NAME = SENTINEL_UNIT
UNIT_MODE = 0o644
"""Whatever the umask: the unit names the commands systemd runs as this user,
so no one else may write it (its directory, when this makes it, is 0700)."""
VERIFY_TIMEOUT_S = 30.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sentinel", help="watch the cluster without a console (read-only, "
                                        "one line per event; systemd user service)",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--install-unit", action="store_true",
                   help=f"write the systemd user unit {UNIT_NAME} and verify it, then exit")
    p.add_argument("--unit-dir", type=Path, default=None,
                   help="where --install-unit writes (default: $XDG_CONFIG_HOME/systemd/user)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = load(args)
    if args.install_unit:
        return install_unit(config, args.unit_dir)
    try:
        endpoints = resolve_endpoints(config)
    except EndpointError as exc:
        print(f"sparktui sentinel: {exc}", file=sys.stderr)
        return 2
    service = ClusterService(config, endpoints=endpoints)
    emit = line_writer("JOURNAL_STREAM" in os.environ, service.clock,
                       lambda text: print(text, flush=True))
    sentinel = Sentinel(config, service, emit=emit)
    try:
        asyncio.run(_watch(sentinel))
    except (SentinelRunning, ListenError) as exc:
        print(f"sparktui sentinel: {exc}", file=sys.stderr)
        return 1
    return 0


async def _watch(sentinel: Sentinel) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    await sentinel.run(stop)


# -- the systemd user unit -------------------------------------------------------


def unit_text(config: Config, python: str) -> str:
    """The unit: this interpreter, this config, restarted if it dies. The Home
    Assistant token stays where the config says (env or its 0600 file): an
    ``Environment=`` line here would put it in a world-readable file."""
    argv = [python, "-m", "sparktui", "--config", str(config.path.resolve()), "sentinel"]
    return "\n".join([
        "# Written by `sparktui sentinel --install-unit`.",
        "[Unit]",
        "Description=sparktui sentinel: watches the DGX Spark cluster without a console",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        "Type=simple",
        "ExecStart=" + " ".join(_systemd_quote(a) for a in argv),
        "Environment=PYTHONUNBUFFERED=1",
        "KillSignal=SIGTERM",
        "TimeoutStopSec=30",
        "Restart=on-failure",
        "RestartSec=15",
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ])


def _systemd_quote(arg: str) -> str:
    """One ExecStart word: double-quoted with backslash escapes, ``%`` doubled
    (systemd.service(5) "Command lines"; systemd.unit(5) specifiers)."""
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    if any(c in "\n\r" for c in arg):
        raise InputError([Problem(Path(arg), None, "path",
                                  "a newline cannot be written into a systemd unit")])
    return f'"{escaped}"' if escaped != arg or any(c.isspace() for c in arg) or not arg \
        else arg


def default_unit_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user"


def install_unit(config: Config, unit_dir: Path | None) -> int:
    path = (unit_dir or default_unit_dir()) / UNIT_NAME
    make_dirs(path.parent)
    replace_file(path, unit_text(config, sys.executable), UNIT_MODE)
    print(f"wrote {path}")
    ok, report = verify_unit(path)
    if report:
        print(report)
    if not ok:
        return 1
    print("enable it with:\n  systemctl --user daemon-reload\n"
          f"  systemctl --user enable --now {UNIT_NAME}\n"
          f"  journalctl --user -u {UNIT_NAME.removesuffix('.service')} -f")
    return 0


def verify_unit(path: Path) -> tuple[bool, str]:
    """`systemd-analyze verify` where it exists: (passed, what it said). As a
    user unit first; where no user manager can start (a container, a session
    without lingering), by the system manager's rules, which read it alike."""
    tool = shutil.which("systemd-analyze")
    if tool is None:
        return True, "systemd-analyze not found: unit not verified"
    for mode in (["--user"], []):
        try:
            done = subprocess.run([tool, *mode, "verify", str(path)], capture_output=True,
                                  text=True, timeout=VERIFY_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return True, (f"systemd-analyze verify did not finish in {VERIFY_TIMEOUT_S:g} s: "
                          "unit not verified")
        said = (done.stdout + done.stderr).strip()
        if mode and "Failed to initialize manager" in said:
            continue
        how = "" if mode else " (no user manager here: checked by the system manager's rules)"
        if done.returncode != 0:
            return False, f"systemd-analyze verify failed (exit {done.returncode}){how}:\n{said}"
        return True, f"systemd-analyze verify: ok{how}" + (f"\n{said}" if said else "")
    return True, "systemd-analyze could not start a manager: unit not verified"
