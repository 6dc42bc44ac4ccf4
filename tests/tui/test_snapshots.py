"""Snapshot tests (pytest-textual-snapshot): the main screen at 80x24 and
160x48, the confirm modal, the refusal modal and the help screen. Baselines
live in __snapshots__/; review the diff report before `--snapshot-update`."""

from __future__ import annotations

import pytest

from .scenes import SCENES, Scene, scene_console


@pytest.mark.parametrize("scene", SCENES, ids=[s.name for s in SCENES])
def test_screen(snap_compare, scene: Scene) -> None:
    console = scene_console()

    async def run_before(pilot) -> None:
        await scene.steps(pilot, console)

    assert snap_compare(console.app, terminal_size=scene.size, run_before=run_before)
