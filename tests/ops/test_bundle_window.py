"""A bundle's default window reaches back to the latest incident of its
subject: a lane re-served after its failure still bundles the failure (the
window used to start a minute before the last serve, after the incident)."""

from __future__ import annotations

from types import SimpleNamespace

from sparktui.core.incident import HeldAlert
from sparktui.ops.bundle import DEFAULT_WINDOW_S, default_since

T0 = 1_764_450_000.0


def serve(began: float, ended: float | None, ok: bool | None) -> SimpleNamespace:
    return SimpleNamespace(began_at=began, ended_at=ended, ok=ok)


def test_the_window_reaches_back_to_the_latest_incident() -> None:
    serves = [serve(T0, T0 + 300, False), serve(T0 + 3600, None, None)]
    assert default_since(serves, [], ("lane",), T0 + 4000) == T0 - 60
    fatal = HeldAlert(T0 + 1000, "fatal:lane", "fatal", "lane", ("x",), "r")
    other = HeldAlert(T0 + 3900, "thrash:dgx9", "thrash", "dgx9", ("x",), "r")
    ok = [serve(T0, None, None), serve(T0 + 3600, None, None)]
    assert default_since(ok, [fatal, other], ("lane", "dgx5"), T0 + 4000) == T0 - 60
    assert default_since(ok, [], ("lane",), T0 + 4000) == T0 + 3600 - 60  # no incident
    assert default_since([], [fatal], ("lane",), T0 + 90_000) == T0 + 1000 - 60
    assert default_since([], [], ("lane",), T0) == T0 - DEFAULT_WINDOW_S
