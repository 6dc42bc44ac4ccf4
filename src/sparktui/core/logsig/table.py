"""The signature table: the kinds, severities and boot phases of what an
engine, container or kernel log line means (``LogEvent``), and the ordered
``SIGNATURES`` that say it, copied from the engines' own format strings
(vLLM 0.33 and 0.11, SGLang 0.5, uvicorn, the Linux kernel and NVRM; see
REFERENCE.md §1, §2, §4 and docs/DIALECTS.md). The first matching signature
wins, so specific fatal lines (``NCCL error: ...``) come before the generic
"last line of a Python traceback". Matched by core/logsig/route.py."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum


class Severity(IntEnum):
    INFO = 0
    PROGRESS = 1
    WARNING = 2
    FATAL = 3


class Phase(StrEnum):
    """Boot phases of a lane, in the order a healthy boot goes through them."""

    STARTING = "starting"
    LOADING = "loading weights"
    KV_ALLOC = "KV allocation"
    GRAPH_CAPTURE = "graph capture"
    API_STARTING = "API starting"
    SERVING = "serving"
    FAILED = "failed"
    STALLED = "stalled"


BOOT_ORDER: tuple[Phase, ...] = (
    Phase.STARTING,
    Phase.LOADING,
    Phase.KV_ALLOC,
    Phase.GRAPH_CAPTURE,
    Phase.API_STARTING,
    Phase.SERVING,
)


class Kind(StrEnum):
    # boot progress
    ENGINE_VERSION = "engine_version"
    LOAD_START = "load_start"
    LOAD_SHARD = "load_shard"
    LOAD_BYTES = "load_bytes"
    """A loader's byte progress bar (InstantTensor's): done/total in tqdm's
    binary sizes (``188G/376G``)."""
    LOAD_TENSORS = "load_tensors"
    """A loader's bar over the tensors it loads (SGLang's InstantTensor):
    done/total tensors."""
    LOAD_WEIGHTS_DONE = "load_weights_done"
    LOAD_DONE = "load_done"
    KV_MEMORY = "kv_memory"
    KV_CACHE = "kv_cache"
    KV_CONCURRENCY = "kv_concurrency"
    GRAPH_CAPTURE = "graph_capture"
    GRAPH_DONE = "graph_done"
    ENGINE_INIT_DONE = "engine_init_done"
    API_STARTING = "api_starting"
    API_UP = "api_up"
    # serving
    STATS = "stats"
    ENGINE_WAIT = "engine_wait"
    TRACEBACK = "traceback"
    EXCEPTION = "exception"
    FRAME = "frame"
    """A traceback frame (``  File "..."``) or its ``raise X(...)`` source line:
    code, not an error, whatever words it holds (``NCCL error: {error_str}``)."""
    # fatal
    ENGINE_DEAD = "engine_dead"
    ENGINE_FAILED = "engine_failed"
    WORKER_DIED = "worker_died"
    RPC_TIMEOUT = "rpc_timeout"
    CUDA_OOM = "cuda_oom"
    GPU_ADMISSION = "gpu_admission"
    KV_TOO_SMALL = "kv_too_small"
    NCCL_ERROR = "nccl_error"
    HF_ENTRY_MISSING = "hf_entry_missing"
    PAGE_SIZE_ASSERT = "page_size_assert"
    CONTAINER_EXIT = "container_exit"
    PORT_TAKEN = "port_taken"
    """Not a log line: the lane's port is answered by a server that is not its own."""
    # kernel journal
    KERNEL_PRESSURE = "kernel_pressure"
    KERNEL_NVRM_NOMEM = "kernel_nvrm_nomem"
    KERNEL_OOM_KILL = "kernel_oom_kill"


@dataclass(frozen=True)
class Signature:
    kind: Kind
    severity: Severity
    phase: Phase | None
    pattern: re.Pattern[str]
    needle: str
    """A literal substring every match contains (cheap pre-check)."""


