"""The console's crash, seen from the operator's terminal (issue 25): a real
shell in tmux at 80x24 starts `sparktui demo`; an internal error inside the
running console (a timer's callback raises, armed by the `?` key through a
monkeypatch in a wrapper the shell runs: nothing in the product can be made
to fail on purpose) must leave the shell's prompt back, one line on the
terminal and no traceback, exit status 70, the traceback in
`<state_dir>/debug.log`, and what the operator typed while the console was
closing (a lane's name meant for its confirm field) never run by the shell.

The wrapper also makes the console's stop take WINDOW_S longer (a stop over a
slow SSH link does): the keys the test types land in that window, when the
terminal is restored and the process has not ended yet, the window where
they used to reach the login shell."""

from __future__ import annotations

import re
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .test_acceptance_tmux import ROOT, Terminal

WINDOW_S = 4.0
PS1 = "PROMPT$ "
EXIT = re.compile(r"^EXIT=(\d+)", re.MULTILINE)
WRAPPER = f"""
import asyncio, sys
from sparktui.service.cluster import ClusterService
from sparktui.tui.app import SparkTUI

def fault() -> None:
    raise RuntimeError("injected by the crash test")

def help_arms_the_fault(self) -> None:  # `?`: a timer whose callback raises
    self.set_timer(0.05, fault)

stop = ClusterService.stop
async def slow_stop(self) -> None:
    await asyncio.sleep({WINDOW_S})
    await stop(self)

SparkTUI.action_help = help_arms_the_fault
ClusterService.stop = slow_stop
from sparktui.cli.main import main
sys.exit(main(sys.argv[1:]))
"""

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is not installed (.ci/run installs it)")


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal(f"sparktui-crash-{id(tmp_path)}")
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PYTHONPATH": str(ROOT / "src"), "TERM": "xterm-256color",
           "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin", "PS1": PS1}
    term.start(["env", "-i", *(f"{k}={v}" for k, v in env.items()), "sh", "-i"], {})
    try:
        yield term
    finally:
        term.close()


@pytest.mark.timeout(300)
def test_an_internal_error_gives_the_prompt_back_and_drops_the_typeahead(
        shell: Terminal, tmp_path: Path, config_copy: Callable[..., Path]) -> None:
    t = shell
    state = tmp_path / "state"
    config = config_copy(lambda text: text.replace(
        'state_dir = "~/.local/state/sparktui"', f'state_dir = "{state}"', 1))
    assert str(state) in config.read_text()
    wrapper = tmp_path / "crashing.py"
    wrapper.write_text(WRAPPER)
    leaked = tmp_path / "LEAKED"
    t.wait("the shell's prompt", lambda s: PS1.strip() in s, timeout=30)
    t.type(f"{shlex.quote(sys.executable)} {wrapper} --config {config} demo; "
           "echo EXIT=$?")
    t.keys("Enter")
    t.wait("the console", lambda s: "8/8 online" in s, timeout=180)

    t.keys("?")
    t.wait("the terminal restored", lambda s: "8/8 online" not in s and PS1.strip() in s,
           timeout=30)
    t.type(f"touch {leaked}")  # typed while the console closes
    t.keys("Enter")
    screen = t.wait("the exit status", lambda s: EXIT.search(s) is not None, timeout=120)

    log = state / "debug.log"
    rows = [line for line in screen.splitlines() if line.strip()]
    said = [line for line in rows if "unexpected error" in line]
    assert EXIT.search(screen).group(1) == "70", screen  # type: ignore[union-attr]
    assert "Traceback" not in screen and "injected by the crash test" in screen, screen
    assert len(said) == 1 and said[0].startswith("sparktui demo: unexpected error: "
                                                 "RuntimeError: injected by the crash test"), screen
    text = log.read_text()
    assert "Traceback" in text and "RuntimeError: injected by the crash test" in text
    assert log.stat().st_mode & 0o777 == 0o600

    # the shell has its prompt and reads what is typed now; what was typed
    # while the console closed never ran
    t.wait("the prompt after the exit", lambda s: s.rstrip().endswith(PS1.rstrip()),
           timeout=10)
    t.type("echo ALIVE-$((6*7))")
    t.keys("Enter")
    t.wait("the shell answering", lambda s: "ALIVE-42" in s, timeout=10)
    time.sleep(0.5)
    assert not leaked.exists(), t.screen()
