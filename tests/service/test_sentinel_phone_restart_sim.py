"""Issue 25: a sentinel restarted while an incident is still open does not
phone it a second time. `sparktui sentinel` as its own process against the
simulator (20x, the simulated Home Assistant as the phone): a lane's rank dies
(cache-not-symlink), the sentinel phones FATAL once; SIGKILLed and started
again, the new sentinel raises the same FATAL from the same dead ranks and
phones nothing; a new incident (a second lane dying) is phoned as usual.
And a console watching alone beside the sentinel (both phone until the console
attaches): the incident is phoned once, by whichever desk saw it first."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sparktui.core.recipe_load import load_recipe
from sparktui.core.render import plan
from sparktui.service import phoned
from sparktui.service.cluster import ClusterService
from sparktui.service.events import AlertRaised, ServiceEvent
from sparktui.sim.cluster import Sim
from sparktui.sim.testing import connect

from .simnight import PHONE, SentinelProcess, sentinel_process, state_in

FIRST = "glm53-flash-eugr-2x"
"""On CLUSTER: ranks on dgx5 and dgx6; dgx6's local cache dir kills its rank at once."""
SECOND = "glm53-full-mxfp4-4x-dspark8"
CLUSTER = "4nodes-switch-b"

pytestmark = pytest.mark.timeout(300)


def with_phone(text: str) -> str:
    edited = text.replace('service = ""', f'service = "{PHONE}"', 1)
    assert edited != text
    return edited


async def start_ranks(sp: SentinelProcess, recipe: str) -> None:
    """The lane's ranks started by hand (docker run through SSH), as a launcher
    script would: the sentinel finds them by their labels."""
    r = load_recipe(sp.config, recipe)
    for rank in plan(sp.config, r, CLUSTER).ranks:
        async with connect(sp.sim, rank.node) as conn:
            result = await conn.run(rank.command(3), timeout=30)
            assert result.exit_status == 0, result.stderr


def phoned_titles(sim: Sim) -> list[str]:
    assert sim.ha is not None
    return [str(body.get("title", "")) for service, body in sim.ha.notifications
            if service == PHONE]


async def lines_until(proc: asyncio.subprocess.Process, text: str, seen: list[str],
                      real_s: float = 90.0) -> None:
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(real_s):
            while True:
                line = (await proc.stdout.readline()).decode()
                assert line, f"the sentinel ended: {seen[-20:]}"
                seen.append(line.rstrip())
                if text in line:
                    return
    except TimeoutError:
        raise AssertionError(f"no {text!r} in {real_s:g} s: {seen[-30:]}") from None


async def until(pred, real_s: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(real_s):
        while not pred():
            await asyncio.sleep(0.05)


async def test_a_restarted_sentinel_does_not_phone_an_open_incident_again(
        tmp_path: Path, config_copy) -> None:  # type: ignore[no-untyped-def]
    config_path = config_copy(lambda t: with_phone(state_in(tmp_path)(t)))
    async with sentinel_process(tmp_path, config_path, scenario="cache-not-symlink") as sp:
        seen: list[str] = []
        await lines_until(sp.proc, "consoles attach at", seen)
        await start_ranks(sp, FIRST)
        await lines_until(sp.proc, f"ALERT fatal {FIRST}", seen)
        fatal = f"sparktui FATAL {FIRST}"
        await until(lambda: fatal in phoned_titles(sp.sim))
        assert phoned.path_in(sp.config.state_dir()).exists()

        # -- kill -9, and a new sentinel on the same state dir ---------------------
        sp.proc.kill()
        await sp.proc.wait()
        sp.proc = await asyncio.create_subprocess_exec(
            *sp.argv, env=sp.env, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        again: list[str] = []
        await lines_until(sp.proc, f"ALERT fatal {FIRST}", again)  # still open: raised again
        # a new incident is phoned: the memory holds back only the open one
        await start_ranks(sp, SECOND)
        await lines_until(sp.proc, f"ALERT fatal {SECOND}", again)
        await until(lambda: f"sparktui FATAL {SECOND}" in phoned_titles(sp.sim))
        await asyncio.sleep(1.0)  # a second message of the first would have come by now
        assert phoned_titles(sp.sim).count(fatal) == 1, phoned_titles(sp.sim)
    assert sp.proc.returncode is not None  # the restarted sentinel ended with the test


async def test_a_console_alone_and_a_sentinel_phone_an_incident_once(
        tmp_path: Path, config_copy) -> None:  # type: ignore[no-untyped-def]
    config_path = config_copy(lambda t: with_phone(state_in(tmp_path)(t)))
    async with sentinel_process(tmp_path, config_path, scenario="cache-not-symlink") as sp:
        seen: list[str] = []
        await lines_until(sp.proc, "consoles attach at", seen)
        # this process: a console that watches and phones alone (it has not
        # attached yet: its backoff runs up to 60 s), each desk's memory read
        # when it began phoning, before the incident
        events: list[ServiceEvent] = []
        console = ClusterService(sp.config)
        await console.start(events.append)
        try:
            await until(lambda: all(s.probe is not None for s in console.snapshot().nodes),
                        real_s=60)
            await start_ranks(sp, FIRST)
            key = f"fatal:{FIRST}"
            await lines_until(sp.proc, f"ALERT fatal {FIRST}", seen)
            await until(lambda: any(isinstance(e, AlertRaised) and e.alert.key == key
                                    for e in events), real_s=60)
            fatal = f"sparktui FATAL {FIRST}"
            await until(lambda: fatal in phoned_titles(sp.sim))
            await asyncio.sleep(1.0)  # the other desk's message would have come by now
            assert phoned_titles(sp.sim).count(fatal) == 1, phoned_titles(sp.sim)
        finally:
            await console.stop()
