"""`sparktui sentinel` as its own process on the simulator, what issue 30 saw
of it against a real Home Assistant and a real engine log.

A [notify] service Home Assistant lacks (the simulated one answers a call to
it with "400: Bad Request" as a real one does): the sentinel names it, with
the ones that exist, in its start lines, not silently; and when the first
phone alert then fails, the failure is one line of its own output (priority,
no control byte, what to do), not a raw last-resort line on stderr.

A lane's ranks dying on vLLM 0.11, whose log colours every process prefix
(the dead rank's `docker logs` carries the codes): no control byte reaches the
sentinel's output (stdout and stderr) or the phone's messages, and the ALERT
fatal line names every node of the lane."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from sparktui.core.clock import SystemClock
from sparktui.core.recipe_load import load_recipe
from sparktui.core.render import plan
from sparktui.ops.journal import Journal
from sparktui.sim.testing import connect

from .simnight import PHONE, sentinel_process, state_in

pytestmark = pytest.mark.timeout(300)

MISSING = "notify.mobile_app_pixel"
LANE, CLUSTER = "glm53-flash-eugr-2x", "4nodes-switch-b"
"""A rank on each of dgx5-dgx8; the cache-not-symlink scenario kills dgx6's at once."""


def no_control_byte(text: str) -> bool:
    return not any((ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f
                   for c in text)


async def test_a_missing_notify_service_is_named_at_start_and_its_failure_is_a_line(
        tmp_path: Path, config_copy: Callable[..., Path]) -> None:
    def edit(text: str) -> str:
        return state_in(tmp_path)(text).replace('service = ""', f'service = "{MISSING}"', 1)

    async with sentinel_process(tmp_path, config_copy(edit)) as sp:
        proc = sp.proc
        assert proc.stdout is not None
        seen: list[str] = []

        async def until(what: str) -> str:
            async with asyncio.timeout(60):
                while True:
                    line = (await proc.stdout.readline()).decode()  # type: ignore[union-attr]
                    assert line, f"the sentinel ended: {seen[-20:]}"
                    seen.append(line.rstrip("\n"))
                    if what in line:
                        return seen[-1]

        named = await until("does not exist in Home Assistant")
        assert f"sentinel: {MISSING} does not exist in Home Assistant (it has: " \
               "notify.mobile_app_pixel_8, notify.persistent_notification)" in named
        await until("consoles attach at")
        # a workflow that fails (any process journals it): news for the phone
        journal = Journal.in_state_dir(sp.config.state_dir(), SystemClock())
        journal.append("w1", "begin", workflow="stop", target="dgx1")
        journal.append("w1", "end", workflow="stop", target="dgx1", ok=False,
                       message="refused")
        failed = await until("phone alert not sent")
        assert "HTTP 400: 400: Bad Request" in failed and "`sparktui check` lists" in failed
        proc.send_signal(signal.SIGTERM)
        rest, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    assert no_control_byte("\n".join(seen) + rest.decode())
    assert "phone alert not sent" not in err.decode(), err.decode()


async def test_an_engine_lines_colours_reach_neither_the_output_nor_the_phone(
        tmp_path: Path, config_copy: Callable[..., Path]) -> None:
    def edit(text: str) -> str:
        text = state_in(tmp_path)(text).replace('service = ""', f'service = "{PHONE}"', 1)
        edited = text.replace('dialect = "vllm-0.33"', 'dialect = "vllm-0.11"', 1)
        assert edited != text
        return edited

    async with sentinel_process(tmp_path, config_copy(edit), scenario="cache-not-symlink") \
            as sp:
        proc = sp.proc
        assert proc.stdout is not None
        seen: list[str] = []

        async def until(what: str) -> str:
            async with asyncio.timeout(90):
                while True:
                    line = (await proc.stdout.readline()).decode()  # type: ignore[union-attr]
                    assert line, f"the sentinel ended: {seen[-20:]}"
                    seen.append(line.rstrip("\n"))
                    if what in line:
                        return seen[-1]

        await until("consoles attach at")
        recipe = load_recipe(sp.config, LANE)
        for rank in plan(sp.config, recipe, CLUSTER).ranks:  # as a launcher script would
            async with connect(sp.sim, rank.node) as conn:
                assert (await conn.run(rank.command(3), timeout=30)).exit_status == 0
        alert = await until(f"ALERT fatal {LANE}")
        assert f"ALERT fatal {LANE} (nodes dgx5, dgx6, dgx7, dgx8): " in alert
        dead = plan(sp.config, recipe, CLUSTER).ranks[1]  # dgx6's: its log is coloured
        async with connect(sp.sim, dead.node) as conn:
            logged = await conn.run(f"docker logs {dead.container}", timeout=30)
        assert "\x1b[1;36m(" in str(logged.stdout) + str(logged.stderr)
        assert sp.sim.ha is not None
        async with asyncio.timeout(60):
            while not any(str(b.get("title")) == f"sparktui FATAL {LANE}"
                          for _, b in sp.sim.ha.notifications):
                await asyncio.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        rest, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    assert no_control_byte("\n".join(seen) + rest.decode() + err.decode())
    for _, body in sp.sim.ha.notifications:
        assert no_control_byte(str(body.get("title", "")) + str(body.get("message", ""))), body
