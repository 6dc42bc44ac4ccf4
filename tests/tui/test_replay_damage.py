"""A recorded line found damaged only when the replay decodes it (its start
in the writer's form, its body not an event) is said in the console, once,
with the file: the operator knows the night on screen is missing a line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from sparktui.core.config_load import load_config
from sparktui.service import codec
from sparktui.service.recorded import Recorded, open_sessions
from sparktui.service.recordindex import index_path
from sparktui.service.recording import Recorder
from sparktui.service.replay import ReplaySource
from sparktui.tui.replay import ReplayApp

from .harness import wait_for
from .test_replay_snapshot import ROOT, T0, FixedClock, node_sample


async def skipped_said(session: Recorded, seek_to: float) -> list[str]:
    """What the replay console says was skipped once it has played ``session``
    from T0 to ``seek_to`` (its clock's timer shown twice: said once)."""
    config = load_config(ROOT / "config.toml")
    source = ReplaySource(config, session, start=T0)
    source.paused = True
    app = ReplayApp(config, source)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        source.seek(seek_to)
        app._show_clock()  # its timer's work
        app._show_clock()
        said = [m for _, _, m, _ in app.notices if "skipped" in m]
        await wait_for(pilot, lambda: source.snapshot().get("dgx1") is not None)
    return said


async def test_a_line_found_damaged_while_replaying_is_said_once(tmp_path: Path) -> None:
    lines = []
    for i in range(4):
        data = {"t": T0 + 30 * i, "e": codec.encode(node_sample("dgx1", T0 + 30 * i, 100, 0))}
        if i == 2:
            data["e"]["snapshot"]["taken_at"] = "late"  # a float field
        lines.append(json.dumps(data, separators=(",", ":")))
    path = tmp_path / "night.jsonl.gz"
    path.write_bytes(gzip.compress("\n".join(lines).encode()))
    [session] = open_sessions(path)
    assert not session.damage  # its start is in the writer's form: found when decoded
    assert await skipped_said(session, T0 + 90) == [
        f"1 recorded line(s) skipped: not events ({path})"]


async def test_a_damaged_piece_found_while_replaying_is_said_once(tmp_path: Path) -> None:
    """A member the writer's index covers is not decompressed to open the
    night: damaged, it is found when the replay decodes it, and said."""
    clock = FixedClock()
    path = tmp_path / "night.jsonl.gz"
    recorder = Recorder(path, max_bytes=10_000_000, clock=clock)  # type: ignore[arg-type]
    recorder.open()
    for i in range(40):
        clock.t = T0 + 30 * i
        recorder.write(node_sample("dgx1", clock.t, 100, 0))
    recorder.close()
    records = [json.loads(x) for x in index_path(path).read_bytes().splitlines()]
    hit = records[len(records) // 2]
    data = bytearray(path.read_bytes())
    data[hit["at"] + 12:hit["at"] + 24] = b"\xff" * 12  # header and trailer whole
    path.write_bytes(bytes(data))
    [session] = open_sessions(path)
    assert not session.damage  # not decompressed to open: found when decoded
    assert await skipped_said(session, T0 + 30 * 39) == [
        f"1 damaged piece(s) of the recording skipped ({path})"]
