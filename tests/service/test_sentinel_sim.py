"""The sentinel against the simulator, with no console anywhere: the 22:45
long prompt gives the thrash alert line, the phone alert (the simulated
Home Assistant records it) and the recording; `sparktui sentinel` as a
process holds its lock, writes its lines and ends cleanly on SIGTERM with
its recording closed whole."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from sparktui.ops import sentinel_state
from sparktui.service.events import AlertRaised, NodeSampled
from sparktui.service.recorded import read_recording
from sparktui.service.recording import RECORDING_DIR
from sparktui.service.sentinel import PID_FILE, Sentinel

from .simnight import (
    PACE,
    PHONE,
    advance_until,
    boot_unwatched,
    night,
    phase,
    sentinel_process,
    state_in,
    with_phone,
)

ROOT = Path(__file__).resolve().parents[2]


async def test_sentinel_alone_raises_the_long_prompt_thrash_alert(tmp_path: Path) -> None:
    lane = "glm53-mxfp4-fp8-4x-r39-196k"
    async with night(tmp_path, "long-prompt", "4nodes-switch-b", start=False,
                     poll_interval_s=20.0) as n:
        with_phone(n)
        lines: list[tuple[int, str]] = []
        sentinel = Sentinel(n.config, n.service, clock=n.sim.clock,
                            emit=lambda p, text: lines.append((p, text)))
        await boot_unwatched(n, lane)
        stop = asyncio.Event()
        task = asyncio.create_task(sentinel.run(stop))
        try:
            await advance_until(n, lambda: phase(n, lane) == "serving", step=5.0,
                                max_sim_s=120, why=lambda: phase(n, lane))
            assert (n.config.state_dir() / PID_FILE).exists()

            def known() -> set[str]:
                seen = sentinel_state.read(n.config.state_dir())
                return set(seen.nodes) if seen is not None else set()

            await advance_until(n, lambda: known() == set(n.config.nodes), step=5.0,
                                max_sim_s=120, why=lambda: str(known()))
            n.sim.run_prompt(lane, 150_000)

            def thrash_lines() -> list[str]:
                return [t for _, t in lines if t.startswith("ALERT thrash ")]

            def failed() -> bool:
                # from serving, or from unresponsive when the canary's completion
                # timed out behind the 150k prefill first (both happen)
                return any(t.startswith(f"lane {lane}: ") and " -> failed" in t
                           for _, t in lines)

            await advance_until(n, lambda: failed() and {"dgx6", "dgx7"} <= {
                t.split()[2].rstrip(":") for t in thrash_lines()}, step=2.0, max_sim_s=900,
                pace=PACE, why=lambda: "\n".join(t for _, t in lines[-20:]))
            assert n.sim.ha is not None
            await advance_until(n, lambda: bool(n.sim.ha.notifications), step=2.0,  # type: ignore[union-attr]
                                max_sim_s=120)
            service, body = n.sim.ha.notifications[0]
            assert service == PHONE
            assert "thrash" in (body.get("title", "") + body["message"]).lower(), body
        finally:
            stop.set()
            await asyncio.wait_for(task, 60)
        assert lines[-1] == (6, "sentinel: stopped")
        assert not (n.config.state_dir() / PID_FILE).exists()
        assert sentinel_state.read(n.config.state_dir()) is None
        recorded = [ev for path in (n.config.state_dir() / RECORDING_DIR).glob("*.jsonl.gz")
                    for _, ev in read_recording(path)]
        assert any(isinstance(ev, AlertRaised) and ev.alert.key == "thrash:dgx6"
                   for ev in recorded)


async def test_sentinel_process_locks_logs_and_ends_on_sigterm(tmp_path: Path, config_copy
                                                                ) -> None:
    async with sentinel_process(tmp_path, config_copy(state_in(tmp_path))) as sp:
        config, proc = sp.config, sp.proc
        assert proc.stdout is not None
        seen: list[str] = []
        async with asyncio.timeout(60):
            while sum(" online" in line for line in seen) < len(config.nodes):
                line = (await proc.stdout.readline()).decode()
                assert line, f"sentinel ended early: {seen}"
                seen.append(line.strip())
        assert (config.state_dir() / PID_FILE).read_text().strip() == str(proc.pid)
        second = await asyncio.create_subprocess_exec(*sp.argv, env=sp.env,
                                                      stdout=asyncio.subprocess.PIPE,
                                                      stderr=asyncio.subprocess.PIPE)
        _, err = await asyncio.wait_for(second.communicate(), 60)
        assert second.returncode == 1
        assert f"a sentinel (pid {proc.pid}) already watches" in err.decode()
        proc.send_signal(signal.SIGTERM)
        rest, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    tail = rest.decode().splitlines()
    assert tail[-2].endswith("sentinel: stopping") and tail[-1].endswith("sentinel: stopped")
    assert not (config.state_dir() / PID_FILE).exists()
    assert "Traceback" not in err.decode()
    recorded = [ev for path in sorted((config.state_dir() / RECORDING_DIR).glob("*.jsonl.gz"))
                for _, ev in read_recording(path)]  # closed whole: readable to its end
    assert {ev.snapshot.node for ev in recorded if isinstance(ev, NodeSampled)} == \
        set(config.nodes)
