"""sparktui record: a measured figure written back with the recipe's comments
kept; an edit that would make the recipe invalid writes nothing."""

from __future__ import annotations

import tomllib

from sparktui.cli.main import main


def test_record_keeps_comments_and_validates(config_copy, capsys):
    config = config_copy()
    path = config.parent / "recipes" / "glm53-mxfp4-fp8-4x-r39" / "recipe.toml"
    before = path.read_text()
    code = main(["record", "glm53-mxfp4-fp8-4x-r39", "model.kv_bytes_per_token", "49000",
                 "--note", "measured 2026-11-30: 6 GiB pin / 131,497 tokens",
                 "--config", str(config)])
    assert code == 0, capsys.readouterr().err
    after = path.read_text()
    assert tomllib.loads(after)["model"]["kv_bytes_per_token"] == 49000
    assert "# measured 2026-11-30: 6 GiB pin / 131,497 tokens" in after
    assert "# 2026-10-22 night: GLM-5.3 (full)" in after         # the header comment stays
    assert after.count("\n") == before.count("\n")
    code = main(["fit", "glm53-mxfp4-fp8-4x-r39", "--json", "--config", str(config)])
    assert code == 0                                             # the window now fits


def test_record_refuses_an_invalid_value_and_writes_nothing(config_copy, capsys):
    config = config_copy()
    path = config.parent / "recipes" / "dsv41-flash-8x" / "recipe.toml"
    before = path.read_text()
    code = main(["record", "dsv41-flash-8x", "engine_args.gpu_memory_utilization", "high",
                 "--config", str(config)])
    err = capsys.readouterr().err
    assert code == 2 and "engine_args.gpu_memory_utilization" in err
    assert path.read_text() == before
    assert not list(path.parent.glob(".recipe.*"))


def test_record_refuses_non_finite_and_out_of_range(config_copy, capsys):
    config = config_copy()
    path = config.parent / "recipes" / "dsv41-flash-r37-4x-eager" / "recipe.toml"
    before = path.read_text()
    for key, value, says in (("fit.pinned_extras_gib", "nan", "finite"),
                             ("model.size_gb", "inf", "finite"),
                             ("engine_args.gpu_memory_utilization", "1.5", "out of range"),
                             ("port", "0", "out of range")):
        code = main(["record", "dsv41-flash-r37-4x-eager", key, value, "--config", str(config)])
        err = capsys.readouterr().err
        assert code == 2 and f"{path}:" in err and key in err and says in err, err
        assert path.read_text() == before


def test_record_keeps_the_file_mode(config_copy, capsys):
    config = config_copy()
    path = config.parent / "recipes" / "dsv41-flash-8x" / "recipe.toml"
    path.chmod(0o644)
    assert main(["record", "dsv41-flash-8x", "model.shards", "40",
                 "--config", str(config)]) == 0, capsys.readouterr().err
    assert path.stat().st_mode & 0o777 == 0o644


def test_record_boolean_over_a_commented_value(config_copy, capsys):
    config = config_copy()
    path = config.parent / "recipes" / "dsv41-flash-8x" / "recipe.toml"
    main(["record", "dsv41-flash-8x", "engine_args.max_num_seqs", "4", "--note", "measured",
          "--config", str(config)])
    code = main(["record", "dsv41-flash-8x", "engine_args.max_num_seqs", "true",
                 "--config", str(config)])
    err = capsys.readouterr().err
    assert code == 2 and "engine_args.max_num_seqs" in err and "Traceback" not in err
    assert "max_num_seqs = 4" in path.read_text()


def test_record_of_hundreds_of_digits_is_an_error_naming_the_key(config_copy, capsys):
    """Issue 27: a 400-digit value was an OverflowError (exit 70)."""
    config = config_copy()
    path = config.parent / "recipes" / "dsv41-flash-8x" / "recipe.toml"
    before = path.read_text()
    for value in ("9" * 400, "9" * 5000, "-" + "9" * 400):
        code = main(["record", "dsv41-flash-8x", "model.kv_bytes_per_token", value,
                     "--config", str(config)])
        err = capsys.readouterr().err
        assert code == 2 and "model.kv_bytes_per_token" in err and "unexpected" not in err
    assert path.read_text() == before
