"""`sparktui check` warns on a lane whose engine the console cannot observe
(issue 26): vLLM with ``--disable-log-stats`` keeps no stat logger (0.33
``v1/engine/async_llm.py:159``, ``:204-214``), so no Prometheus one
(``v1/metrics/loggers.py:1416-1419``) and no ``vllm:`` series, while
``/metrics`` itself still answers (``entrypoints/serve/instrumentator/metrics.py:56-81``,
mounted whatever the flag): the warning says so, not "without /metrics". An
SGLang lane as we render it always has ``--enable-metrics`` (0.5.23 serves no
/metrics without it, ``srt/arg_groups/fields/observability.py:70``), so no
shipped lane warns. The simulator answers the same way
(tests/sim/test_dialects_sim.py)."""

from __future__ import annotations

from pathlib import Path

from sparktui.cli.main import main

WORDS = "still answers /metrics, but with no vllm: series"


def test_check_warns_on_an_unobservable_lane_and_still_passes(capsys, config_copy) -> None:
    path = config_copy()
    code = main(["check", "--config", str(path)])
    out = capsys.readouterr().out
    assert code == 0 and WORDS not in out, out
    recipe = Path(path).parent / "recipes" / "glm53-flash-eugr-2x" / "recipe.toml"
    text = recipe.read_text()
    recipe.write_text(text.replace('extra_args = ["--reasoning-parser"',
                                   'extra_args = ["--disable-log-stats", "--reasoning-parser"'))
    code = main(["check", "--config", str(path)])
    out = capsys.readouterr().out
    warned = [line for line in out.splitlines() if WORDS in line]
    assert code == 0, out
    assert len(warned) == 1 and warned[0].startswith("warning: ") and \
        "glm53-flash-eugr-2x" in warned[0] and "--disable-log-stats" in warned[0], out
    assert "without /metrics" not in out  # it has /metrics: its own series are what go