@dataclass(frozen=True)
class LogEvent:
    """What one classified line means."""

    kind: Kind
    severity: Severity
    phase: Phase | None
    fields: Mapping[str, str] = field(default_factory=dict)
    text: str = ""
    """The message after prefixes, timestamps and ANSI codes are removed."""

    @property
    def fatal(self) -> bool:
        return self.severity is Severity.FATAL


def _sig(kind: Kind, sev: Severity, phase: Phase | None, needle: str, regex: str) -> Signature:
    return Signature(kind, sev, phase, re.compile(regex), needle)


_N = r"[\d.]+"


def _bar(desc: str, count: str) -> str:
    """A tqdm bar in the engines' BAR_FORMAT (``DESC:  50% Completed | n/total
    [elapsed<remaining, rate]``) whose n and total are ``count``s."""
    return (rf"{desc}:\s*(?P<pct>\d+)% Completed \| (?P<done>{count})/(?P<total>{count})"
            r"(?: \[(?P<elapsed>[^<\]]*)<(?P<remaining>[^,\]]*),\s*(?P<rate>[^\]]*)\])?")


_I = r"[\d,]+"
S, P, W, F = Severity.INFO, Severity.PROGRESS, Severity.WARNING, Severity.FATAL

SIGNATURES: tuple[Signature, ...] = (
    # ---- traceback frames: code, never the error they would raise -------
    _sig(Kind.FRAME, S, None, 'File "', r'^\s+File "'),
    _sig(Kind.FRAME, S, None, "raise ", r"^\s+raise "),
    # ---- fatal, most specific first -------------------------------------
    # Sources: the dialects' file:line (src/sparktui/sim/dialects/*.json, docs/DIALECTS.md).
    _sig(Kind.RPC_TIMEOUT, F, Phase.FAILED, "RPC call to",
         r"RPC call to (?P<method>\w+) timed out"),
    # pynccl_wrapper.py "NCCL error: ..."; PyTorch's DistBackendError "NCCL error in: <cpp>, ..."
    _sig(Kind.NCCL_ERROR, F, Phase.FAILED, "NCCL error",
         r"NCCL error(?:: | in: (?P<where>[^,]+), )(?P<error>.*)"),
    _sig(Kind.NCCL_ERROR, F, Phase.FAILED, "Watchdog caught collective operation timeout",
         r"Watchdog caught collective operation timeout: (?P<error>.*)"),
    _sig(Kind.CUDA_OOM, F, Phase.FAILED, "CUDA out of memory",
         r"CUDA out of memory\.(?: Tried to allocate (?P<tried>[\d.]+ \w+)\.)?"),
    _sig(Kind.CUDA_OOM, F, Phase.FAILED, "CUDA error: out of memory",
         r"CUDA error: out of memory"),
    _sig(Kind.CUDA_OOM, F, Phase.FAILED, "Failed to load model - not enough GPU memory",
         r"Failed to load model - not enough GPU memory"),
    # 0.33 names the device (utils.py:766), 0.11 does not (gpu_worker.py:191)
    _sig(Kind.GPU_ADMISSION, F, Phase.FAILED, "on startup is less than desired",
         rf"Free memory on device(?: (?P<device>\S+))? \((?P<free>{_N})/(?P<total>{_N}) GiB\)"
         rf" on startup is less than desired GPU memory utilization"
         rf" \((?P<gmu>{_N}), (?P<required>{_N}) GiB\)"),
    _sig(Kind.KV_TOO_SMALL, F, Phase.FAILED, "No available memory for the cache blocks",
         r"No available memory for the cache blocks"),
    _sig(Kind.KV_TOO_SMALL, F, Phase.FAILED, "KV cache is needed, which is larger than",
         rf"max seq len \((?P<max_len>\d+)\), \((?P<needed>{_N}) GiB KV cache is needed,"
         rf" which is larger than the available KV cache memory \((?P<available>{_N}) GiB\)"),
    # SGLang pool_configurator.py:96
    _sig(Kind.KV_TOO_SMALL, F, Phase.FAILED, "Please try to increase --mem-fraction-static",
         r"Not enough memory\. Please try to increase --mem-fraction-static"),
    _sig(Kind.HF_ENTRY_MISSING, F, Phase.FAILED, "LocalEntryNotFoundError",
         r"LocalEntryNotFoundError(?:: (?P<error>.*))?"),
    # kv_cache_interface.py:599 (0.33) / :231 (0.11): the assert's source line in the traceback
    _sig(Kind.PAGE_SIZE_ASSERT, F, Phase.FAILED, "page_size_padded >=",
         r"assert self\.page_size_padded >= (?:self\.unpadded_page_size_bytes|page_size)\b"),
    _sig(Kind.ENGINE_DEAD, F, Phase.FAILED, "EngineDeadError",
         r"EngineDeadError(?:: (?P<error>.*))?"),
    _sig(Kind.ENGINE_DEAD, F, Phase.FAILED, "EngineCore encountered a fatal error",
         r"EngineCore encountered a fatal error\."),
    # core_client.py:840 (0.33): all a SIGKILLed engine core leaves behind
    _sig(Kind.ENGINE_DEAD, F, Phase.FAILED, "engine core exited unexpectedly",
         r"MPClient: engine core exited unexpectedly"),
    # core_client.py:565 (0.11)
    _sig(Kind.ENGINE_DEAD, F, Phase.FAILED, "died unexpectedly",
         r"Engine core proc (?P<proc>\S+) died unexpectedly"),
    _sig(Kind.ENGINE_FAILED, F, Phase.FAILED, "EngineCore failed to start",
         r"EngineCore failed to start\."),
    _sig(Kind.ENGINE_FAILED, F, Phase.FAILED, "Engine core initialization failed",
         r"Engine core initialization failed\.(?P<error>.*)"),
    _sig(Kind.ENGINE_FAILED, F, Phase.FAILED, "Frontend process failed during",
         r"Frontend process failed during engine core initialization\.(?P<error>.*)"),
    _sig(Kind.ENGINE_FAILED, F, Phase.FAILED, "AsyncLLM output_handler failed",
         r"AsyncLLM output_handler failed\."),
    # multiproc_executor.py:1189 / :1057 / :1063 (0.33)
    _sig(Kind.ENGINE_FAILED, F, Phase.FAILED, "WorkerProc ",
         r"WorkerProc (?:hit an exception|failed to start|failed)\.$"),
    # SGLang scheduler.py:6372: the traceback follows on the same line, then raw
    _sig(Kind.ENGINE_FAILED, F, Phase.FAILED, "Scheduler hit an exception",
         r"Scheduler hit an exception:"),
    # SGLang engine.py:1978
    _sig(Kind.ENGINE_FAILED, F, Phase.FAILED, "Received sigquit from a child process",
         r"Received sigquit from a child process"),
    _sig(Kind.WORKER_DIED, F, Phase.FAILED, "died unexpectedly",
         r"Worker proc (?P<proc>\S+) died unexpectedly(?: \(exit code: (?P<exit_code>-?\d+)\))?"),
    _sig(Kind.WORKER_DIED, F, Phase.FAILED, "Worker failed with error",
         r"Worker failed with error '(?P<error>.*)', please check the stack trace"),
    # SGLang engine.py:2006, watchdog.py:217
    _sig(Kind.WORKER_DIED, F, Phase.FAILED, "scheduler died during initialization",
         r"Rank (?P<rank>\d+) scheduler died during initialization"
         r"(?: \(exit code: (?P<exit_code>-?\d+)\))?"),
    _sig(Kind.WORKER_DIED, F, Phase.FAILED, ") crashed with exit code",
         r"Subprocess (?P<proc>\S+) \(pid=\d+\) crashed with exit code (?P<exit_code>-?\d+)"),
    # ---- boot progress (vLLM) -------------------------------------------
    _sig(Kind.ENGINE_VERSION, S, Phase.STARTING, "server version",
         r"vLLM (?:API )?server version (?P<version>[^\s,]+)(?:, serving model (?P<model>\S+))?"),
    # 0.33's logo (startup.py:20) unless VLLM_DISABLE_LOG_LOGO=1
    _sig(Kind.ENGINE_VERSION, S, Phase.STARTING, "\u2588  version ",
         r"\u2588  version (?P<version>\S+)$"),
    _sig(Kind.LOAD_START, P, Phase.LOADING, "Starting to load model",
         r"Starting to load model (?P<model>\S+?)(?:\.\.\.)?$"),
    # Model Runner V2 (v1/worker/gpu/model_runner.py:399), vLLM 0.33's default
    _sig(Kind.LOAD_START, P, Phase.LOADING, "Loading model from scratch",
         r"Loading model from scratch\.\.\."),
    # vLLM 0.33 model_loader/weight_utils.py:1457-1467: rank 0's tqdm over the
    # bytes InstantTensor loads (unit "B", unit_scale, unit_divisor 1024, at most
    # one redraw a second), in _BAR_FORMAT (:842); its desc is the only text the
    # loader prints: "Loading safetensors using InstantTensor loader:  50%
    # Completed | 188G/376G [24:00<24:00, 140MB/s]" (tqdm 4.70 format_meter).
    _sig(Kind.LOAD_BYTES, P, Phase.LOADING, "InstantTensor loader:",
         _bar("Loading safetensors using InstantTensor loader", r"[\d.]+[kMGTPEZY]?")),
    # SGLang 0.5.23 srt/model_loader/weight_utils.py:1258-1266: rank 0's tqdm
    # over the tensors (desc without " loader", tqdm's count units) in
    # BAR_FORMAT (srt/utils/common.py:1414): "Loading safetensors using
    # InstantTensor:  50% Completed | 1234/2468 [00:10<00:10, 120.00it/s]".
    _sig(Kind.LOAD_TENSORS, P, Phase.LOADING, "using InstantTensor:",
         _bar("Loading safetensors using InstantTensor", r"\d+")),
    _sig(Kind.LOAD_SHARD, P, Phase.LOADING, "Loading safetensors checkpoint shards",
         _bar("Loading safetensors checkpoint shards", r"\d+")),
    _sig(Kind.LOAD_WEIGHTS_DONE, P, Phase.LOADING, "Loading weights took",
         rf"Loading weights took (?P<seconds>{_N}) seconds"),
    _sig(Kind.LOAD_DONE, P, Phase.KV_ALLOC, "Model loading took",
         rf"Model loading took (?P<gib>{_N}) GiB(?: memory)? and (?P<seconds>{_N}) seconds"),
    _sig(Kind.KV_MEMORY, P, Phase.KV_ALLOC, "Available KV cache memory",
         rf"Available KV cache memory: (?P<gib>{_N}) GiB"),
    # --kv-cache-memory-bytes: no "Available KV cache memory" (gpu_worker.py:665; 0.11 :241)
    _sig(Kind.KV_MEMORY, P, Phase.KV_ALLOC, " memory for KV Cache as specified",
         rf"Initial free memory (?P<free>{_N}) GiB, reserved (?P<gib>{_N}) ?GiB memory for"
         r" KV Cache as specified"),
    _sig(Kind.KV_CACHE, P, Phase.KV_ALLOC, "KV cache size:",
         rf"(?P<device>\w+) KV cache size: (?P<tokens>{_I}) tokens"
         rf"(?:, Maximum concurrency for (?P<max_len>{_I}) tokens per request:"
         rf" (?P<concurrency>{_N})x)?"),
    _sig(Kind.KV_CONCURRENCY, P, Phase.KV_ALLOC, "Maximum concurrency for",
         rf"Maximum concurrency for (?P<max_len>{_I}) tokens per request: (?P<concurrency>{_N})x"),
    _sig(Kind.GRAPH_CAPTURE, P, Phase.GRAPH_CAPTURE, "Capturing CUDA graphs",
         r"Capturing CUDA graphs \((?P<mode>[^)]*)\):?(?:\s*(?P<pct>\d+)%\|[^|]*\|"
         r" (?P<done>\d+)/(?P<total>\d+))?"),
    # V2 prints it twice, first after the memory-profiling pass (before the KV
    # cache exists): the phase tracker tells the two apart.
    _sig(Kind.GRAPH_DONE, P, Phase.API_STARTING, "Graph capturing finished",
         rf"Graph capturing finished in (?P<seconds>{_N}) secs, took (?P<gib>{_N}) GiB"),
    _sig(Kind.ENGINE_INIT_DONE, P, Phase.API_STARTING, "init engine",
         rf"init engine \(profile, create kv cache, warmup model\) took (?P<seconds>{_N})"),
    _sig(Kind.API_STARTING, P, Phase.API_STARTING, "Starting vLLM",
         r"Starting vLLM (?:API )?server (?:\d+ )?on (?P<url>\S+)"),
    # SGLang's only (0.5.23): uvicorn logs it when it binds the socket itself
    # (uvicorn 0.55 server.py:198-199, :232), as SGLang's uvicorn.Server.run()
    # does (srt/entrypoints/http_server.py:3010; "Uvicorn running on HOST:PORT
    # with N SO_REUSEPORT workers" its own, :3072). vLLM (0.33 and 0.11) binds
    # the socket and hands it to uvicorn (0.33 launchers/launcher.py:238, :375-379;
    # 0.11 launcher.py:67-68): never printed there. No phase: it follows SGLang's
    # "Application startup complete." and vLLM reaches API starting on its own line.
    _sig(Kind.API_STARTING, S, None, "Uvicorn running on",
         r"Uvicorn running on (?P<url>\S+)"),
    _sig(Kind.API_UP, P, Phase.SERVING, "Application startup complete",
         r"Application startup complete\."),
    _sig(Kind.STATS, S, None, "Avg prompt throughput",
         rf"Avg prompt throughput: (?P<prompt_tps>{_N}) tokens/s,"
         rf" Avg generation throughput: (?P<gen_tps>{_N}) tokens/s,"
         r" Running: (?P<running>\d+) reqs, Waiting: (?P<waiting>\d+) reqs"
         rf"(?:.*?GPU KV cache usage: (?P<kv_pct>{_N})%)?"),
    # shm_broadcast.py: the message REFERENCE.md §7 calls "shm_broadcast ... 60 seconds"
    _sig(Kind.ENGINE_WAIT, W, None, "shared memory broadcast block",
         r"No available shared memory broadcast block found in (?P<seconds>\d+) second"),
    # ---- SGLang -----------------------------------------------------------
    _sig(Kind.LOAD_START, P, Phase.LOADING, "Load weight begin",
         rf"Load weight begin\. avail mem=(?P<avail_gb>{_N}) GB"),
    _sig(Kind.LOAD_DONE, P, Phase.KV_ALLOC, "Load weight end",
         rf"Load weight end\. elapsed=(?P<seconds>{_N}) s, type=(?P<type>[^,]+),"
         rf"(?P<quant>(?: \w+=[^,]*,)*?)"  # a quantized checkpoint's quant=fp8, fmt=e4m3,
         rf" avail mem=(?P<avail_gb>{_N}) GB, mem usage=(?P<gb>{_N}) GB"),
    # memory_pool.py:2087 (K and V apart) and :2095 (one KV buffer, e.g. MLA)
    _sig(Kind.KV_CACHE, P, Phase.KV_ALLOC, "KV Cache is allocated",
         r"KV Cache is allocated\. dtype: (?P<dtype>[^,]+), #tokens: (?P<tokens>\d+)"
         rf"(?:, K size: (?P<k_gb>{_N}) GB, V size: (?P<v_gb>{_N}) GB"
         rf"|, KV size: (?P<kv_gb>{_N}) GB)?"),
    _sig(Kind.KV_MEMORY, P, Phase.KV_ALLOC, "Memory pool end",
         rf"Memory pool end\. avail mem=(?P<avail_gb>{_N}) GB"),
    _sig(Kind.KV_CONCURRENCY, P, Phase.KV_ALLOC, "max_total_num_tokens=",
         r"max_total_num_tokens=(?P<tokens>\d+), chunked_prefill_size=-?\d+,"
         r" max_prefill_tokens=\d+, max_running_requests=(?P<max_running>\d+),"
         r" context_len=(?P<max_len>\d+)"),
    _sig(Kind.API_UP, P, Phase.SERVING, "The server is fired up and ready to roll",
         r"The server is fired up and ready to roll!"),
    # SGLang 0.5.23's batch lines (scheduler_components/metrics_reporter.py:753,
    # :963), " [N]" after "batch" with SGLANG_LOG_FORWARD_ITERS (:751, :962).
    # A prefill line's pool usage comes before #running-req and is never
    # "#token:" (pool_stats_observer.py:104-117): "token usage: X" for a plain
    # pool (:116), else "full token usage: X" with the SWA and/or mamba parts,
    # no one figure (the gauge takes their max, :95-102), so no token_usage.
    # Every form: tests/fixtures/dialects/prefill_forms.py.
    _sig(Kind.STATS, S, None, "Prefill batch",
         rf"(?P<batch>Prefill) batch(?: \[\d+\])?, "
         rf"(?:.*?(?<!full )(?<!swa )token usage: (?P<token_usage>{_N}), )?"
         r".*?#running-req: (?P<running>\d+)"),
    # the decode line's usage follows #running-req: "#token: N, token usage: X"
    # for a plain pool (pool_stats_observer.py:146-147)
    _sig(Kind.STATS, S, None, "Decode batch",
         rf"(?P<batch>Decode) batch(?: \[\d+\])?, .*?#running-req: (?P<running>\d+)"
         rf"(?:, #token: \d+)?(?:, token usage: (?P<token_usage>{_N}))?"),
    # ---- kernel journal ---------------------------------------------------
    _sig(Kind.KERNEL_PRESSURE, W, None, "Under memory pressure",
         r"Under memory pressure, flushing caches"),
    _sig(Kind.KERNEL_NVRM_NOMEM, W, None, "NV_ERR_NO_MEMORY",
         r"NVRM: (?P<function>\w+): .*NV_ERR_NO_MEMORY"),
    _sig(Kind.KERNEL_NVRM_NOMEM, W, None, "NVRM:",
         r"NVRM: (?P<function>\w+): failed to allocate"),
    _sig(Kind.KERNEL_OOM_KILL, W, None, "invoked oom-killer",
         r"(?P<task>\S+) invoked oom-killer:"),
    _sig(Kind.KERNEL_OOM_KILL, W, None, "of memory: Killed process",
         r"(?:Out of memory|Memory cgroup out of memory): Killed process (?P<pid>\d+)"
         r" \((?P<task>[^)]*)\)"),
    # ---- generic Python tracebacks (the phase tracker decides fatality) ---
    _sig(Kind.TRACEBACK, W, None, "Traceback (most recent call last):",
         r"^Traceback \(most recent call last\):"),
    _sig(Kind.EXCEPTION, W, None, "",
         r"^(?P<exc>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit))(?:: (?P<error>.*))?$"),
)


def container_exit(exit_code: int, oom_killed: bool = False) -> LogEvent:
    """The event for a rank container that exited (``docker inspect`` State).

    Any exit of an engine container is fatal for its lane; 137 means SIGKILL,
    which is not by itself evidence of OOM: SGLang SIGKILLs its own process
    tree after a plain Python error (``kill_process_tree``), and ``docker rm
    -f`` kills too. Only ``OOMKilled`` says memory here; the kernel's OOM kill
    of a process of the container (core/oomkill.py, read at the exit by
    watch/lane_oom.py) makes another event, ``oomkill.oom_exit``.
    """
    why = "killed (SIGKILL)" if exit_code == 137 else f"exited with code {exit_code}"
    if oom_killed:
        why += ", OOMKilled"
    return LogEvent(
        Kind.CONTAINER_EXIT,
        Severity.FATAL,
        Phase.FAILED,
        {"exit_code": str(exit_code), "oom_killed": str(oom_killed).lower()},
        f"container {why}",
    )
