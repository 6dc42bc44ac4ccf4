"""A bundle's default window reaches back to the latest incident of its
subject: a lane re-served after its failure still bundles the failure (the
window used to start a minute before the last serve, after the incident)."""

from __future__ import annotations

from types import SimpleNamespace

from sparktui.core.incident import REPEAT_GAP_S, HeldAlert
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


def test_an_alert_raised_again_for_minutes_reaches_back_to_its_first_raise() -> None:
    """A FATAL raised again every 5 s for 16 minutes (as the phone is told,
    as its evidence grows) is one incident: the window starts before its
    first raise, not a minute before its last repeat; a raise after a quiet
    REPEAT_GAP_S is a new incident."""
    def fatal(t: float) -> HeldAlert:
        return HeldAlert(t, "fatal:lane", "fatal", "lane", ("x",), "r")

    repeats = [fatal(T0 + 1000 + 5 * i) for i in range(200)]
    assert default_since([], repeats, ("lane",), T0 + 9000) == T0 + 1000 - 60
    again = T0 + 1995 + REPEAT_GAP_S + 1
    assert default_since([], [*repeats, fatal(again)], ("lane",), T0 + 9000) == again - 60
