"""`sparktui fit` checks KV bytes per token linear across boots (issue 29): two
successful boots of a recipe with different KV pins, journaled, give one figure
(within 2 %) or the fit says it is not linear; with one boot it says nothing."""

from __future__ import annotations

import json

from sparktui.cli.main import main
from sparktui.core.config_load import load_config
from sparktui.core.measured import boot_figures
from sparktui.ops.journal import Journal

SAFE = "glm53-mxfp4-fp8-4x-r39"
CLUSTER = "4nodes-switch"


def journal_boot(config, wf: str, kv_gib: float, tokens: int, window: int) -> None:
    Journal.in_state_dir(config.state_dir()).append(
        wf, "end", workflow="serve", target=SAFE, ok=True, message="serving",
        detail={"recipe": SAFE, "cluster": CLUSTER, "outcome": "ready",
                "measured": boot_figures({"weights": 98.86, "kv": kv_gib}, tokens, window)})


def fit_json(path, capsys) -> dict:
    main(["fit", SAFE, "--cluster", CLUSTER, "--json", "--config", str(path)])
    return json.loads(capsys.readouterr().out)


def test_two_pins_of_one_bytes_per_token_are_linear(config_copy, tmp_path, capsys):
    path = config_copy(lambda t: t.replace('state_dir = "~/.local/state/sparktui"',
                                           f'state_dir = "{tmp_path / "state"}"'))
    config = load_config(path)
    journal_boot(config, "serve-a", 6.0, 136_770, 131_072)
    assert fit_json(path, capsys)["kv_linearity"] is None  # one boot: nothing to compare
    journal_boot(config, "serve-b", 11.0, 250_740, 196_608)
    lin = fit_json(path, capsys)["kv_linearity"]
    assert lin["linear"] and [b["boot"] for b in lin["boots"]] == ["serve-a", "serve-b"]
    main(["fit", SAFE, "--cluster", CLUSTER, "--config", str(path)])
    text = capsys.readouterr().out
    assert "KV bytes per token checked linear over 2 boots" in text and ": linear" in text
    journal_boot(config, "serve-c", 8.0, 150_000, 131_072)  # 57,266 B/token: bent
    lin = fit_json(path, capsys)["kv_linearity"]
    assert not lin["linear"] and len(lin["boots"]) == 3
    main(["fit", SAFE, "--cluster", CLUSTER, "--config", str(path)])
    assert "NOT linear" in capsys.readouterr().out
