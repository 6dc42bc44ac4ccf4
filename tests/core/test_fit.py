"""The fit calculator reproduces every figure of the night-shift seeds."""

from __future__ import annotations

import dataclasses

import pytest

from sparktui.core.fit import GIB, fit
from sparktui.core.recipe_load import load_recipe


@pytest.fixture
def recipe(shipped_config):
    return lambda name: load_recipe(shipped_config, name)


def _with(r, **engine):
    return dataclasses.replace(r, engine_args=dataclasses.replace(r.engine_args, **engine))


def test_boot_d_refused_on_4_with_its_numbers(shipped_config, recipe):
    report = fit(shipped_config, recipe("dsv41-flash-r37-4x-eager"), "4nodes-switch")
    assert report.verdict == "refused"
    assert report.weights_per_rank_gb == pytest.approx(127.6, abs=0.05)
    text = " ".join(report.reasons)
    assert "127.6 GB/node + process > 121.6 GiB" in text
    assert "OOM-thrash" in text


def test_boot_d_fits_on_8(shipped_config, recipe):
    report = fit(shipped_config, recipe("dsv41-flash-r37-4x-eager"), "8nodes-switch")
    assert report.verdict == "fits", report.reasons
    assert report.weights_per_rank_gb == pytest.approx(63.8, abs=0.05)
    assert report.tp == 8 and any("TP scaled from 4" in n for n in report.notes)


def test_glm_native_8x_figures(shipped_config, recipe):
    r = recipe("glm53-full-native-8x-dspark8")
    report = fit(shipped_config, r, "8nodes-switch")
    assert report.weights_per_rank_gb == pytest.approx(94.2, abs=0.05)
    assert report.kv_available_gib * GIB / 1e9 == pytest.approx(6.8, abs=0.05)   # ~6.8 GB KV
    assert report.kv_needed_gb == pytest.approx(3.45, abs=0.01)                  # 64K request
    assert report.concurrency == pytest.approx(1.97, abs=0.02)                    # "1.9x"
    assert report.verdict == "fits"
    at_96k = fit(shipped_config, _with(r, max_model_len=98304), "8nodes-switch")
    assert at_96k.kv_needed_gb == pytest.approx(5.1, abs=0.1)
    assert at_96k.concurrency == pytest.approx(1.3, abs=0.05)
    at_512k = fit(shipped_config, _with(r, max_model_len=524288), "8nodes-switch")
    assert at_512k.verdict == "refused"
    # The seed says 26.3 GB; 524,288 x 52.7 KB is 27.6 GB (26.3 matches ~500K tokens).
    assert at_512k.kv_needed_gb == pytest.approx(27.6, abs=0.1)
    assert "cap max_model_len at 129,094" in at_512k.reasons[0]


def test_gmu_091_refused_by_admission_085_admitted(shipped_config, recipe):
    lab = fit(shipped_config, recipe("dsv41-flash-8x-lab-gmu091"), "8nodes-switch")
    assert lab.verdict == "refused"
    assert lab.gmu_budget_gib == pytest.approx(110.7, abs=0.05)
    assert "free 108.78 < 110.66 required" in lab.reasons[0]
    assert "<= 0.89" in lab.reasons[0]
    prod = fit(shipped_config, recipe("dsv41-flash-8x"), "8nodes-switch")
    assert prod.verdict == "fits"


def test_dsv41_8x_pool_matches_the_boot_log(shipped_config, recipe):
    report = fit(shipped_config, recipe("dsv41-flash-8x"), "8nodes-switch")
    assert report.kv_available_gib == pytest.approx(24.5, abs=0.05)
    assert report.pool_tokens == pytest.approx(2_584_421, rel=0.001)
    assert report.concurrency == pytest.approx(4.93, abs=0.01)


