"""What a boot measured: milestones are the last reading in each phase (the
tightest node), KV bytes per token is the pool's GiB over its tokens, and the
fit finds the newest successful boot of the recipe on that cluster only; both
engines' boot lines (the golden dialect transcripts) give the figures."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the fixtures
from fixtures.dialects.golden import scenario
from sparktui.core.logsig import classify
from sparktui.core.measured import (
    BootFigures,
    MemoryMarks,
    boot_figures,
    kv_linearity,
    last_boot,
    memory_figure,
)
from sparktui.core.phases import PhaseTracker

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


def booted(name: str) -> PhaseTracker:
    """Rank 0 of a golden boot transcript (tests/fixtures/dialects) through the
    phase tracker, as the serve reads it."""
    _, ranks = scenario(name)
    t = PhaseTracker(name, stall_after_s=600.0, start=0.0)
    for i, (ts, line) in enumerate(ranks[0]):
        t.feed(0, line, float(i), ts=ts)
    return t


def test_sglang_boot_lines_measure_weights_and_the_kv_pool():
    """SGLang 0.5.23's golden boot: "Load weight end. ... mem usage=29.87 GB." is the
    weights, "KV Cache is allocated. ... #tokens: 412160, K size: 17.69 GB, V size:
    17.69 GB" the pool (K + V, GiB as SGLang computes them), so KV bytes per token
    is measured on SGLang lanes too."""
    for name in ("sglang05-single", "sglang05-2node-fp8"):
        t = booted(name)
        assert t.memory_gib == {"weights": 29.87, "kv": 35.38}, name
        m = boot_figures(t.memory_gib, t.kv.tokens, t.kv.max_len)
        assert (m["weights_per_rank_gib"], m["kv_pool_gib"], m["kv_pool_tokens"],
                m["max_model_len"], m["graphs_gib"]) == (29.87, 35.38, 412_160, 131_072, None)
        boot = last_boot([("wf", 1.0, {"recipe": "r", "cluster": "c", "outcome": "ready",
                                       "measured": m})], "r", "c")
        assert boot is not None and boot.kv_bytes_per_token == int(35.38 * 2**30 / 412_160)


def test_vllm_boot_lines_still_measure_weights_kv_and_graphs():
    t = booted("vllm033-v1-single")
    assert t.memory_gib == {"weights": 29.87, "kv": 38.42, "graphs": 0.61}


@pytest.mark.parametrize("line,want", [
    ("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1000, K size: 1.25 GB, "
     "V size: 1.30 GB", ("kv", 2.55)),
    ("KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 1000, KV size: 2.50 GB",
     ("kv", 2.5)),  # one buffer (MLA): memory_pool.py:2095
    ("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1000", None),
    ("Memory pool end. avail mem=52.11 GB", None),  # free memory, not the pool
    ("Load weight end. elapsed=1.00 s, type=X, quant=fp8, avail mem=9.00 GB, "
     "mem usage=98.86 GB.", ("weights", 98.86)),
])
def test_each_sglang_memory_line_maps_to_its_figure(line, want):
    from sparktui.sim.dialects import load

    ev = classify(load("sglang-0.5").record(line, when=1.8e9, tp=" TP0")[0])
    assert ev is not None
    assert memory_figure(ev.kind, ev.fields) == want


def boot(wf: str, at: float, kv_gib: float, tokens: int, window: int) -> BootFigures:
    return BootFigures(wf, at, "c", 98.86, kv_gib, tokens, None, window)


def test_kv_bytes_per_token_is_checked_linear_across_pins_and_windows():
    """The seeds' "confirm it is linear": two boots with different pins give one
    KV bytes per token (within 2 %), or the fit says it is not."""
    six = boot("wf-6", 1.0, 6.0, 136_770, 131_072)
    eleven = boot("wf-11", 2.0, 11.0, 250_000, 196_608)
    lin = kv_linearity([six, eleven])
    assert lin is not None and lin.linear
    lo, hi = sorted(b.kv_bytes_per_token or 0 for b in (six, eleven))
    assert lin.spread == pytest.approx(hi / lo - 1) and lin.spread < 0.01
    text = lin.describe()
    assert "checked linear over 2 boots" in text and text.endswith(": linear")
    assert "6.00 GiB/136,770 tokens at window 131,072" in text
    bent = kv_linearity([six, boot("wf-bent", 3.0, 11.0, 210_000, 196_608)])
    assert bent is not None and not bent.linear and "NOT linear" in bent.describe()
    assert bent.to_json()["boots"][1]["boot"] == "wf-bent"


def test_linearity_needs_two_different_pools():
    six = boot("wf-6", 1.0, 6.0, 136_770, 131_072)
    assert kv_linearity([]) is None and kv_linearity([six]) is None
    # the same pin and window booted twice is one point (the newest kept)
    assert kv_linearity([six, boot("wf-again", 2.0, 6.0, 136_000, 131_072)]) is None
    no_kv = BootFigures("wf-w", 3.0, "c", 98.86, None, None, None, 131_072)
    assert kv_linearity([six, no_kv]) is None


@given(st.floats(1.0, 60.0), st.floats(1.0, 60.0), st.integers(10_000, 200_000))
def test_pools_of_one_bytes_per_token_are_always_linear(a_gib, b_gib, bpt):
    boots = [boot(f"wf-{i}", float(i), g, int(g * 2**30 / bpt), 131_072 * (i + 1))
             for i, g in enumerate((a_gib, b_gib))]
    lin = kv_linearity(boots)
    assert lin is not None and lin.linear
