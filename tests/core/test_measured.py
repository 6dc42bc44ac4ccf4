"""What a boot measured: milestones are the last reading in each phase (the
tightest node), KV bytes per token is the pool's GiB over its tokens, and the
fit finds the newest successful boot of the recipe on that cluster only."""

from __future__ import annotations

from sparktui.core.measured import MemoryMarks, boot_figures, last_boot

GIB_KIB = 1024 * 1024


def test_milestones_are_the_last_reading_of_each_phase_on_the_tightest_node():
    m = MemoryMarks()
    m.read("a", 110 * GIB_KIB, "starting")
    m.read("b", 108 * GIB_KIB, "starting")
    m.read("a", 30 * GIB_KIB, "loading weights")
    m.read("a", 20 * GIB_KIB, "loading weights")
    m.read("b", 19 * GIB_KIB, "KV allocation")
    m.read("a", 10 * GIB_KIB, "serving")
    assert m.to_json() == {"before_load": 108.0, "after_load": 20.0, "after_kv": 19.0,
                           "headroom": 10.0}


def test_the_newest_ready_boot_of_this_recipe_and_cluster_is_found():
    good = {"recipe": "r", "cluster": "c", "outcome": "ready",
            "measured": boot_figures({"weights": 98.86, "kv": 6.0}, 136_770, 131072)}
    ends = [("wf-old", 1.0, {**good, "measured": boot_figures({"kv": 6.0}, 100_000, 131072)}),
            ("wf-new", 2.0, good),
            ("wf-other", 3.0, {**good, "cluster": "other"}),
            ("wf-failed", 4.0, {**good, "outcome": "failed"})]
    boot = last_boot(ends, "r", "c")
    assert boot is not None and boot.boot == "wf-new" and boot.weights_per_rank_gib == 98.86
    assert boot.kv_bytes_per_token == int(6 * 2**30 / 136_770)
    assert last_boot(ends, "x", "c") is None
    assert boot.to_json()["kv_bytes_per_token"] == boot.kv_bytes_per_token
