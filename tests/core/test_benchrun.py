"""The bench table's arithmetic (its lists parse with core/envelope.py's one
parser, tested there): a cell is the mean of its requests with each figure's
spread, and only a drop beyond the larger spread (at least 8 %) is flagged, in
the direction that is worse."""

from __future__ import annotations

from sparktui.core.benchrun import cell_of, markdown, regressions
from sparktui.core.qualify import Bench, BenchClock


def bench(pp: float, tg: float, ttft: float) -> Bench:
    return Bench(0, 100, 64, ttft, tg, pp)


def test_a_cell_is_the_mean_with_each_figures_spread():
    c = cell_of(0, 2, [bench(900, 30, 1000), bench(300, 30, 3000)])
    assert (c.prefill_tps, c.decode_tps, c.ttft_ms) == (600, 30, 2000)
    assert c.spread == {"prefill_tps": 1.0, "decode_tps": 0.0, "ttft_ms": 1.0}


def test_only_a_drop_beyond_the_spread_is_flagged():
    before = [{"depth": 0, "concurrency": 1, "prefill_tps": 900, "decode_tps": 33.2,
               "ttft_ms": 2193, "spread": {"prefill_tps": 0, "decode_tps": 0, "ttft_ms": 0},
               "clock": "engine"}]
    same = cell_of(0, 1, [bench(880, 31.5, 2250)])  # -2 %, -5 %, +3 %: run-to-run noise
    assert regressions([same], before) == []
    slow = cell_of(0, 1, [bench(900, 23.2, 2193)])
    assert regressions([slow], before) == [
        "d0 c1 decode 23.2 vs 33.2 (-30%, beyond the 8% spread)"]
    late = cell_of(0, 1, [bench(900, 33.2, 3000)])
    assert regressions([late], before) == [
        "d0 c1 TTFT 3,000.0 vs 2,193.0 (+37%, beyond the 8% spread)"]
    faster = cell_of(0, 1, [bench(1300, 50, 1000)])
    assert regressions([faster], before) == []
    assert regressions([slow], [{**before[0], "depth": 4096}]) == []  # another cell


def test_cells_on_two_clocks_are_not_compared():
    """A report from before the engine timed the bench was the client's clock
    (60x apart from the engine's beside a fast simulator): no regression read
    across them; the table says which cells the client timed."""
    old = {"depth": 0, "concurrency": 1, "prefill_tps": 90_000, "decode_tps": 2000.0,
           "ttft_ms": 20, "spread": {}}
    now = cell_of(0, 1, [bench(900, 33.2, 2193)])
    assert now.clock is BenchClock.ENGINE and regressions([now], [old]) == []
    assert regressions([now], [{**old, "clock": "engine"}])
    mixed = cell_of(0, 2, [bench(900, 30, 1000),
                           Bench(0, 100, 64, 1000, 30, 900, BenchClock.CLIENT)])
    assert mixed.clock is BenchClock.CLIENT
    assert mixed.describe().endswith("(on the client's clock)")
    md = markdown("lane", "2026-12-02_141000", [now, mixed], [], "")
    assert "except d0 c2: the client's" in md


def test_the_markdown_has_the_table_and_the_verdict():
    md = markdown("lane", "2026-12-02_141000", [cell_of(0, 1, [bench(892, 33.2, 2193)])],
                  ["d0 c1 decode ..."], "old_bench.json")
    assert "| 0 | 1 | 892 | 33.2 | 2,193 |" in md
    assert "Compared with old_bench.json: **regressions:**\n- d0 c1 decode ..." in md
