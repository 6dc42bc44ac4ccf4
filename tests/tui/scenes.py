"""The screens the snapshot tests capture (the README's screenshots come from
the demo instead, tests/tui/demoshots.py), on the scripted fleet with a frozen
clock: one poll per node, fixed boot lines, no time-varying text (uptimes come
from docker's fixed ``Up 5 minutes``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from textual.pilot import Pilot
from textual.widgets import Input

from sparktui.core.config import Config
from sparktui.core.config_load import load_config
from sparktui.core.state import NodeState
from sparktui.ops.journal import SIMULATED, StepRecord, WorkflowRecord
from sparktui.ops.resume import Offer
from sparktui.ops.workflows.power_resume import offer_action, plugs_left_off
from sparktui.service.events import Alert, AlertRaised, LaneChanged
from sparktui.tui.messages import ServiceReported
from sparktui.tui.screens.alerts import AlertsScreen
from sparktui.tui.screens.confirm import ConfirmActionScreen, RefusalScreen
from sparktui.tui.screens.info import HelpScreen, PickerScreen, ResumeScreen
from sparktui.tui.widgets.bootlog import BootLog
from sparktui.tui.widgets.tables import LanesTable, NodesTable

from .fakecluster import GIB_KIB, add_lane, ts, vllm_boot_lines
from .harness import EPOCH, ROOT, Console, build, typed, wait_for

LANE = "glm53-mxfp4-fp8-4x-r39"


NCCL_LINE = (f"{ts(125)} (EngineCore_DP0 pid=312) INFO 11-29 22:42:05 [parallel_state.py:1200] "
             "world_size=4 rank=0 local_rank=0 distributed_init_method=tcp://127.0.0.1:29501 "
             "backend=nccl NCCL_SOCKET_IFNAME=enp1s0f1np1 NCCL_IB_HCA=rocep1s0f1 "
             "NCCL_DEBUG=WARN nccl_timeout=1800s")
"""A long line with the searched word far past 160 columns."""
SAMPLES = 24
"""Polls per node in a scene (its memory history)."""
FAST_POLL_S = 0.005
"""Poll interval while a scene builds its history (24 samples in ~0.1 s)."""
QUIET_POLL_S = 1.0
"""Poll interval once it is built: Pilot's key presses and the screenshot wait
for the process to go idle (up to 1 s each), which a 50 Hz poll of the
powered-off node never lets it do (a 15-key search took 30 s)."""


def ramp(start: float, end: float, n: int = SAMPLES) -> list[float]:
    return [start + (end - start) * (i / (n - 1)) ** 2 for i in range(n)]


def night(console: Console) -> None:
    """22:47 on the seeds' night: a lane loading on dgx5-8, dgx6 under pressure."""
    ranks = add_lane(console.fleet, LANE, "4nodes-switch-b", ["dgx5", "dgx6", "dgx7", "dgx8"])
    for rc in ranks:
        for line in vllm_boot_lines(shards=8, upto="loading"):
            rc.log.put_nowait(line)
        rc.log.put_nowait(NCCL_LINE)
        rc.status = "Up 7 minutes"
    for name in ("dgx1", "dgx2", "dgx3"):
        console.fleet.nodes[name].series = [(110 * GIB_KIB + (i % 5) * 40_000, 0.0)
                                            for i in range(SAMPLES)]
    for name in ("dgx5", "dgx7", "dgx8"):
        console.fleet.nodes[name].series = [(int(g * GIB_KIB), 0.0)
                                            for g in ramp(108.0, 14.0)]
    dgx6 = console.fleet.nodes["dgx6"]
    dgx6.series = [(int(g * GIB_KIB), p) for g, p in
                   zip(ramp(106.0, 3.2), ramp(0.0, 27.5), strict=True)]
    dgx6.psi_some = 48.0
    console.fleet.nodes["dgx4"].powered = False


