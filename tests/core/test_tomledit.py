import tomllib

from sparktui.core.tomledit import set_value

DOC = """# recipe header comment
engine = "vllm"

[model]
repo = "a/b"            # the repo
weights_per_rank_gib = 1.0   # measured
"""


def test_set_value_keeps_comments_and_other_keys():
    out = set_value(DOC, ("model", "weights_per_rank_gib"), 98.86)
    assert "# recipe header comment" in out and "# the repo" in out and "measured" in out
    assert tomllib.loads(out)["model"] == {"repo": "a/b", "weights_per_rank_gib": 98.86}


def test_set_value_creates_missing_tables():
    out = set_value(DOC, ("fit", "runtime_reserve_gib"), 4.0)
    assert tomllib.loads(out)["fit"]["runtime_reserve_gib"] == 4.0
    assert out.startswith("# recipe header comment")
