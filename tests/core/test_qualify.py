"""The quality gate's pure judgement: CER by edit distance, worst spans widened
to words, identifiers parsed from a JSON answer with reasoning around it, a
leading reasoning block skipped and reported, and the verdict order (garbled
before slow)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from sparktui.core.qualify import (
    ENGINE_TIMERS,
    BenchClock,
    EngineTiming,
    GateState,
    bench_from,
    check_copy,
    check_identifiers,
    copy_prompt,
    describe_gate,
    engine_timing,
    exports_timers,
    identifier_prompt,
    identifiers,
    judge,
    parse_identifiers,
    split_reasoning,
    worst_spans,
)
from sparktui.core.qualify_text import EN, PASSAGES, RU
from sparktui.core.recipe import QualifySpec


def test_passages_are_about_300_words_in_two_scripts():
    assert set(PASSAGES) == {"RU", "EN"}
    for text in PASSAGES.values():
        assert 280 <= len(text.split()) <= 350
    assert any("\u0400" <= ch <= "\u04ff" for ch in RU)
    assert EN.isascii()


def test_a_clean_copy_has_cer_zero():
    c = check_copy("RU", RU, RU)
    assert (c.edits, c.cer, c.spans, c.reasoning_chars) == (0, 0.0, (), 0)


def test_the_seeds_typos_are_quoted_as_whole_words():
    damaged = RU.replace("масштабировать", "маштабировать").replace("управляемой",
                                                                     "упровляемой")
    c = check_copy("RU", RU, damaged)
    assert c.edits == 2
    assert [s.quote() for s in c.spans] == ["«маштабировать» for «масштабировать»",
                                            "«упровляемой» for «управляемой»"]


def test_worst_spans_keep_the_most_damaged_words_in_text_order():
    ref = "alpha beta gamma delta epsilon"
    got = "alpha bxxa gamma dexta epsilon"
    spans = worst_spans(ref, got, limit=1)
    assert [(s.expected, s.got, s.edits) for s in spans] == [("beta", "bxxa", 2)]


def test_a_leading_plan_is_skipped_and_reported():
    plan = "The user wants the text copied exactly. I will do that.\n\n"
    c = check_copy("EN", EN, plan + EN)
    assert c.edits == 0 and c.reasoning_chars == len(plan.strip())
    body, reasoning = split_reasoning("<think>plan</think>\n" + EN, EN)
    assert body == EN and reasoning == "<think>plan</think>"


def test_garbage_in_front_of_a_garbled_start_counts_as_damage():
    c = check_copy("EN", EN, "xyz " + EN)
    assert c.edits == 4 and c.reasoning_chars == 0


def test_identifiers_are_six_distinct_kinds_and_reproducible():
    ids = identifiers(42)
    assert ids == identifiers(42) and ids != identifiers(43)
    assert len(ids) == 6 and len(set(ids)) == 6
    hex_id, snake, path, number, uid, tag = ids
    int(hex_id, 16)
    assert "_" in snake and snake == snake.lower()
    assert path.startswith("/mnt/nas/") and path.endswith(".safetensors")
    assert "," in number and "." in number
    assert uid.count("-") == 4 and "+g" in tag
    assert all(i in identifier_prompt(ids) for i in ids)
    assert EN in copy_prompt(EN)


@given(st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=6),
       st.text(max_size=40))
def test_identifiers_survive_reasoning_and_fences(items, noise):
    answer = f"{noise}\n```json\n{json.dumps({'identifiers': items})}\n```"
    assert parse_identifiers(answer) == tuple(items)


def test_identifier_differences_are_named():
    ids = identifiers(1)
    wrong = list(ids)
    wrong[3] = wrong[3].replace(",", "")
    check = check_identifiers(ids, json.dumps({"identifiers": wrong}))
    assert (check.ok, check.total) == (5, 6)
    assert check.differing() == [(ids[3], wrong[3])]
    assert check_identifiers(ids, "no json here").ok == 0


def test_bench_figures_in_the_seeds_units():
    b = bench_from(0, 1956, 128, 2.193, 127 / 33.2, BenchClock.ENGINE)
    assert b.describe() == "d0 c1: 892 pp / 33.2 tg / 2,193 ms"
    assert b.to_json()["clock"] == "engine"
    c = bench_from(0, 1956, 128, 2.193, 127 / 33.2, BenchClock.CLIENT)
    assert c.describe() == "d0 c1: 892 pp / 33.2 tg / 2,193 ms (on the client's clock)"


def test_a_journaled_bench_without_a_clock_was_the_clients():
    """Gates journaled before the engine timed the bench read as they were measured."""
    old = bench_from(0, 1956, 128, 2.193, 127 / 33.2, BenchClock.ENGINE).to_json()
    del old["clock"]
    text = describe_gate({"state": "qualified", "bench": old})
    assert text.endswith("d0 c1: 892 pp / 33.2 tg / 2,193 ms (on the client's clock)")


def timers(prefix: str, n: float, ttft: float, e2e: float) -> dict[str, float]:
    return {f"{prefix}:time_to_first_token_seconds_count": n,
            f"{prefix}:time_to_first_token_seconds_sum": ttft,
            f"{prefix}:e2e_request_latency_seconds_count": n,
            f"{prefix}:e2e_request_latency_seconds_sum": e2e,
            f"{prefix}:generation_tokens_total": 7.0 * n}


@given(prefix=st.sampled_from(["vllm", "sglang"]), n=st.integers(0, 10_000),
       sums=st.tuples(st.floats(0, 1e6), st.floats(0, 1e6)),
       ttft=st.floats(1e-4, 600.0), decode=st.floats(0.0, 600.0))
def test_the_engine_times_the_one_request_between_two_answers(prefix, n, sums, ttft, decode):
    """TTFT and decode are the timers' sums grown by the one request, on the
    engine's clock: whoever reads them, on whatever clock, gets these."""
    before = timers(prefix, n, sums[0], sums[0] + sums[1])
    after = timers(prefix, n + 1, sums[0] + ttft, sums[0] + sums[1] + ttft + decode)
    assert exports_timers(before) and exports_timers(after)
    got = engine_timing(before, after)
    assert got is not None
    assert abs(got.ttft_s - ttft) <= 1e-6 * max(1.0, sums[0])
    assert abs(got.decode_s - decode) <= 1e-6 * max(1.0, sum(sums))