async def settled(pilot: Pilot, console: Console) -> None:
    """Every node polled once and painted, the lane's backlog shown."""
    screen = console.app.main_screen

    def ready() -> bool:
        snap = console.service.snapshot()
        lanes = screen.query_one(LanesTable)
        polled = all(n.probes == len(n.series) for n in console.fleet.nodes.values()
                     if n.series)
        return (polled and all(s.state is not NodeState.UNKNOWN for s in snap.nodes)
                and bool(screen._switches)
                and not screen._pending_nodes and lanes.row_count == 1
                and "loading" in str(lanes.get_cell(LANE, "phase")))

    with console.app.batch_update():  # the history's frames are never looked at
        await wait_for(pilot, ready, timeout=60)
        poll_at(console, QUIET_POLL_S)
    await pilot.pause(0.3)


def poll_at(console: Console, interval_s: float) -> None:
    assert console.service.poller is not None
    console.service.poller.interval_s = interval_s


async def select_node(pilot: Pilot, console: Console, node: str) -> None:
    table = console.app.main_screen.query_one(NodesTable)
    table.focus()
    table.move_cursor(row=table.get_row_index(node))
    await pilot.pause()


@dataclass(frozen=True)
class Scene:
    name: str
    size: tuple[int, int]
    steps: Callable[[Pilot, Console], Awaitable[None]]


async def main_screen(pilot: Pilot, c: Console) -> None:
    await settled(pilot, c)


async def confirm_modal(pilot: Pilot, c: Console) -> None:
    await settled(pilot, c)
    await hold_still(c)
    await select_node(pilot, c, "dgx7")
    await pilot.press("P")
    await wait_for(pilot, lambda: isinstance(c.app.screen, ConfirmActionScreen), timeout=15)
    c.app.screen.query_one("#typed", Input).value = "dgx7"
    await pilot.pause(0.2)


async def refusal_modal(pilot: Pilot, c: Console) -> None:
    await settled(pilot, c)
    await hold_still(c)
    await select_node(pilot, c, "dgx2")
    await pilot.press("P")
    await wait_for(pilot, lambda: isinstance(c.app.screen, RefusalScreen), timeout=15)
    await pilot.pause(0.2)


async def help_screen(pilot: Pilot, c: Console) -> None:
    await settled(pilot, c)
    await pilot.press("question_mark")
    await wait_for(pilot, lambda: isinstance(c.app.screen, HelpScreen))
    await pilot.pause(0.2)


THRASHING = ("dgx5", "dgx6", "dgx7")
NVRM = ("2026-11-29T22:45:01.000000+0000 {node} kernel: NVRM: nvCheckOkFailedNoLog: Check "
        "failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned from "
        "_memdescAllocInternal(pMemDesc) @ mem_desc.c:1359")
STALLS = 5
"""Failed probes per starving node before the scene freezes (a fixed count in
the evidence: "SSH probe failed 5x in a row")."""


async def incident(pilot: Pilot, c: Console) -> None:
    """The long-prompt night: three nodes of the lane thrash (memory gone, PSI
    high, NVRM out of memory, ping answers but sshd does not)."""
    await settled(pilot, c)
    poll_at(c, FAST_POLL_S)  # STALLS failed probes per starving node, quickly
    for name in THRASHING:
        node = c.fleet.nodes[name]
        node.series = node.series or []
        node.journal.put_nowait(NVRM.format(node=name))
        node.stalls = STALLS
        node.responsive = False
        node.wake.set()
    book = c.app.alerts

    def all_thrash() -> bool:
        return (sum(e.alert.level == "thrash" for e in book.active.values()) == len(THRASHING)
                and all(c.fleet.nodes[n].stalls == 0 for n in THRASHING))

    with c.app.batch_update():
        await wait_for(pilot, all_thrash, timeout=10)
        poll_at(c, QUIET_POLL_S)
    await pilot.pause(0.3)


