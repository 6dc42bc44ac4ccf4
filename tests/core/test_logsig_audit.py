"""The parse-side audit of issue 26: every failure line the issue lists, as
the engine really prints it (its logger's prefix where it has one, vLLM 0.33's
``\\r`` before each newline of a multi-line record), is a signature of the
right kind, severity and advice; the root cause of vLLM's prefixed traceback
and its raw multiprocessing copy, of a chained ``raise ... from e``, of a
``raise X(`` frame before ``X: message`` and of SGLang's one-line traceback
is the line that says why; exit 137 is OOM only with the kernel's word.
Each case cites the wheel's ``file:line`` (docs/DIALECTS.md, "Parse-side
audit", is the table of them)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.advice import fatal_next_step
from sparktui.core.logsig import (
    Kind,
    Phase,
    Severity,
    classify,
    container_exit,
    message_of,
)
from sparktui.core.phases import PhaseTracker

# vLLM 0.33 logger.py:28-32 (_FORMAT): "(%(vllm_process_name)s pid=%(process)d)
# %(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s"; each
# newline of a record becomes "\r\n" + that header (logging_utils/formatter.py:76).
API = "(APIServer pid=1) "
CORE = "(EngineCore_DP0 pid=312) "
WORKER = "(Worker_TP0 pid=401) "


def v33(proc: str, level: str, where: str) -> str:
    return f"{proc}{level} 12-02 01:00:00 [{where}] "


# vLLM 0.11 utils/__init__.py:3460-3506 (_add_prefix): stdout and stderr of
# each process carry its coloured name, before the logger's header.
V11_API = "\x1b[1;36m(APIServer pid=1)\x1b[0;0m "
# SGLang 0.5.23 srt/utils/common.py:2630: "[%(asctime)s{prefix}] %(message)s",
# prefix " TP0" in a scheduler, none in the launcher.
SGL_TP = "[2026-12-02 01:04:09 TP0] "
SGL = "[2026-12-02 01:04:09] "

# (line as printed, kind, fields it must capture, a word of its advice, wheel cite)
AUDIT: list[tuple[str, Kind, dict[str, str], str, str]] = [
    (v33(API, "WARNING", "core_client.py:839")
     + "[shutdown] MPClient: engine core exited unexpectedly; starting cleanup",
     Kind.ENGINE_DEAD, {}, "first fatal line", "vllm 0.33.0 v1/engine/core_client.py:840"),
    (v33(WORKER, "ERROR", "multiproc_executor.py:1189") + "WorkerProc hit an exception.\r",
     Kind.ENGINE_FAILED, {}, "read the boot log (rank 0)",
     "vllm 0.33.0 v1/executor/multiproc_executor.py:1189"),
    (v33(WORKER, "ERROR", "multiproc_executor.py:1063") + "WorkerProc failed.\r",
     Kind.ENGINE_FAILED, {}, "read the boot log (rank 0)",
     "vllm 0.33.0 v1/executor/multiproc_executor.py:1063"),
    (v33(WORKER, "ERROR", "multiproc_executor.py:1057") + "WorkerProc failed to start.\r",
     Kind.ENGINE_FAILED, {}, "read the boot log (rank 0)",
     "vllm 0.33.0 v1/executor/multiproc_executor.py:1057"),
    # raised in the API server's main process: Python prints it, unprefixed
    ("RuntimeError: Frontend process failed during engine core initialization. See root "
     "cause above. Failed frontend proc(s): {'ApiServer_0': 1}",
     Kind.ENGINE_FAILED, {}, "read the boot log (rank 0)",
     "vllm 0.33.0 v1/engine/utils.py:1468-1472"),
    # PyTorch's C10D_NCCL_CHECK (torch/csrc/distributed/c10d/NCCLUtils.hpp: "NCCL
    # error in: " __FILE__ ":" __LINE__ ", " ncclGetErrorWithVersion), logged by
    # the worker's logger.exception
    (v33(WORKER, "ERROR", "multiproc_executor.py:1189") + "torch.distributed.DistBackendError: "
     "NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, "
     "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.5\r",
     Kind.NCCL_ERROR,
     {"where": "/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356",
      "error": "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version "
               "2.27.5"},
     "shared switch", "PyTorch c10d NCCLUtils.hpp C10D_NCCL_CHECK (not in the engine wheels)"),
    (v33(WORKER, "ERROR", "multiproc_executor.py:1189")
     + 'RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)',
     Kind.NCCL_ERROR, {"error": "unhandled cuda error (run with NCCL_DEBUG=INFO for details)"},
     "shared switch", "vllm 0.33.0 distributed/device_communicators/pynccl_wrapper.py:464"),
    (V11_API + "ERROR 12-02 01:00:00 [core_client.py:564] Engine core proc EngineCore_DP0 died "
     "unexpectedly, shutting down client.",
     Kind.ENGINE_DEAD, {"proc": "EngineCore_DP0"}, "first fatal line",
     "vllm 0.11.0 v1/engine/core_client.py:565-566"),
    # cudaErrorMemoryAllocation through PyTorch's C10_CUDA_CHECK
    # (c10/cuda/CUDAException.cpp: "CUDA error: " cudaGetErrorString)
    (v33(WORKER, "ERROR", "multiproc_executor.py:1189")
     + "torch.AcceleratorError: CUDA error: out of memory\r",
     Kind.CUDA_OOM, {}, "gpu_memory_utilization",
     "PyTorch c10/cuda/CUDAException.cpp (not in the engine wheels)"),
    ("RuntimeError: CUDA error: out of memory", Kind.CUDA_OOM, {}, "gpu_memory_utilization",
     "PyTorch c10/cuda/CUDAException.cpp (not in the engine wheels)"),
    # the assert's source line in the traceback: the AssertionError after it is bare
    (v33(CORE, "ERROR", "core.py:1584")
     + "    assert self.page_size_padded >= self.unpadded_page_size_bytes\r",
     Kind.PAGE_SIZE_ASSERT, {}, "kv_cache_dtype", "vllm 0.33.0 v1/kv_cache_interface.py:599"),
    (v33(CORE, "ERROR", "core.py:1584") + "    assert self.page_size_padded >= page_size\r",
     Kind.PAGE_SIZE_ASSERT, {}, "kv_cache_dtype", "vllm 0.33.0 v1/kv_cache_interface.py:1127"),
    (V11_API.replace("APIServer pid=1", "EngineCore_DP0 pid=312")
     + "    assert self.page_size_padded >= page_size",
     Kind.PAGE_SIZE_ASSERT, {}, "kv_cache_dtype", "vllm 0.11.0 v1/kv_cache_interface.py:231"),
    (SGL_TP + "Scheduler hit an exception: Traceback (most recent call last):",
     Kind.ENGINE_FAILED, {}, "read the boot log (rank 0)",
     "sglang 0.5.23 srt/managers/scheduler.py:6372"),
    (SGL + "Received sigquit from a child process. It usually means the child failed.",
     Kind.ENGINE_FAILED, {}, "read the boot log (rank 0)",
     "sglang 0.5.23 srt/entrypoints/engine.py:1977-1979"),
    ("RuntimeError: Rank 1 scheduler died during initialization (exit code: -9). If exit code "
     "is -9 (SIGKILL), a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to "
     "check.", Kind.WORKER_DIED, {"rank": "1", "exit_code": "-9"},
     "read the boot log (rank 0)", "sglang 0.5.23 srt/entrypoints/engine.py:2003-2009"),
    (SGL + "Subprocess scheduler_0 (pid=4242) crashed with exit code -9. Triggering SIGQUIT "
     "for cleanup...", Kind.WORKER_DIED, {"proc": "scheduler_0", "exit_code": "-9"},
     "read the boot log (rank 0)", "sglang 0.5.23 srt/utils/watchdog.py:216-220"),
    ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current "
     "value: mem_fraction_static=0.85", Kind.KV_TOO_SMALL, {}, "mem_fraction_static",
     "sglang 0.5.23 srt/model_executor/pool_configurator.py:96-98"),
]


@pytest.mark.parametrize(("line", "kind", "fields", "advice", "cite"), AUDIT,
                         ids=[c[4] for c in AUDIT])
def test_each_failure_line_as_printed(line: str, kind: Kind, fields: dict[str, str],
                                      advice: str, cite: str) -> None:
    ev = classify(line)
    assert ev is not None, cite
    assert (ev.kind, ev.severity, ev.phase) == (kind, Severity.FATAL, Phase.FAILED), cite
    assert {k: ev.fields.get(k) for k in fields} == fields, cite
    assert advice in fatal_next_step(ev.kind, 0), cite


def test_the_033_logo_as_the_newline_formatter_prints_it() -> None:
    """vllm 0.33.0 entrypoints/common/startup.py:16-38: the logo template
    (monochrome unless the colour formatter), one record whose every line
    carries the header; the version is on its second line."""
    header = v33(API, "INFO", "startup.py:38")
    logo = ("\n       █     █     █▄   ▄█\n ▄▄ ▄█ █     █     █ ▀▄▀ █  version %s\n"
            "  █▄█▀ █     █     █     █  model   %s\n   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀\n")
    record = header + (logo % ("0.33.0", "zai-org/GLM-4.5-Air-FP8")).replace("\n", "\r\n" + header)
    got = [ev for ev in map(classify, record.split("\n")) if ev is not None]
    assert [(ev.kind, ev.severity, ev.fields.get("version")) for ev in got] == \
        [(Kind.ENGINE_VERSION, Severity.INFO, "0.33.0")]
    # colour: "version \x1b[1m%s\x1b[0m" (the ${w}/${r} codes, startup.py:25-29)
    ev = classify(header + " \x1b[93m▄▄\x1b[0m \x1b[94m▄█\x1b[0m \x1b[1m█     █     █ ▀▄▀ █"
                           "\x1b[0m  version \x1b[1m0.33.0\x1b[0m\r")
    assert ev is not None and ev.fields.get("version") == "0.33.0"


def test_a_quantized_load_weight_end_is_load_done() -> None:
    """sglang 0.5.23 srt/model_executor/model_runner.py:1372-1379 with
    ``get_quantization_config_log_str`` (srt/configs/model_config.py:1899-1917)
    between ``type=`` and ``avail mem=``."""
    for quant in ("quant=fp8, fmt=e4m3, ", "quant=gptq, bits=4, ",
                  "quant=modelopt, quant_algo=NVFP4, ", ""):
        ev = classify(SGL_TP + "Load weight end. elapsed=241.20 s, type=Glm4MoeForCausalLM, "
                      f"{quant}avail mem=89.55 GB, mem usage=29.87 GB.")
        assert ev is not None and ev.kind is Kind.LOAD_DONE and ev.phase is Phase.KV_ALLOC
        assert (ev.fields["type"], ev.fields["gb"]) == ("Glm4MoeForCausalLM", "29.87")


# ---- root causes -----------------------------------------------------------------

PY = "/usr/local/lib/python3.12/dist-packages"


def logged(header: str, message: str, traceback: list[str]) -> list[str]:
    """``logger.exception(message)`` under vLLM 0.33's NewLineFormatter:
    every line of the record has the header, all but the last end in ``\\r``."""
    text = "\n".join([message, *traceback])
    return (header + text.replace("\n", "\r\n" + header)).split("\n")


def raw(proc: str, traceback: list[str]) -> list[str]:
    """multiprocessing's copy (BaseProcess._bootstrap): ``Process NAME:`` and
    the traceback to stderr, which vLLM 0.33 no longer prefixes."""
    return [f"Process {proc}:", *traceback]


def feed(lines: list[str], rank: int = 0) -> PhaseTracker:
    t = PhaseTracker("l", stall_after_s=600, start=0.0)
    for i, line in enumerate(lines):
        t.feed(rank, line, float(i))
    return t


ADMISSION = [
    "Traceback (most recent call last):",
    f'  File "{PY}/vllm/v1/engine/core.py", line 1557, in run_engine_core',
    "    engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)",
    f'  File "{PY}/vllm/v1/worker/utils.py", line 762, in request_memory',
    "    raise ValueError(",
    "ValueError: Free memory on device cuda:0 (108.78/121.6 GiB) on startup is less than "
    "desired GPU memory utilization (0.91, 110.7 GiB). Decrease GPU memory utilization or "
    "reduce GPU memory used by other processes.",
]


def test_a_prefixed_traceback_then_its_raw_copy_gives_one_cause() -> None:
    """vllm 0.33.0 v1/engine/core.py:1584 ``logger.exception("EngineCore failed
    to start.")`` then ``raise e`` (:1588): the prefixed record, then Python's
    copy. The failure is the generic line, its cause the error, once."""
    lines = [*logged(v33(CORE, "ERROR", "core.py:1584"), "EngineCore failed to start.",
                     ADMISSION), *raw("EngineCore_DP0", ADMISSION)]
    f = feed(lines).failure
    assert f is not None and (f.kind, f.line) == (Kind.ENGINE_FAILED,
                                                  "EngineCore failed to start.")
    assert f.cause == ADMISSION[-1] and f.why is Kind.GPU_ADMISSION
    assert f.brief().startswith("rank 0: Free memory on device cuda:0 (108.78/121.6 GiB)")
    # the raw copy alone (a log read from its middle) says the same
    f = feed(raw("EngineCore_DP0", ADMISSION)).failure
    assert f is not None and f.kind is Kind.GPU_ADMISSION and f.line == ADMISSION[-1]


CHAINED = [
    "Traceback (most recent call last):",
    f'  File "{PY}/vllm/v1/executor/multiproc_executor.py", line 507, in get_response',
    "    status, result = mq.dequeue(timeout=dequeue_timeout)",
    f'  File "{PY}/vllm/distributed/device_communicators/shm_broadcast.py", line 828, '
    "in acquire_read",
    "    raise TimeoutError",
    "TimeoutError",
    "",
    "The above exception was the direct cause of the following exception:",
    "",
    "Traceback (most recent call last):",
    f'  File "{PY}/vllm/v1/engine/core.py", line 1574, in run_engine_core',
    "    engine_core.run_busy_loop()",
    f'  File "{PY}/vllm/v1/executor/multiproc_executor.py", line 509, in get_response',
    '    raise TimeoutError(f"RPC call to {method} timed out.") from e',
    "TimeoutError: RPC call to sample_tokens timed out.",
]


def test_a_chained_timeout_names_the_rpc_not_the_bare_inner_error() -> None:
    """vllm 0.33.0 v1/executor/multiproc_executor.py:508-509 ``raise
    TimeoutError(f"RPC call to {method} timed out.") from e`` over
    shm_broadcast.py:828's bare ``raise TimeoutError``, logged by core.py:1586
    and copied raw: the operator reads the RPC's name."""
    lines = [*logged(v33(CORE, "ERROR", "core.py:1586"), "EngineCore encountered a fatal error.",
                     CHAINED), *raw("EngineCore_DP0", CHAINED)]
    f = feed(lines).failure
    assert f is not None and f.kind is Kind.ENGINE_DEAD
    assert f.cause == "TimeoutError: RPC call to sample_tokens timed out."
    assert f.brief() == "rank 0: RPC call to sample_tokens timed out."
    assert f.why is Kind.RPC_TIMEOUT and "watch memory" in fatal_next_step(f.why, 0)
    # without the generic line first (a log whose start was lost, an uncaught
    # error Python prints raw): the bare inner TimeoutError ends the first
    # traceback and is the first fatal line, but the chain's outer error is
    # its cause, its brief and its advice
    f = feed(raw("EngineCore_DP0", CHAINED)).failure
    assert f is not None and (f.kind, f.line) == (Kind.EXCEPTION, "TimeoutError")
    assert f.cause == "TimeoutError: RPC call to sample_tokens timed out."
    assert f.brief() == "rank 0: RPC call to sample_tokens timed out."
    assert f.why is Kind.RPC_TIMEOUT


NCCL = [
    "Traceback (most recent call last):",
    f'  File "{PY}/vllm/distributed/device_communicators/pynccl_wrapper.py", line 464, '
    "in NCCL_CHECK",
    '    raise RuntimeError(f"NCCL error: {error_str}")',
    "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
]


@pytest.mark.parametrize("header", ["", v33(WORKER, "ERROR", "multiproc_executor.py:1189")])
def test_a_raise_frame_is_code_and_the_error_after_it_is_the_cause(header: str) -> None:
    """vllm 0.33.0 pynccl_wrapper.py:464: the frame's source line holds
    ``NCCL error: {error_str}`` but is code; the ``RuntimeError: NCCL error:``
    line after it is the error, under the worker's header (after
    multiproc_executor.py:1189's ``WorkerProc hit an exception.``) or raw."""
    assert classify(header + NCCL[2]) is not None
    assert classify(header + NCCL[2]).kind is Kind.FRAME  # type: ignore[union-attr]
    if header:
        f = feed(logged(header, "WorkerProc hit an exception.", NCCL)).failure
        assert f is not None and (f.kind, f.line) == (Kind.ENGINE_FAILED,
                                                      "WorkerProc hit an exception.")
        assert f.cause == NCCL[-1] and f.why is Kind.NCCL_ERROR
    else:
        f = feed(NCCL).failure
        assert f is not None and (f.kind, f.line) == (Kind.NCCL_ERROR, NCCL[-1])


def test_sglangs_one_line_traceback_has_its_root_cause() -> None:
    """sglang 0.5.23 srt/managers/scheduler.py:6371-6372: ``get_exception_traceback()``
    (sglang/utils.py:119-122) in one record: the header holds the first line of
    the traceback, the rest follows raw; then the launcher's sigquit line
    (engine.py:1977-1979) and the 137 of kill_process_tree. The cause is the
    pool configurator's error (pool_configurator.py:96-98), not the SIGKILL."""
    lines = [
        SGL_TP + "Scheduler hit an exception: Traceback (most recent call last):",
        f'  File "{PY}/sglang/srt/managers/scheduler.py", line 6367, in run_scheduler_process',
        "    scheduler = Scheduler(server_args, port_args)",
        f'  File "{PY}/sglang/srt/model_executor/pool_configurator.py", line 98, '
        "in __post_init__",
        "    raise RuntimeError(msg)",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
        "Current value: mem_fraction_static=0.85",
        "",
        SGL + "Received sigquit from a child process. It usually means the child failed.",
    ]
    t = feed(lines)
    t.feed_event(0, container_exit(137), 99.0)
    f = t.failure
    assert f is not None and f.kind is Kind.ENGINE_FAILED
    assert f.line == "Scheduler hit an exception: Traceback (most recent call last):"
    assert f.cause == lines[5] and f.why is Kind.KV_TOO_SMALL
    assert "mem_fraction_static" in fatal_next_step(f.why, f.rank)
    assert f.brief() == "rank 0: Not enough memory. Please try to increase " \
                        "--mem-fraction-static. Current value: mem_fraction_static=0.85"
    assert "OOM" not in f.describe() and "SIGKILL" not in f.describe()


# ---- exit 137 ----------------------------------------------------------------------

def test_137_is_a_sigkill_and_oom_only_with_the_kernels_word() -> None:
    """docker's ``State.OOMKilled`` (the kernel's memcg oom-kill) is the only
    memory evidence container_exit takes; 137 alone is a SIGKILL (SGLang's
    kill_process_tree, srt/utils/common.py, after a plain Python error; docker
    rm -f). The advice sends the operator to the kernel journal."""
    bare = container_exit(137)
    assert bare.fatal and bare.kind is Kind.CONTAINER_EXIT
    assert bare.text == "container killed (SIGKILL)" and bare.fields["oom_killed"] == "false"
    oom = container_exit(137, oom_killed=True)
    assert oom.text == "container killed (SIGKILL), OOMKilled"
    assert oom.fields["oom_killed"] == "true"
    assert container_exit(1).text == "container exited with code 1"
    advice = fatal_next_step(Kind.CONTAINER_EXIT, 0)
    assert "an OOM only if" in advice and "oom-killer" in advice
    t = PhaseTracker("l", stall_after_s=600, start=0.0)
    t.feed_event(2, bare, 1.0)
    assert t.failure is not None and t.failure.brief() == "rank 2: container killed (SIGKILL)"


def test_a_kernel_oom_kill_line_is_evidence_not_a_lane_failure() -> None:
    """The kernel journal's oom-killer lines are warnings the incident bundle
    and the thrash detector read, never a lane's fatal line by themselves."""
    for line in ("2026-12-02T01:04:08.123456+0000 dgx6 kernel: python3 invoked oom-killer: "
                 "gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0",
                 "2026-12-02T01:04:08.223456+0000 dgx6 kernel: Out of memory: Killed process "
                 "4242 (python3) total-vm:1234kB, anon-rss:1234kB"):
        ev = classify(line)
        assert ev is not None and ev.kind is Kind.KERNEL_OOM_KILL
        assert ev.severity is Severity.WARNING and not ev.fatal


# ---- prefixes ----------------------------------------------------------------------

STAMPS = st.sampled_from(["", "2026-12-02T01:00:00.123456789Z "])  # docker --timestamps
PREFIXES = st.sampled_from([
    "",
    v33(API, "INFO", "loggers.py:259"), v33(CORE, "ERROR", "core.py:1584"),
    v33(WORKER, "WARNING", "multiproc_executor.py:1189"),
    "(EngineCore_DP0 pid=312) DEBUG 12-02 01:00:00 [v1/.../gpu/model_runner.py:399] ",
    V11_API + "INFO 12-02 01:00:00 [gpu_model_runner.py:2602] ", V11_API,
    SGL, SGL_TP, "[2026-12-02 01:04:09 DP0 TP1] ", "INFO:     ",
    "[2026-12-02 01:04:09] INFO:     ",  # SGLang's format for uvicorn (utils/common.py:3512)
])
MESSAGES = st.one_of(
    st.sampled_from([message_of(c[0]) for c in AUDIT]),
    st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), max_size=60),
)


@settings(max_examples=400, deadline=None)
@given(STAMPS, PREFIXES, MESSAGES)
def test_prefixes_change_nothing_but_the_text_around(stamp: str, prefix: str, msg: str) -> None:
    """A message under any logger prefix (and docker's stamp before it) reads
    as the message alone: same text, same verdict."""
    bare = message_of(msg)
    if bare != msg.rstrip() or not bare.strip():
        return  # a message that itself begins with a prefix, or blank
    if prefix.endswith("INFO:     ") and msg[:1].isspace():
        return  # uvicorn pads its level to 9 columns (``INFO:\\s+``); no message starts blank
    line = stamp + prefix + msg
    assert message_of(line) == bare
    a, b = classify(line), classify(msg)
    assert (a and (a.kind, a.severity, a.text)) == (b and (b.kind, b.severity, b.text))
