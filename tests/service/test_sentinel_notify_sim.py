"""`sparktui sentinel` with a [notify] service Home Assistant lacks (the
simulated one, which answers a call to it with "400: Bad Request" as a real
one does): the sentinel names it, with the ones that exist, in its start
lines, not silently; and when the first phone alert then fails, the failure
is one line of its own output (priority, no control byte, what to do), not a
raw last-resort line on stderr (issue 30)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from pathlib import Path

from sparktui.core.clock import SystemClock
from sparktui.ops.journal import Journal

from .simnight import sentinel_process, state_in

MISSING = "notify.mobile_app_pixel"


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
    out = "\n".join(seen) + rest.decode()
    assert not any((ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f for c in out)
    assert "phone alert not sent" not in err.decode(), err.decode()