async def incident_alerts(pilot: Pilot, c: Console) -> None:
    await incident(pilot, c)
    await pilot.press("exclamation_mark")
    await wait_for(pilot, lambda: isinstance(c.app.screen, AlertsScreen))
    await pilot.pause(0.2)


async def typed_confirm(pilot: Pilot, c: Console, kind: str, target: str) -> None:
    await settled(pilot, c)
    await hold_still(c)
    c.app.propose_named(kind, target)
    await wait_for(pilot, lambda: isinstance(c.app.screen, ConfirmActionScreen), timeout=15)
    await typed(pilot, *target)
    await pilot.pause(0.2)


async def recover_modal(pilot: Pilot, c: Console) -> None:
    await incident(pilot, c)
    await hold_still(c)
    await select_node(pilot, c, "dgx6")
    await pilot.press("R")
    await wait_for(pilot, lambda: isinstance(c.app.screen, ConfirmActionScreen), timeout=15)
    await typed(pilot, *"dgx6")
    await pilot.pause(0.2)


async def stop_modal(pilot: Pilot, c: Console) -> None:
    await typed_confirm(pilot, c, "stop", LANE)


async def hold_still(c: Console) -> None:
    """Stop the poll loops and unfreeze the nodes: a serve preview probes every
    node once more (exactly one more sample each, whatever the timing)."""
    assert c.service.poller is not None
    await c.service.poller.stop()
    for node in c.fleet.nodes.values():
        node.series = []
        node.stalls = None  # a starving node fails that probe at once
        node.wake.set()


async def serve_refused(pilot: Pilot, c: Console) -> None:
    await settled(pilot, c)
    await hold_still(c)
    c.app.propose_serve("dsv41-flash-r37-4x-eager")
    await wait_for(pilot, lambda: isinstance(c.app.screen, RefusalScreen), timeout=15)
    await pilot.pause(0.2)


async def cluster_picker(pilot: Pilot, c: Console) -> None:
    await settled(pilot, c)
    await hold_still(c)
    c.app.pick_cluster("dsv41-flash-r37-4x-eager")
    await wait_for(pilot, lambda: isinstance(c.app.screen, PickerScreen), timeout=15)
    await pilot.pause(0.2)


async def lanes_loading(pilot: Pilot, c: Console) -> None:
    await settled(pilot, c)
    await pilot.press("2")
    await pilot.pause(0.2)


async def bootlog_match(pilot: Pilot, c: Console) -> None:
    """A search whose match sits far right of a long line: the view scrolls to it."""
    await settled(pilot, c)
    await pilot.press("3", "slash")
    await typed(pilot, *"nccl_timeout")
    await pilot.press("enter")
    log = c.app.main_screen.query_one(BootLog)
    await wait_for(pilot, lambda: log.match_row is not None)
    await pilot.pause(0.2)


PREDICTION = ("dgx6 runs out at shard 7/8 in ~6 min (needs ~9.3 GiB more, 4.1 GiB "
              "available; rank 1, shard 4/8)")
GARBLED = ("quality gate: GARBLED (RU 293-word text: 31 edits, CER 1.52 % "
           "(\u00abмаштабировать\u00bb for \u00abмасштабировать\u00bb); "
           "EN 337-word text clean, identifiers 6/6)")


async def oom_predicted(pilot: Pilot, c: Console) -> None:
    """Issue 14: a rank of the loading lane predicted to run out (the alert the
    service raises): the lanes and memory panes say where and when."""
    await settled(pilot, c)
    alert = Alert("predicted oom:dgx6", "predicted oom", "dgx6", (PREDICTION,),
                  f"stop the lane now (`sparktui stop {LANE}`) before the node thrashes")
    c.app.main_screen.post_message(ServiceReported(AlertRaised(alert)))
    await wait_for(pilot, lambda: "dgx6" in c.app.main_screen._predicted)
    await pilot.press("2" if c.app.size.width < 120 else "4")
    await pilot.pause(0.3)


