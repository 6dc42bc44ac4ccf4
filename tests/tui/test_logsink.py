"""Issue 28 item 7: quitting the demo printed an aiohttp traceback from the
simulator and Home Assistant "connection refused" lines over the shell:
nothing configured logging, so records went to Python's last-resort handler
(swallowed while Textual ran, printed once it had restored the terminal).
While the console runs and what it started shuts down, records go to the
debug log, redacted; the command says in one line how many and where."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from sparktui.cli import demo_cmd
from sparktui.core.redact import register_secret
from sparktui.tui.logsink import logged_to_file

SECRET = "ha-token-7f3c9e1d2b"


def test_records_go_to_the_debug_log_redacted_never_to_the_terminal(tmp_path, capsys) -> None:
    register_secret(SECRET)
    root = logging.getLogger()
    before = list(root.handlers)
    path = tmp_path / "state" / "debug.log"
    with logged_to_file(path) as logged:
        try:
            raise ConnectionRefusedError(f"connect to 127.0.0.1:8123 refused ({SECRET})")
        except ConnectionRefusedError:
            logging.getLogger("aiohttp.server").exception("Error handling request")
        logging.getLogger("sparktui.adapters.homeassistant").info("not a warning")
    assert root.handlers == before
    assert capsys.readouterr().err == ""
    text = path.read_text()
    assert "Error handling request" in text and "Traceback" in text, text
    assert SECRET not in text and "not a warning" not in text, text
    assert logged.count == 1
    assert logged.summary("sparktui demo") == (
        f"sparktui demo: 1 warning(s) or error(s) logged while it ran or shut down: {path}")
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_the_demo_says_where_its_shutdown_logged_in_one_line(config_copy, tmp_path, capsys,
                                                             monkeypatch) -> None:
    state = tmp_path / "state"
    config = config_copy(lambda t: t.replace('state_dir = "~/.local/state/sparktui"',
                                             f'state_dir = "{state}"', 1))

    async def demo(args: argparse.Namespace, config: object) -> None:
        # the console closed; the simulator's HTTP server, shutting down, logs
        try:
            raise ConnectionResetError("Cannot write to closing transport")
        except ConnectionResetError:
            logging.getLogger("aiohttp.server").exception("Error handling request")

    monkeypatch.setattr(demo_cmd, "_demo", demo)
    args = argparse.Namespace(list_scenarios=False, config=Path(config), scenario=None,
                              speed=None, read_only=False)
    assert demo_cmd.run(args) == 0
    err = capsys.readouterr().err
    assert err.splitlines() == [f"sparktui demo: 1 warning(s) or error(s) logged while it ran "
                                f"or shut down: {state / 'debug.log'}"], err
    assert "Cannot write to closing transport" in (state / "debug.log").read_text()


def test_the_console_logs_to_the_debug_log_too(tmp_path, capsys, monkeypatch,
                                               config_copy) -> None:
    """`sparktui console` (F's leftover): a read-only console quit after its
    simulator died printed the service's connection errors over the shell."""
    from sparktui.cli import console_cmd
    from sparktui.core.config_load import load_config

    config = load_config(config_copy(lambda t: t.replace(
        'state_dir = "~/.local/state/sparktui"', f'state_dir = "{tmp_path / "state"}"')))

    class App:
        def run(self) -> None:  # what a service logs as its nodes go away at quit
            logging.getLogger("sparktui.watch.poller").warning("dgx1: connection refused")

    monkeypatch.setattr(console_cmd, "load", lambda args: config)
    monkeypatch.setattr(console_cmd, "resolve_endpoints", lambda c: None)
    monkeypatch.setattr(console_cmd, "ClusterService", lambda *a, **k: None)
    monkeypatch.setattr(console_cmd, "make_app", lambda *a, **k: App())
    args = argparse.Namespace(read_only=True, attached_only=False)
    assert console_cmd.run(args) == 0
    err = capsys.readouterr().err
    log = config.state_dir() / "debug.log"
    assert "connection refused" not in err
    assert err.strip() == (f"sparktui: 1 warning(s) or error(s) logged while it ran or shut "
                           f"down: {log}")
    assert "dgx1: connection refused" in log.read_text()
