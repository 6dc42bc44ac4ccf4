"""A bundle lists an alert re-raised with the same evidence once, with its
count and its last time (one bundle repeated the same thrash alert 224 times)."""

from __future__ import annotations

from sparktui.core.incident import HeldAlert, dedupe_alerts


def test_repeats_read_once_with_a_count() -> None:
    T0 = 1_764_450_000.0
    same = [HeldAlert(T0 + 2 * i, "thrash:dgx6", "thrash", "dgx6", ("PSI full 40%",), "r")
            for i in range(224)]
    other = HeldAlert(T0 + 5, "thrash:dgx6", "fatal", "dgx6", ("PSI full 40%",), "r")
    out = dedupe_alerts([*same[:3], other, *same[3:]])
    assert [(a.level, a.count, a.t, a.last_t) for a in out] == [
        ("thrash", 224, T0, T0 + 2 * 223), ("fatal", 1, T0 + 5, None)]