async def gate_garbled(pilot: Pilot, c: Console) -> None:
    """Issue 14: the lane serves and its quality gate found it garbled."""
    await settled(pilot, c)
    screen = c.app.main_screen
    view = dataclasses.replace(screen._lanes[LANE], phase="serving", load=None, progress=None,
                               progress_text="", gate="garbled", gate_text=GARBLED)
    screen.post_message(ServiceReported(LaneChanged(view)))
    await pilot.press("2")
    lanes = screen.query_one(LanesTable)
    await wait_for(pilot, lambda: str(lanes.get_cell(LANE, "phase")) == "GARBLED")
    await pilot.pause(0.3)


def bad_night_offers(config: Config) -> list[Offer]:
    """Three workflows killed in one night, as ops/resume.py offers them (a
    fixed pid and age: the snapshot does not depend on the host)."""
    began = EPOCH - 900

    def record(wf: str, workflow: str, target: str, steps: tuple[StepRecord, ...],
               **detail: object) -> WorkflowRecord:
        return WorkflowRecord(wf, workflow, target, began, dict(detail), steps,
                              clock=SIMULATED)

    def off(entity: str) -> StepRecord:
        return StepRecord("plug off", entity, "", began, True, finished_at=began)

    stale = "stale: its process (pid 4242) is gone, began 15 min ago"
    records = [record("power-cycle-20261129T222500-1a2b3c", "power-cycle", "dgx7",
                      (off("switch.dgx7"),), off_seconds=30),
               record("stop-20261129T222500-4d5e6f", "stop", "lane-x",
                      (StepRecord("stop rank 1", "dgx6", "", began, None),)),
               record("cluster-power-off-20261129T222500-7a8b9c", "cluster-power-off",
                      "4nodes-switch-b", (off("switch.dgx5"),), nodes=["dgx5", "dgx6"])]
    return [Offer(r, f"{r.describe()} ({stale})", offer_action(r, config, EPOCH, SIMULATED),
                  tuple(e for _, e in plugs_left_off(r, config))) for r in records]


async def resume_list(pilot: Pilot, c: Console) -> None:
    """After a bad night: every unfinished workflow in one list, the first chosen."""
    await settled(pilot, c)
    c.app.push_screen(ResumeScreen(bad_night_offers(c.config)))
    await wait_for(pilot, lambda: isinstance(c.app.screen, ResumeScreen))
    await pilot.pause(0.2)


SCENES = (
    Scene("main-160x48", (160, 48), main_screen),
    Scene("main-80x24", (80, 24), main_screen),
    Scene("confirm-power-cycle", (100, 36), confirm_modal),
    Scene("confirm-power-cycle-80x24", (80, 24), confirm_modal),
    Scene("refusal-protected-node", (100, 36), refusal_modal),
    Scene("refusal-protected-node-80x24", (80, 24), refusal_modal),
    Scene("help-80x24", (80, 24), help_screen),
    Scene("resume-list-80x24", (80, 24), resume_list),
    *(Scene(f"{name}-{w}x{h}", (w, h), steps)
      for name, steps in (("incident", incident), ("incident-alerts", incident_alerts),
                          ("confirm-recover-typed", recover_modal),
                          ("confirm-stop-typed", stop_modal),
                          ("serve-refused", serve_refused),
                          ("cluster-picker", cluster_picker),
                          ("lanes-loading", lanes_loading),
                          ("bootlog-match-right", bootlog_match),
                          ("oom-predicted", oom_predicted), ("gate-garbled", gate_garbled))
      for w, h in ((80, 24), (160, 48))),
)


def scene_console() -> Console:
    config = load_config(ROOT / "config.toml")
    config = dataclasses.replace(config, console=dataclasses.replace(
        config.console, poll_interval_s=FAST_POLL_S))
    console = build(config=config)
    night(console)
    return console
