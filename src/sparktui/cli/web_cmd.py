"""`sparktui web`: the console, read-only, in a browser (textual-serve), for
whoever is not on the SSH session. Each browser session is its own
``sparktui console --read-only --attached-only`` process attached to the
running sentinel, so a browser adds no polling of the nodes; without a
sentinel the view refuses to start (a session opened while the sentinel
restarts shows that it is away and waits for it). It listens on loopback
unless a token is configured ([web] token_env or token_file, mode 0600, like
the Home Assistant token); a browser then opens ``http://HOST:PORT/?token=...``
once."""

from __future__ import annotations

import argparse
import shlex
import sys

from ..adapters.homeassistant import TokenError, TokenMissing, load_token
from ..adapters.webview import ConsoleWebServer, token_checker
from ..core.errors import InputError, Problem
from ..core.listen import Listen, parse_listen
from ..service.sentinel import running_sentinel
from .common import load


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("web", help="the read-only console in a browser (textual-serve)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--listen", metavar="HOST:PORT", default=None,
                   help="where to serve (default: [web] listen, 127.0.0.1:8765); an address "
                        "outside loopback needs the [web] token")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = load(args)
    try:
        listen: Listen = parse_listen(args.listen or config.web.listen)
    except ValueError as exc:
        raise InputError([Problem(config.path, None, "--listen" if args.listen else
                                  "web.listen", str(exc))]) from None
    try:
        token = load_token(config.web.token_env, config.web.token_file, what="web token")
    except TokenMissing as exc:
        if not listen.loopback:
            print(f"sparktui web: {listen} is not a loopback address and there is no token "
                  f"({exc}): refusing to serve the console to the network without one",
                  file=sys.stderr)
            return 2
        token = None
    except TokenError as exc:  # a token meant but not usable: never served without it
        print(f"sparktui web: {exc}", file=sys.stderr)
        return 2
    pid = running_sentinel(config.state_dir())
    if pid is None:
        print(f"sparktui web: no sentinel watches {config.state_dir()}: start `sparktui "
              "sentinel` first (each browser session attaches to it instead of polling the "
              "nodes)", file=sys.stderr)
        return 2
    command = shlex.join([sys.executable, "-m", "sparktui", "--config",
                          str(config.path.resolve()), "console", "--read-only",
                          "--attached-only"])
    server = ConsoleWebServer(command, listen, title=f"sparktui · {config.path.name}",
                              check_token=token_checker(token.header()) if token else None)
    server.serve()
    return 0
