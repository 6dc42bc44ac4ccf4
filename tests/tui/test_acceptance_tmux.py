"""Acceptance: the real console (`sparktui demo`, its own process) in a real
terminal (tmux, 80x24), driven by keys alone through the long-prompt night:
the palette's first step (serve the scenario's lane) -> follow -> trigger the
long prompt -> the alert line, nothing covered -> `!`: the top alert's next
step -> recover the starved node by typing its name -> acknowledge -> the node
back online -> stop the lane -> quit. Every assertion reads the captured
screen."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LANE = "glm53-mxfp4-fp8-4x-r39-196k"
SPEED = 200.0
"""Fast enough for a CI run, slow enough that ranks started a real second
apart still meet at NCCL init (at 600x a loaded host made them miss)."""
CONNECT_TIMEOUT_S = 3.0
"""[ssh] connect_timeout_s for this run (shipped: 10 s). SSH timeouts are real
seconds whatever the simulator's speed: the recover and stop previews probe
the starved nodes, whose sshd accepts and never answers, and each waited the
whole login budget, twice (~20 s a confirm). 3 s is the shipped
probe_timeout_s, what a healthy shell already gets to answer."""
POLL_S = 0.1
"""How often a wait reads the pane."""
SETTLE_S = 0.2
"""A matching screen is read again this much later until it stops changing
(the frame that matched may still be painting)."""

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is not installed (.ci/run installs it)")


class Terminal:
    """One tmux session on a private server socket."""

    def __init__(self, socket: str) -> None:
        self.socket = socket
        self.pid = 0

    def tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", self.socket, *args], check=check,
                              capture_output=True, text=True, timeout=30)

    def start(self, command: list[str], env: dict[str, str]) -> None:
        self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "console", "-x", "80",
                  "-y", "24", "env", *(f"{k}={v}" for k, v in env.items()), *command)
        self.pid = int(self.tmux("display-message", "-p", "-t", "console",
                                 "#{pane_pid}").stdout.strip())
        """The console's process (env execs it): ended by pid at teardown, since
        a console whose terminal vanished does not always notice."""

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)
        end = time.monotonic() + 15
        while time.monotonic() < end and _running(self.pid):
            time.sleep(0.2)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self.tmux("kill-server", check=False)


    def alive(self) -> bool:
        return self.tmux("has-session", "-t", "console", check=False).returncode == 0

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "console").stdout

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "console", *keys)
        time.sleep(POLL_S)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", "console", "-l", text)
        time.sleep(POLL_S)

    def wait(self, what: str, predicate: Callable[[str], bool], timeout: float = 120.0) -> str:
        end = time.monotonic() + timeout
        text = ""
        while time.monotonic() < end:
            if not self.alive():
                raise AssertionError(f"the console exited while waiting for {what}:\n{text}")
            text = self.screen()
            if predicate(text):  # let the frame that matched finish painting (a
                settled = self.settled(text)  # notice that matched may be gone by then)
                return settled if predicate(settled) else text
            time.sleep(POLL_S)
        raise AssertionError(f"not on screen after {timeout:.0f} s: {what}\n{text}")

    def settled(self, text: str) -> str:
        """The screen once two reads SETTLE_S apart agree (at most 5 reads)."""
        for _ in range(5):
            time.sleep(SETTLE_S)
            text, before = self.screen(), text
            if text == before:
                break
        return text


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def terminal(tmp_path: Path, config_copy: Callable[..., Path]) -> Iterator[Terminal]:
    term = Terminal(f"sparktui-accept-{os.getpid()}")
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PYTHONPATH": str(ROOT / "src"), "TERM": "xterm-256color",
           "LANG": "C.UTF-8", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    config = config_copy(lambda text: text.replace(
        "\nconnect_timeout_s = 10.0", f"\nconnect_timeout_s = {CONNECT_TIMEOUT_S:g}", 1))
    assert f"connect_timeout_s = {CONNECT_TIMEOUT_S:g}" in config.read_text()
    term.start([sys.executable, "-m", "sparktui", "--config", str(config),
                "demo", "--scenario", "long-prompt", "--speed", f"{SPEED:g}"], env)
    try:
        yield term
    finally:
        term.close()


def lines(screen: str) -> list[str]:
    return screen.splitlines()


def starved(screen: str) -> list[str]:
    return [line.split()[1] for line in lines(screen)
            if line.startswith("│ dgx") and "STARVED" in line]


@pytest.mark.timeout(1500)
def test_long_prompt_night_from_the_keyboard(terminal: Terminal) -> None:
    t = terminal
    t.wait("eight nodes online", lambda s: "8/8 online" in s, timeout=180)

    # the palette says which lane the night needs first, and serves it: the
    # cluster picker, its own cluster (refused by fit), override
    t.keys(":")
    t.wait("the palette, the scenario's step first",
           lambda s: f"demo: long prompt 1/2 — serve {LANE} first" in s)
    t.type("long prompt 1/2")
    t.wait("the step offered", lambda s: "the 22:45 lane (196K context)" in s)
    t.keys("Down", "Enter")
    t.wait("the cluster picker with verdicts",
           lambda s: "on which cluster?" in s and ("REFUSED" in s or "OVERRIDABLE" in s
                                                   or "PASS" in s),
           timeout=120)
    t.keys("Enter")
    screen = t.wait("the fit refusal", lambda s: "REFUSED: Serve" in s
                    and "o: override fit" in s, timeout=60)
    assert "o: override fit" in screen, screen
    t.keys("o")
    t.wait("the typed confirm", lambda s: f"type {LANE} to confirm" in s, timeout=90)
    t.type(LANE)
    t.keys("Enter")
    t.wait("the serve started", lambda s: "serve" in s and "started" in s)

    # follow it: the Lanes pane, then the boot log following
    t.keys("2")
    t.wait("the lane serving", lambda s: LANE[:20] in s and "serving" in s, timeout=400)
    # the serve's own end ("done: serving on ... · serve LANE", its verdict
    # first), before the prompt: said later, it replaced the "sent a
    # 150,000-token prompt" notice before a read saw it
    t.wait("the serve done", lambda s: "done: serving on" in s)
    t.keys("3")
    t.wait("the boot log following", lambda s: "following" in s)

    # the trigger from the palette
    t.keys(":")
    t.wait("the palette", lambda s: "Search for commands" in s)
    t.type(f"demo: send the 150K prompt to {LANE}")
    # the entry's own help line (the typed query alone also reads "send the 150K prompt")
    t.wait("the demo trigger offered", lambda s: "150,000-token request" in s)
    t.keys("Down", "Enter")  # the best match first: highlight it, run it
    # the 196k lane's envelope is unmeasured: the prompt-length guard refuses it,
    # and the operator reproducing the incident overrides it by typing the name
    t.wait("the prompt-length refusal", lambda s: "o: override prompt-length" in s, timeout=60)
    t.keys("o")
    t.wait("the typed confirm", lambda s: f"type {LANE} to confirm" in s, timeout=60)
    t.type(LANE)
    t.keys("Enter")
    t.wait("the prompt sent", lambda s: "150,000-token prompt" in s)

    # the alert line: the thrash, in its own row under the header, nothing covered
    t.keys("1")
    screen = t.wait("a node thrashing", lambda s: "STARVED" in lines(s)[0]
                    and lines(s)[1].lstrip().startswith(("THRASH", "FATAL"))
                    and bool(starved(s)), timeout=400)
    rows = lines(screen)
    assert "sparktui" in rows[0] and "STARVED" in rows[0], screen  # the header shows
    assert all(f"│ dgx{i}" in screen for i in range(1, 9)), screen  # every node row is whole
    # the alert says so in its own row: elsewhere THRASH is only a Risk cell
    assert all(line.startswith("│ dgx") for line in rows[2:] if "THRASH" in line), screen
    assert "a:ack" in rows[1], screen
    assert any(line.startswith("╰") for line in rows), screen  # the pane's frame is intact

    node = starved(screen)[0]

    # the alerts list: the top alert whole, its next step readable at 80x24
    t.keys("!")
    screen = t.wait("the alerts list", lambda s: "a ack  b bundle" in s)
    marked = [line for line in lines(screen) if "▶" in line]
    assert len(marked) == 1 and ("THRASH" in marked[0] or "FATAL" in marked[0]), screen
    # the FATAL's (stop the lane; after the RPC timeout that caused it, the
    # timeout's own step) or the THRASH's (SSH retries, then its plug)
    assert any(step in screen for step in ("next: stop the lane (x)", "next: SSH retry 1/3",
                                           "next: the engine is dead: stop the lane (x)")), screen
    t.keys("Escape")
    t.wait("the alerts list closed", lambda s: "a ack  b bundle" not in s)

    # recover the starved node by typing its name
    t.keys("Home", *["j"] * (int(node.removeprefix("dgx")) - 1), "R")
    t.wait("the recover confirm", lambda s: f"Recover {node}" in s, timeout=60)
    t.type(node)
    t.keys("Enter")
    t.wait("the recover started", lambda s: f"recover {node} started" in s)

    # acknowledge what the alert line shows
    before = lines(t.screen())[1]
    t.keys("a")
    t.wait("the alert acknowledged", lambda s: lines(s)[1] != before)
    t.keys("!")
    t.wait("the alerts list", lambda s: "a ack  b bundle" in s)
    # unacknowledged alerts come first: with several thrash alerts up, the one
    # acknowledged is below them; move down to it as an operator would (the
    # list's own line, not the alert line, which may read "acknowledged" too)
    for _ in range(8):
        if "acknowledged]" in t.screen():
            break
        t.keys("Down")
        time.sleep(SETTLE_S)
    t.wait("the acknowledged alert in the list", lambda s: "acknowledged]" in s, timeout=10)
    t.keys("Escape")
    t.wait("the alerts list closed", lambda s: "a ack  b bundle" not in s)

    # the recovered node back online in the Nodes pane, the recover's verdict said
    t.keys("1")
    t.wait(f"{node} back online", lambda s: any(
        line.startswith(f"│ {node} ") and " online " in line for line in lines(s)),
           timeout=600)

    # stop the lane by typing its name
    t.keys("2", "x")
    t.wait("the stop confirm", lambda s: f"Stop lane {LANE}" in s, timeout=60)
    t.type(LANE)
    t.keys("Enter")
    t.wait("the stop started", lambda s: f"stop {LANE} started" in s)

    t.keys("q")
    end = time.monotonic() + 60
    while t.alive() and time.monotonic() < end:
        time.sleep(POLL_S)
    assert not t.alive(), "the console did not quit on q"
