"""Nothing the console hands Textual to call later can crash it (issue 25:
`gc.collect` given to `set_interval` killed every console 600 s after start).

Every callback the app, its screens and their widgets register with
`set_interval`, `set_timer`, `call_later` or `call_after_refresh` while the
console starts, polls, streams a boot log and opens each of its modals is
recorded, then fired once through the same public method on the same node:
Textual's own path (its `invoke` counts the callback's parameters, which is
where a builtin failed), not a direct call. Only Textual's own callbacks (its
cursor blink, its screens' internals) are left out. No Textual internals: the
four public methods are wrapped for the test."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest
from textual.message_pump import MessagePump
from textual.pilot import Pilot

from sparktui.tui.app import GC_THAW_EVERY
from sparktui.tui.screens.info import HelpScreen, PickerScreen
from sparktui.tui.widgets.bootlog import BootLog

from .fakecluster import add_lane, vllm_boot_lines
from .harness import build, wait_for
from .test_replay_snapshot import replay_app

METHODS = ("set_interval", "set_timer", "call_later", "call_after_refresh")


@dataclass(frozen=True)
class Registered:
    node: MessagePump
    method: str
    callback: Callable[..., Any]
    args: tuple[Any, ...]
    name: str | None

    def __str__(self) -> str:
        return f"{type(self.node).__name__}.{self.method}({_name(self.callback)})"


def _target(callback: Callable[..., Any]) -> Callable[..., Any]:
    while isinstance(callback, partial):
        callback = callback.func
    return getattr(callback, "__func__", callback)


def _name(callback: Callable[..., Any]) -> str:
    target = _target(callback)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', target)}"


def _textuals(callback: Callable[..., Any]) -> bool:
    module = getattr(_target(callback), "__module__", None) or ""
    return module == "textual" or module.startswith(("textual.", "rich."))


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Registered]]:
    """Every callback handed to the four methods while the test runs (ours:
    Textual's own are not recorded)."""
    seen: list[Registered] = []
    for method in METHODS:
        original = getattr(MessagePump, method)

        def wrapper(self: MessagePump, callback: Any = None, *args: Any,
                    _original: Any = original, _method: str = method, **kwargs: Any) -> Any:
            if _method in ("set_interval", "set_timer"):  # (delay, callback, *, name=...)
                delay, callback = callback, (args[0] if args else kwargs.get("callback"))
                result = _original(self, delay, *args, **kwargs)
                rest: tuple[Any, ...] = ()
            else:
                result = _original(self, callback, *args, **kwargs)
                rest = args
            if callback is not None and not _textuals(callback):
                seen.append(Registered(self, _method, callback, rest, kwargs.get("name")))
            return result

        monkeypatch.setattr(MessagePump, method, wrapper)
    yield seen


async def fire_each_once(pilot: Pilot[Any], seen: list[Registered]) -> list[str]:
    """Each distinct callback again through its own method on its own node."""
    fired: list[str] = []
    done: set[str] = set()
    for reg in list(seen):
        key = str(reg)
        if key in done or not reg.node.is_running:
            continue
        done.add(key)
        if reg.method == "set_interval":
            # repeat=1: Textual's interval runs the callback (twice) and ends
            timer = reg.node.set_interval(0.001, reg.callback, repeat=1)
            await pilot.pause(0.05)
            timer.stop()
        elif reg.method == "set_timer":
            reg.node.set_timer(0.001, reg.callback)  # (a 0 s timer can divide by 0)
        else:
            getattr(reg.node, reg.method)(reg.callback, *reg.args)
        await pilot.pause()
        fired.append(key)
    return fired


async def open_and_close(pilot: Pilot[Any], key: str, screen: type) -> None:
    app = pilot.app
    await pilot.press(key)
    await wait_for(pilot, lambda: isinstance(app.screen, screen), timeout=10)
    await pilot.press("escape")
    await wait_for(pilot, lambda: app.screen is app.main_screen, timeout=10)  # type: ignore[attr-defined]


async def test_every_callback_the_console_registers_survives_textuals_invoke(
        registered: list[Registered], monkeypatch: pytest.MonkeyPatch) -> None:
    # the CLI's console tunes the collector (tune_gc): that is where the full
    # pass's timer is set; the freeze and thresholds are kept from this process
    calls: list[str] = []
    collect = gc.collect
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(gc, "unfreeze", lambda: calls.append("unfreeze"))
    monkeypatch.setattr(gc, "collect", lambda *a: calls.append("collect") or collect(*a))
    monkeypatch.setattr(gc, "set_threshold", lambda *a: None)
    c = build()
    c.app.tune_gc = True
    ranks = add_lane(c.fleet, "glm53-flash-eugr-2x", "2nodes-dac", ["dgx5", "dgx6"])
    async with c.app.run_test(size=(160, 48)) as pilot:
        app = c.app
        await wait_for(pilot, lambda: any(r.name == "full collection" for r in registered))
        log = app.main_screen.query_one(BootLog)
        for line in vllm_boot_lines(shards=4):  # a streaming log: lines that come
            ranks[0].log.put_nowait(line)  # soon after a drain wait for its timer
        await wait_for(pilot, lambda: log.row_count >= 10)
        for i in range(20):
            ranks[0].log.put_nowait(f"2026-11-29T22:41:{i:02d}.000000000Z more line {i}")
            await pilot.pause(0.01)
        await wait_for(pilot, lambda: any(r.name == "boot log drain" for r in registered))
        for pane in "1234":
            await pilot.press(pane)
        await open_and_close(pilot, "question_mark", HelpScreen)
        await open_and_close(pilot, "s", PickerScreen)
        await pilot.press("exclamation_mark")
        await wait_for(pilot, lambda: app.screen is not app.main_screen)
        await pilot.press("escape")
        await pilot.press("colon")
        await wait_for(pilot, lambda: app.screen is not app.main_screen)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.main_screen)

        names = {r.name for r in registered}
        assert {"full collection", "switch states", "boot log drain"} <= names, names
        app._full_passes = GC_THAW_EVERY - 1  # the next timed pass thaws the frozen
        fired = await fire_each_once(pilot, registered)
        await pilot.pause(0.1)
        assert app.crashed is None, f"{app.crashed!r} after firing {fired}"
        assert any("_collect_fully" in f for f in fired), fired
        # the start-up heap frozen once, then what survived each timed full pass;
        # the tenth collects the frozen too
        assert calls[0] == "freeze" and calls.count("freeze") >= 2, calls
        timed = calls[1:]
        assert timed[:3] == ["unfreeze", "collect", "freeze"], calls
        assert all(timed[i - 1] == "collect" for i, c in enumerate(timed) if c == "freeze")


async def test_every_callback_the_replay_registers_survives_textuals_invoke(
        registered: list[Registered]) -> None:
    app = replay_app()  # a recorded night, through the recording file
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: any(r.name == "replay clock" for r in registered))
        await pilot.press("right_square_bracket")  # a seek: a fresh main screen
        await pilot.pause(0.2)
        fired = await fire_each_once(pilot, registered)
        await pilot.pause(0.1)
        assert app.crashed is None, f"{app.crashed!r} after firing {fired}"
        assert any("_show_clock" in f for f in fired), fired

