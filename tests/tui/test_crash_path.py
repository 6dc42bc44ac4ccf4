"""An error nobody caught inside the running console (a key's handler, a
timer, a worker that exits on error) closes it the way the README promises:
`run_async` raises it once the terminal is restored (cli/crash.py then prints
one line, writes debug.log and exits 70), and Textual's own traceback, with
every frame's locals, is not printed. This pins the one Textual internal the
console overrides (`App._handle_exception`, docs/UPSTREAM.md): if Textual
stops calling it, the error no longer reaches `crashed` and these fail.
The real terminal's side (prompt back, typed keys dropped) is
tests/tui/test_crash_tmux.py."""

from __future__ import annotations

import asyncio
import os
import pty
import sys
from typing import Any

import pytest
from textual.pilot import Pilot

from sparktui.cli import crash
from sparktui.tui.app import SparkTUI

from .harness import build


class InjectedFault(Exception):
    pass


def _raise() -> None:
    raise InjectedFault("the test's fault")


async def _raise_later() -> None:
    await asyncio.sleep(0)
    _raise()


def handler(app: SparkTUI) -> None:
    _raise()


def timer(app: SparkTUI) -> None:
    app.set_timer(0.01, _raise)


def interval(app: SparkTUI) -> None:
    app.set_interval(0.01, _raise)


def worker(app: SparkTUI) -> None:
    app.run_worker(_raise_later(), exit_on_error=True)


@pytest.mark.parametrize("where", [handler, timer, interval, worker])
async def test_an_uncaught_error_is_raised_by_run_async_and_not_printed(
        where: Any, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    c = build()
    monkeypatch.setattr(SparkTUI, "action_help", where)

    async def press(pilot: Pilot[None]) -> None:
        await pilot.pause(0.2)
        await pilot.press("question_mark")
        for _ in range(100):  # until the app has closed
            if c.app.crashed is not None:
                return
            await asyncio.sleep(0.05)

    with pytest.raises(InjectedFault, match="the test's fault"):
        await asyncio.wait_for(c.app.run_async(headless=True, size=(80, 24),
                                               auto_pilot=press), 60)
    assert isinstance(c.app.crashed, InjectedFault)
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err and "InjectedFault" not in out + err, (out, err)


async def test_run_test_still_raises_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pilot tests keep failing on an app error (Textual keeps it for them)."""
    c = build()
    monkeypatch.setattr(SparkTUI, "action_help", handler)
    with pytest.raises(InjectedFault):
        async with c.app.run_test(size=(80, 24)) as pilot:
            await pilot.press("question_mark")
            await pilot.pause(0.2)


def test_what_was_typed_and_not_read_is_discarded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lane's name typed as the console closed does not reach the shell."""
    leader, follower = pty.openpty()
    try:
        os.write(leader, b"glm53-flash-eugr-2x\r")
        with os.fdopen(os.dup(follower), "r") as stdin:
            monkeypatch.setattr(sys, "stdin", stdin)
            crash.discard_typeahead()
        os.set_blocking(follower, False)
        with pytest.raises(BlockingIOError):
            os.read(follower, 100)
    finally:
        os.close(leader)
        os.close(follower)