@given(grew=st.integers(0, 5).filter(lambda g: g != 1))
def test_no_engine_timing_unless_exactly_one_request_finished(grew):
    """The canary's completion finishing inside the bench spoils the sums."""
    assert engine_timing(timers("vllm", 3, 1.0, 4.0), timers("vllm", 3 + grew, 2.0, 9.0)) is None


def test_no_engine_timing_without_both_timers():
    sglang_ttft_only = {"sglang:time_to_first_token_seconds_count": 1.0,
                        "sglang:time_to_first_token_seconds_sum": 0.5}
    assert not exports_timers(sglang_ttft_only) and not exports_timers({})
    assert engine_timing({}, sglang_ttft_only) is None
    assert engine_timing({}, timers("vllm", 1, 0.25, 2.25)) == EngineTiming(0.25, 2.0)
    assert {t.split(":")[0] for pair in ENGINE_TIMERS for t in pair} == {"vllm", "sglang"}


def test_garbled_wins_over_slow_and_slow_needs_a_floor():
    bench = bench_from(0, 100, 128, 0.5, 127 / 10.0, BenchClock.ENGINE)
    clean = (check_copy("EN", EN, EN),)
    ids = check_identifiers(identifiers(1), json.dumps({"identifiers": identifiers(1)}))
    assert judge("l", clean, ids, bench, QualifySpec()).state is GateState.QUALIFIED
    slow = judge("l", clean, ids, bench, QualifySpec(decode_tps_min=20.0))
    assert slow.state is GateState.SLOW and "floor 20" in slow.reasons[0]
    dirty = (check_copy("EN", EN, EN.replace("machines", "machenes")
                        .replace("graphics", "grophics").replace("memory", "mamory")
                        .replace("language", "languege").replace("morning", "murning")
                        .replace("operator", "oparator")),)
    garbled = judge("l", dirty, ids, bench, QualifySpec(decode_tps_min=20.0))
    assert garbled.state is GateState.GARBLED
    assert set(garbled.to_json()) == {"lane", "state", "cer", "identifiers_ok",
                                      "identifiers_total", "ttft_ms", "decode_tps",
                                      "prefill_tps"}
    text = describe_gate(garbled.detail())
    assert text.startswith("quality gate: GARBLED (EN 337-word text: 11 edits, CER 0.58 %")
    assert "«machenes» for «machines»" in text


def test_recipe_gate_keys_are_validated_with_file_and_line(config_copy, tmp_path):
    import pytest

    from sparktui.core.config_load import load_config
    from sparktui.core.errors import InputError
    from sparktui.core.recipe_load import load_recipe

    config = load_config(config_copy())
    recipe = tmp_path / "recipes" / "glm53-flash-eugr-2x" / "recipe.toml"
    base = recipe.read_text()
    recipe.write_text(base + "\n[qualify]\nmax_cer = 0.01\ndecode_tps_min = 30\n")
    assert load_recipe(config, "glm53-flash-eugr-2x").qualify.decode_tps_min == 30.0
    recipe.write_text(base + "\n[qualify]\ndecode_tps_min = -1\n")
    with pytest.raises(InputError) as err:
        load_recipe(config, "glm53-flash-eugr-2x")
    assert "recipe.toml:" in str(err.value.problems[0])
    assert "qualify.decode_tps_min" in str(err.value.problems[0])
