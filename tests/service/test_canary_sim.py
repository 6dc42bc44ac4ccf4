"""The serving canary through the console's service against the simulator
(manual clock, real SSH and HTTP): an engine core that hangs while its API
keeps answering /health is reported ``unresponsive`` within one canary
interval; one that exits (/health 503, then the port closed) is ``failed``
within 10 s with the engine's own line, never ``unresponsive``; a throughput
collapse is thrash evidence for the lane's nodes before their SSH starves."""

from __future__ import annotations

from pathlib import Path

from sparktui.watch.canary import CANARY_TIMEOUT_S

from .simnight import advance_until, boot_unwatched, night, phase


async def test_engine_dead_is_unresponsive_within_one_canary_interval(tmp_path: Path) -> None:
    lane = "glm53-flash-eugr-2x"
    async with night(tmp_path, "engine-dead", "2nodes-dac", start=False,
                     poll_interval_s=60.0) as n:
        interval = n.config.console.canary_interval_s
        await boot_unwatched(n, lane)
        await n.service.start(n.record)
        await advance_until(n, lambda: phase(n, lane) == "serving", step=5.0,
                            max_sim_s=120, why=lambda: phase(n, lane))
        view = n.service.lanes()[lane]
        await advance_until(n, lambda: bool(n.service.lanes()[lane].canary), step=2.0,
                            max_sim_s=2 * interval)
        assert "1-token completion answered" in n.service.lanes()[lane].canary[0]
        assert not n.alerts("canary:")
        engine = n.sim.lane_rank0(lane)
        await advance_until(n, lambda: engine.core_dead, step=10.0, max_sim_s=900)
        died = n.sim.clock.monotonic()
        await advance_until(n, lambda: bool(n.alerts("canary:")), step=2.0,
                            max_sim_s=3 * interval, why=lambda: str(n.service.lanes()[lane]))
        at, raised = n.alerts("canary:")[0]
        assert at - died <= interval, (at - died)
        alert = raised.alert
        assert alert.level == "unresponsive" and alert.subject == lane
        assert alert.evidence[0] == ("/health answers 200 but a 1-token completion failed: "
                                     f"no answer in {CANARY_TIMEOUT_S:g} s")
        # the idle core's gauges stay 0/0 (as vLLM's): the API server took the
        # request and the core made no step (core/canary.judge_canary)
        assert "the API server took it" in alert.evidence[1], alert.evidence
        assert "no token processed and no engine step" in alert.evidence[1]
        await advance_until(n, lambda: phase(n, lane) == "unresponsive", step=2.0,
                            max_sim_s=30)
        view = n.service.lanes()[lane]
        assert view.health == "ok"  # /health still answers: the canary is what tells
        assert view.canary == alert.evidence


async def test_an_exited_engine_core_is_failed_within_10_s(tmp_path: Path) -> None:
    """core-exit (vLLM 0.33): the client's one line, /health 503, the API
    server gone 5 s later: the lane is failed with that line, the fatal alert
    raised, and no UNRESPONSIVE alert on the way."""
    lane = "glm53-flash-eugr-2x"
    async with night(tmp_path, "core-exit", "2nodes-dac", start=False,
                     poll_interval_s=60.0) as n:
        await boot_unwatched(n, lane)
        await n.service.start(n.record)
        await advance_until(n, lambda: phase(n, lane) == "serving", step=5.0,
                            max_sim_s=120, why=lambda: phase(n, lane))
        engine = n.sim.lane_rank0(lane)
        await advance_until(n, lambda: engine.phase == "dead", step=5.0, max_sim_s=900)
        died = n.sim.clock.monotonic()
        await advance_until(n, lambda: phase(n, lane) == "failed", step=1.0, max_sim_s=10,
                            why=lambda: str(n.service.lanes()[lane]))
        await advance_until(n, lambda: bool(n.alerts("fatal:")), step=1.0,
                            max_sim_s=10 - (n.sim.clock.monotonic() - died))
        view = n.service.lanes()[lane]
        assert view.failure == ("rank 0: [shutdown] MPClient: engine core exited unexpectedly; "
                                "starting cleanup")
        await advance_until(n, lambda: view.health == "refused" or
                            n.service.lanes()[lane].health == "refused", step=1.0,
                            max_sim_s=30)
        assert phase(n, lane) == "failed"
        assert not n.alerts("canary:")


async def test_throughput_collapse_is_thrash_evidence_before_ssh_starves(tmp_path: Path) -> None:
    lane = "glm53-mxfp4-fp8-4x-r39-196k"
    async with night(tmp_path, "throughput-collapse", "4nodes-switch-b", start=False,
                     poll_interval_s=20.0) as n:
        nodes = n.config.clusters["4nodes-switch-b"].nodes
        await boot_unwatched(n, lane)
        await n.service.start(n.record)
        await advance_until(n, lambda: phase(n, lane) == "serving", step=5.0,
                            max_sim_s=120, why=lambda: phase(n, lane))
        await advance_until(n, lambda: bool(n.service.lanes()[lane].canary), step=5.0,
                            max_sim_s=300)
        assert not n.alerts("thrash:")
        n.sim.run_prompt(lane, 150_000)
        starved: dict[str, float] = {}

        def under() -> bool:
            for node in nodes:
                if n.sim.nodes[node].thrashing:
                    starved.setdefault(node, n.sim.clock.monotonic())
            return bool(starved) and bool(n.alerts("thrash:"))

        await advance_until(n, under, step=2.0, max_sim_s=600,
                            why=lambda: f"{starved} {n.alerts('thrash:')}")
        first_t, first = n.alerts("thrash:")[0]
        assert first.alert.level == "thrash suspected", first.alert
        # the collapse, from /metrics (the canary's) or from the engine's own stats line,
        # which vLLM prints every 10 s while busy: whichever the console read first
        assert any("throughput collapsed to 0" in e or "with prompt throughput 0.0" in e
                   for e in first.alert.evidence), first.alert
        assert first_t < min(starved.values()), (first_t, starved)
        assert first.alert.subject in nodes