def test_kv_pin_8_refused_9_fits(shipped_config, recipe):
    short = fit(shipped_config, recipe("glm53-full-mxfp4-4x-dspark8-pin8"), "4nodes-switch")
    assert short.verdict == "refused"
    assert short.kv_needed_gib == pytest.approx(8.08, abs=0.005)
    assert "short by 0.08 GiB" in short.reasons[0]
    assert "raise kv_cache_memory_gib to >= 8.08" in short.reasons[0]
    ok = fit(shipped_config, recipe("glm53-full-mxfp4-4x-dspark8"), "4nodes-switch")
    assert ok.verdict == "fits"
    assert ok.pool_tokens == pytest.approx(145_664, rel=0.005)   # boot 6's pool
    assert ok.concurrency == pytest.approx(1.11, abs=0.005)


def test_window_max_is_pin_over_52_7_kb(shipped_config, recipe):
    r = _with(recipe("glm53-mxfp4-fp8-4x-r39"), kv_cache_memory_gib=4.0, max_model_len=65536)
    assert fit(shipped_config, r, "4nodes-switch-b").max_window_tokens == 79_616


def test_prefill_scratch_longest_safe_prompt(shipped_config, recipe):
    incident = fit(shipped_config, recipe("glm53-mxfp4-fp8-4x-r39-196k"), "4nodes-switch-b")
    assert incident.verdict == "refused"
    assert incident.longest_safe_prompt_tokens < 150_000          # the 22:45 prompt hung it
    assert any("prefill scratch" in x for x in incident.reasons)
    safe = fit(shipped_config, _with(recipe("glm53-mxfp4-fp8-4x-r39"), kv_cache_memory_gib=7.0),
               "4nodes-switch-b")
    assert safe.longest_safe_prompt_tokens >= 131_072
    assert safe.verdict == "fits"


def test_unmeasured_kv_is_a_note_not_a_guess(shipped_config, recipe):
    report = fit(shipped_config, recipe("glm53-flash-eugr-2x"), "2nodes-dac")
    assert report.max_window_tokens is None
    assert any("not measured" in n for n in report.notes)


def test_json_has_the_named_keys(shipped_config, recipe):
    data = fit(shipped_config, recipe("dsv41-flash-r37-4x-eager"), "4nodes-switch").to_json()
    for key in ("verdict", "weights_per_rank_gb", "kv_needed_gb", "max_window_tokens", "reasons"):
        assert key in data
    assert data["verdict"] == "refused" and isinstance(data["reasons"], list)


def test_an_unknown_kv_size_never_turns_a_refusal_into_a_fit(shipped_config, recipe):
    """Issue 27: kv_bytes_per_token = 0 made the refused pin8 recipe FITS
    ("largest window 1,561,806")."""
    r = recipe("glm53-full-mxfp4-4x-dspark8-pin8")
    blind = dataclasses.replace(r, model=dataclasses.replace(r.model, kv_bytes_per_token=0))
    report = fit(shipped_config, blind, "4nodes-switch")
    assert report.verdict == "unknown"
    assert report.max_window_tokens is None and report.concurrency is None
    assert "KV bytes per token is unknown" in report.unknowns[0]
    from sparktui.ops.guards import fit_verdict

    v = fit_verdict(report)
    assert not v.passed and "unknown" in v.message


def test_a_written_zero_kv_size_is_refused_at_load(shipped_config, tmp_path):
    import shutil

    from sparktui.core.errors import InputError

    src = shipped_config.recipes_dir / "glm53-full-mxfp4-4x-dspark8-pin8"
    dst = tmp_path / "recipes" / src.name
    shutil.copytree(src, dst)
    text = (dst / "recipe.toml").read_text()
    import re

    (dst / "recipe.toml").write_text(re.sub(r"(?m)^kv_bytes_per_token = \d+",
                                            "kv_bytes_per_token = 0", text))
    cfg = dataclasses.replace(shipped_config, recipes_dir=tmp_path / "recipes")
    with pytest.raises(InputError, match=r"model.kv_bytes_per_token.*> 0"):
        load_recipe(cfg, src.name)
