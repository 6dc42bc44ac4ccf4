"""Fixtures for the CLI tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def quick_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The power and stop workflows re-check a node every 2-3 s of real time
    (liveness after a plug on, dark after a poweroff, memory freed after a
    stop). Against the simulator at 400x that is 800+ simulated seconds per
    check, most of a test's wall time spent idle: here they re-check every
    0.05 s (20 simulated s), still by the same loop, bounds and messages.
    Only for commands run in this process (`cli_harness.sparktui`)."""
    from sparktui.ops.workflows import power, stop

    monkeypatch.setattr(power, "WAIT_POLL_S", 0.05)
    monkeypatch.setattr(stop, "MEMORY_POLL_S", 0.05)
