"""Every failure line the engines print, as their own wheels write it
(src/sparktui/sim/dialects/*.json: the string and its ``file:line`` at vLLM
0.33.0, 0.11.0 and SGLang 0.5.23) under their own prefix, is a fatal
signature of the right kind -- including the ones no golden transcript
plays (``WorkerProc hit an exception.``, ``Frontend process failed during
engine core initialization``, SGLang's ``Subprocess ... crashed``);
0.33's logo names the version; and every form of SGLang's ``Prefill batch``
line (tests/fixtures/dialects/prefill_forms.py) is what the wheel's strings
build and reads as a prefill batch with its figures."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the fixtures
from fixtures.dialects.prefill_forms import FORMS, render
from sparktui.core.logsig import Kind, classify
from sparktui.sim.dialects import load

VLLM_BOTH: list[tuple[str, tuple[object, ...], Kind]] = [
    ("core_failed", (), Kind.ENGINE_FAILED),
    ("core_fatal", (), Kind.ENGINE_DEAD),
    ("core_init_failed", ("{'EngineCore_DP0': 1}",), Kind.ENGINE_FAILED),
    ("output_handler", (), Kind.ENGINE_FAILED),
    ("worker_failed_error", ("RuntimeError('NCCL error')",), Kind.WORKER_DIED),
    ("worker_hit", (), Kind.ENGINE_FAILED),
    ("workerproc_failed", (), Kind.ENGINE_FAILED),
    ("workerproc_failed_start", (), Kind.ENGINE_FAILED),
    ("rpc_timeout", ("sample_tokens",), Kind.RPC_TIMEOUT),
]
CASES: list[tuple[str, str, tuple[object, ...], Kind]] = [
    *(("vllm-0.33", *c) for c in VLLM_BOTH),
    *(("vllm-0.11", *c) for c in VLLM_BOTH),
    ("vllm-0.33", "frontend_failed", ("[ApiServer_0]",), Kind.ENGINE_FAILED),
    ("vllm-0.33", "mpclient_exit", (), Kind.ENGINE_DEAD),
    ("vllm-0.33", "worker_died", ("Worker_TP1", -9), Kind.WORKER_DIED),
    ("vllm-0.33", "oom_load", (), Kind.CUDA_OOM),
    ("vllm-0.11", "core_proc_died", ("EngineCore_DP0",), Kind.ENGINE_DEAD),
    ("vllm-0.11", "worker_died", ("Worker_TP1",), Kind.WORKER_DIED),
    ("sglang-0.5", "scheduler_died", (2, -9), Kind.WORKER_DIED),
    ("sglang-0.5", "scheduler_exception", ("Traceback (most recent call last):",),
     Kind.ENGINE_FAILED),
    ("sglang-0.5", "sigquit", (), Kind.ENGINE_FAILED),
    ("sglang-0.5", "subprocess_crashed", ("scheduler_0", 4242, -9), Kind.WORKER_DIED),
]


@pytest.mark.parametrize(("dialect", "key", "args", "kind"), CASES,
                         ids=[f"{c[0]}:{c[1]}" for c in CASES])
def test_each_failure_line_is_a_fatal_signature(dialect: str, key: str,
                                                args: tuple[object, ...], kind: Kind) -> None:
    d = load(dialect)
    line = d.log(key, *args, when=1.8e9, proc="EngineCore_DP0", pid=7, level="ERROR",
                 tp=" TP0")[0]
    ev = classify(line)
    assert ev is not None, (d.entry(key).source, line)
    assert ev.fatal and ev.kind is kind, (d.entry(key).source, line, ev)


@pytest.mark.parametrize("dialect", ["vllm-0.33", "vllm-0.11"])
def test_engine_dead_error_is_read_as_the_exception_it_is(dialect: str) -> None:
    """``EngineCore encountered an issue.`` is EngineDeadError's message
    (raised, never logged alone): it comes as the exception's line."""
    msg = load(dialect).msg("engine_dead")
    ev = classify(f"vllm.v1.engine.exceptions.EngineDeadError: {msg}")
    assert ev is not None and ev.fatal and ev.kind is Kind.ENGINE_DEAD


def test_the_033_logo_names_the_version() -> None:
    """vLLM 0.33 prints an ASCII logo (``entrypoints/common/startup.py:20``)
    instead of ``vLLM server version`` unless ``VLLM_DISABLE_LOG_LOGO=1``."""
    d = load("vllm-0.33")
    text = d.entry("logo").text
    for var in ("${w}", "${r}", "${o}", "${b}"):
        text = text.replace(var, "")
    lines = d.record(text % (d.version, "zai-org/GLM-4.5-Air-FP8"), when=1.8e9,
                     where=d.entry("version_call").where, proc="APIServer", pid=1)
    got = [ev for ev in map(classify, lines) if ev is not None]
    assert [(ev.kind, ev.fields.get("version")) for ev in got] == \
        [(Kind.ENGINE_VERSION, "0.33.0")]


@pytest.mark.parametrize(("form", "line", "keys", "fields"), FORMS, ids=[f[0] for f in FORMS])
def test_each_prefill_batch_form_is_the_wheels_and_reads_back(
        form: str, line: str, keys: tuple[str, ...], fields: dict[str, str]) -> None:
    """SGLang 0.5.23's prefill line in every form it takes: the golden line is
    what the dialect's strings (each with its file:line) build, and under the
    logger's prefix, with or without TP, it is a stats line with its batch,
    running requests and, for a plain pool, its token usage; never fatal."""
    d = load("sglang-0.5")
    assert render(d, keys) == line, (form, [d.entry(k).source for k in keys])
    assert "#token: " not in line
    for tp in ("", " TP0"):
        ev = classify(d.record(line, when=1.8e9, tp=tp)[0])
        assert ev is not None and ev.kind is Kind.STATS and not ev.fatal, (form, line)
        assert dict(ev.fields) == fields, (form, dict(ev.fields))
