"""The ladder's arithmetic: count lists (rungs, bench depths) parse strictly
(increasing, K = 1024), the least-squares line recovers a and b, the next rung
is refused when its predicted scratch leaves less than the reserve, and the
ceiling is the longest prompt that leaves it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparktui.core.envelope import (
    DEFAULT_RUNGS,
    MAX_RUNG_TOKENS,
    Rung,
    check_rung,
    fit_scratch,
    parse_counts,
    rung_scratch,
)

KIB_PER_GIB = 1024 * 1024


def rungs(text: str) -> tuple[int, ...]:
    return parse_counts(text, "--rungs", 1, MAX_RUNG_TOKENS)


def test_rungs_parse_with_k_as_1024():
    assert rungs("8K,32K,64K,128K") == DEFAULT_RUNGS
    assert rungs("1000, 2k") == (1000, 2048)


@pytest.mark.parametrize("text,words", [
    ("8K,8K", "strictly increasing"), ("32K,8K", "strictly increasing"),
    ("8M", "not a whole number: '8M'"), ("", "not a whole number"), ("0", r"0 is outside"),
    ("8K,,16K", "not a whole number"),
])
def test_bad_rungs_are_refused_with_the_flag_and_the_item(text, words):
    with pytest.raises(ValueError, match=f"^--rungs: .*{words}"):
        rungs(text)


def test_the_same_parser_reads_bench_lists():
    """One parser for every comma list of counts (bench's depths and concurrency too)."""
    assert parse_counts("0,4096,8K", "--depths", 0, 10**6) == (0, 4096, 8192)
    with pytest.raises(ValueError, match="--depths: not a whole number: 'x'"):
        parse_counts("0,x", "--depths", 0, 10**6)
    with pytest.raises(ValueError, match=r"--concurrency: .*strictly increasing \(1 after 2\)"):
        parse_counts("2,1", "--concurrency", 1, 64)
    with pytest.raises(ValueError, match=r"outside 1\.\.64"):
        parse_counts("0", "--concurrency", 1, 64)


@given(st.lists(st.integers(1, 4096), min_size=1, max_size=6, unique=True))
def test_any_increasing_list_round_trips(ks):
    ks = sorted(ks)
    assert rungs(",".join(f"{k}K" for k in ks)) == tuple(k * 1024 for k in ks)


@given(st.text(max_size=30), st.integers(0, 10), st.integers(10, 10**6))
def test_the_parser_only_raises_value_error(text, lo, hi):
    try:
        out = parse_counts(text, "--x", lo, hi)
    except ValueError:
        return
    assert list(out) == sorted(set(out)) and all(lo <= n <= hi for n in out)


@given(st.floats(0, 4), st.floats(1e-6, 1e-4))
def test_the_line_is_recovered(a, b):
    rungs = [Rung(n, 10.0, a + b * n, True) for n in DEFAULT_RUNGS]
    fit = fit_scratch(rungs)
    assert fit is not None
    assert fit.a_gib == pytest.approx(a, abs=1e-6)
    assert fit.b_gib_per_token == pytest.approx(b, rel=1e-6)
    assert fit.residual_gib < 1e-6


def test_the_rung_that_would_leave_less_than_the_reserve_is_refused():
    b = 34 / KIB_PER_GIB
    rungs = [Rung(n, 0.0, 0.6 + b * n, True) for n in (8192, 32768, 65536)]
    ok = check_rung(65536, rungs[:2], 4.92, 1.0)
    assert ok.ok and ok.predicted_scratch_gib == pytest.approx(0.6 + b * 65536)
    refused = check_rung(131072, rungs, 4.92, 1.0)
    assert not refused.ok
    assert "131,072 tokens refused: predicted scratch 4.85 GiB leaves 0.07 GiB" in \
        refused.message
    fit = fit_scratch(rungs)
    assert fit is not None
    ceiling = fit.ceiling(4.92, 1.0)
    assert ceiling == int((4.92 - 1.0 - 0.6) / b)
    assert check_rung(ceiling, rungs, 4.92, 1.0).ok
    assert not check_rung(ceiling + 100, rungs, 4.92, 1.0).ok


def test_one_rung_predicts_through_the_origin_and_none_lets_the_first_go():
    assert check_rung(8192, [], 1.0, 4.0).ok
    fit = fit_scratch([Rung(8192, 0.0, 1.0, True)])
    assert fit is not None and fit.a_gib == 0 and fit.predict(32768) == pytest.approx(4.0)
    assert fit_scratch([Rung(8192, 0.0, 1.0, False)]) is None


def test_scratch_is_the_worst_node_and_low_water_the_lowest():
    before = {"dgx5": 5 * KIB_PER_GIB, "dgx6": 6 * KIB_PER_GIB}
    low = {"dgx5": 4 * KIB_PER_GIB, "dgx6": 3 * KIB_PER_GIB}
    assert rung_scratch(before, low) == (3.0, 3.0)
    with pytest.raises(ValueError, match="no node was sampled"):
        rung_scratch(before, {})
