"""Log signatures: one ordered table turning an engine, container or kernel
log line into (kind, severity, boot phase, captured fields).

Wording is copied from the engines' own format strings (vLLM 0.33 and 0.11,
SGLang 0.5, uvicorn, the Linux kernel and NVRM; see REFERENCE.md §1, §2, §4).
The table is ordered: the first matching signature wins, so specific fatal
lines (``NCCL error: ...``) come before the generic "last line of a Python
traceback". Ingest runs on every line, so the walk is cut short exactly:
the logger prefix is stripped in one match, a stats, access or progress line
is recognised whole by its shape (``BORING``), any other line is scanned once
for the signatures' needles; either names the only signatures that can
match (tests/core/test_logsig_prefilter.py proves the verdicts equal the
plain walk's). That route is remembered by the line with its digits masked
(``_masked_route``), so the next stats or access line is one lookup, and an
event's fields are captured only when read. Nothing here raises on any input.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import IntEnum, StrEnum
from functools import lru_cache
from typing import Any


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
         r"Loading safetensors using InstantTensor loader:\s*(?P<pct>\d+)% Completed \|"
         r" (?P<done>[\d.]+[kMGTPEZY]?)/(?P<total>[\d.]+[kMGTPEZY]?)"
         r"(?: \[(?P<elapsed>[^<\]]*)<(?P<remaining>[^,\]]*),\s*(?P<rate>[^\]]*)\])?"),
    # SGLang 0.5.23 srt/model_loader/weight_utils.py:1258-1266: rank 0's tqdm
    # over the tensors (desc without " loader", tqdm's count units) in
    # BAR_FORMAT (srt/utils/common.py:1414): "Loading safetensors using
    # InstantTensor:  50% Completed | 1234/2468 [00:10<00:10, 120.00it/s]".
    _sig(Kind.LOAD_TENSORS, P, Phase.LOADING, "using InstantTensor:",
         r"Loading safetensors using InstantTensor:\s*(?P<pct>\d+)% Completed \|"
         r" (?P<done>\d+)/(?P<total>\d+)"
         r"(?: \[(?P<elapsed>[^<\]]*)<(?P<remaining>[^,\]]*),\s*(?P<rate>[^\]]*)\])?"),
    _sig(Kind.LOAD_SHARD, P, Phase.LOADING, "Loading safetensors checkpoint shards",
         r"Loading safetensors checkpoint shards:\s*(?P<pct>\d+)% Completed \|"
         r" (?P<done>\d+)/(?P<total>\d+)"
         r"(?: \[(?P<elapsed>[^<\]]*)<(?P<remaining>[^,\]]*),\s*(?P<rate>[^\]]*)\])?"),
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
    _sig(Kind.STATS, S, None, " batch, ",
         rf"(?P<batch>Prefill|Decode) batch, .*?#running-req: (?P<running>\d+)"
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

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_LINE_TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)) ")
_PREFIX = re.compile(
    r"(?:\([^()]* pid=\d+\) )?"                                   # vLLM's process, then:
    r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d"  # vLLM's level header
    r"(?: \[[^\]]*\])? "
    r"|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [A-Z]+\d+)*\] "  # SGLang's [date TPn]
    r"|\[rank\d+\]:\[[^\]]*\] "                               # torch's [rankN]:[...]
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+"               # uvicorn's INFO:
    r"|(?!\[)\S+ (?:kernel|[\w.@-]+\[\d+\]): "                # journald's host kernel:
    r")?"
)
"""Every logger prefix in one match (the first alternative that fits wins,
as a walk of them in this order would): ingest runs it on every line. The
process group is followed by at most one ``)`` so it matches one way only:
its `` pid=N`` ends at the first parenthesis after the opening one, so the
greedy scan ends where a lazy one would (and costs less)."""
_prefix_end = _PREFIX.match


def _overlapping(a: str, b: str) -> bool:
    """Can occurrences of needles ``a`` and ``b`` overlap in some text?"""
    if a in b or b in a:
        return True
    return any(a.endswith(b[:i]) or b.endswith(a[:i]) for i in range(1, min(len(a), len(b))))


def _trie_regex(words: list[str]) -> str:
    """One regex matching exactly ``words``, factored as a trie (``Load
    weight (?:begin|end)``): Python's re tries every top-level alternative
    at every position, so sharing prefixes makes the scan several times cheaper."""
    trie: dict[str, dict] = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict[str, dict]) -> str:
        branches = [re.escape(ch) + build(sub) for ch, sub in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return build(trie)


_NEEDLES = sorted({s.needle for s in SIGNATURES if s.needle})
_PREFILTER = re.compile(_trie_regex(_NEEDLES))
"""One scan over the signatures' literal needles. What it finds names the
signatures worth trying; a line without any (access logs, chatter) skips the
table, unless it may be a bare ``SomeError: ...`` line (``_EXCEPTION_HINT``)."""
_EXCEPTION_HINT = re.compile(r"^\S*(?:Error|Exception|Interrupt|Exit)\b")
_OVERLAPS: dict[str, tuple[str, ...]] = {
    n: tuple(o for o in _NEEDLES if o != n and _overlapping(n, o)) for n in _NEEDLES}
"""Needles whose occurrences can overlap an occurrence of the key: the scan
(non-overlapping, leftmost) may report only the key, so these are tested
with ``in`` whenever the key is found."""
_BY_NEEDLE: dict[str, tuple[int, ...]] = {
    n: tuple(i for i, s in enumerate(SIGNATURES) if s.needle == n) for n in _NEEDLES}
_NO_NEEDLE = tuple(i for i, s in enumerate(SIGNATURES) if not s.needle)
_PLAN = {n: tuple(sorted(_BY_NEEDLE[n] + _NO_NEEDLE)) for n in _NEEDLES}
"""The signatures to try, in table order, when ``n`` is the only needle found."""
_SEARCH = tuple(s.pattern.search for s in SIGNATURES)
_new = object.__new__

# ---- boring shapes ------------------------------------------------------------
# Most lines of a serving engine are stats and access lines, of a boot progress
# bars. Their whole message is matched in one step against the shapes below
# (literals, choices of literals, and numbers), which says which signatures can
# match without scanning the message for needles.
#
# Exact by construction: no needle holds a digit or a dot (checked below), so
# in a line of a shape every needle lies inside one run of the shape's
# literals between two numbers; the signatures tried are those whose needle is
# in such a run (every combination of the choices), plus the needle-less ones,
# in table order. That is the table walk's first match: a signature whose
# needle is absent cannot match.

NUM = None
"""A number in a shape: ``[0-9.]+``."""
Shape = tuple[str | tuple[str, ...] | None, ...]
_METHODS = ("GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS")
_PATHS = ("/health", "/metrics", "/ping", "/version", "/v1/models", "/v1/chat/completions",
          "/v1/completions", "/v1/embeddings", "/tokenize", "/detokenize", "/load")
_REASONS = ("OK", "Created", "No Content", "Bad Request", "Unauthorized", "Forbidden",
            "Not Found", "Method Not Allowed", "Unprocessable Entity", "Too Many Requests",
            "Internal Server Error", "Service Unavailable")
BORING: tuple[Shape, ...] = (
    # vLLM's loggers.py, every 10 s while serving
    ("Engine ", NUM, ": Avg prompt throughput: ", NUM, " tokens/s, Avg generation throughput: ",
     NUM, " tokens/s, Running: ", NUM, " reqs, Waiting: ", NUM, " reqs, GPU KV cache usage: ",
     NUM, "%, Prefix cache hit rate: ", NUM, "%"),
    # uvicorn's access log (the console's own /health and /metrics among them)
    (NUM, ":", NUM, ' - "', _METHODS, " ", _PATHS, " ", ("HTTP/1.1", "HTTP/1.0"), '" ', NUM,
     " ", _REASONS),
    # SGLang's scheduler
    ("Decode batch, #running-req: ", NUM, ", token usage: ", NUM,
     ", gen throughput (token/s): ", NUM),
    ("Decode batch, #running-req: ", NUM, ", token usage: ", NUM,
     ", gen throughput (token/s): ", NUM, ", #queue-req: ", NUM),
    # SGLang 0.5.23 (metrics_reporter.py:963, pool_stats_observer.py, :1040)
    ("Decode batch, #running-req: ", NUM, ", #token: ", NUM, ", token usage: ", NUM,
     ", cuda graph: ", ("True", "False"), ", gen throughput (token/s): ", NUM,
     ", #queue-req: ", NUM),
    # tqdm's shard progress ({percentage:3.0f}% ... [{elapsed}<{remaining}, {rate_fmt}])
    ("Loading safetensors checkpoint shards:", (" ", "  ", "   "), NUM, "% Completed | ", NUM,
     "/", NUM, " [", NUM, ":", NUM, "<", NUM, ":", NUM, ",", (" ", "  ", "   "), NUM,
     ("s/it]", "it/s]")),
    ("Available KV cache memory: ", NUM, " GiB"),
)


def _shape_regex(shape: Shape) -> str:
    return "".join("[0-9.]+" if p is None else re.escape(p) if isinstance(p, str)
                   else "(?:" + "|".join(map(re.escape, p)) + ")" for p in shape)


def _shape_plan(shape: Shape) -> tuple[int, ...]:
    """The signatures that can match a line of ``shape``, in table order."""
    runs: list[list[str]] = [[""]]
    for p in shape:
        if p is None:
            runs.append([""])
        else:
            runs[-1] = [a + b for a in runs[-1] for b in ((p,) if isinstance(p, str) else p)]
    found = {n for n in _NEEDLES for run in runs for text in run if n in text}
    plan = {i for n in found for i in _BY_NEEDLE[n]}
    return tuple(sorted(plan.union(_NO_NEEDLE) if _may_be_exception(shape) else plan))


def _may_be_exception(shape: Shape) -> bool:
    """Can a line of ``shape`` pass ``_EXCEPTION_HINT`` (the needle-less
    signatures' condition)? Not when its first word has no letter."""
    for p in shape:
        if p is None:
            continue
        for text in (p,) if isinstance(p, str) else p:
            word = text.split(None, 1)[0] if text.strip() else ""
            if any(ch.isalpha() or ch == "_" for ch in word):
                return True
        if all(any(ch.isspace() for ch in text) for text in ((p,) if isinstance(p, str) else p)):
            return False
    return True


if any(ch.isdecimal() or ch == "." for n in _NEEDLES for ch in n):  # pragma: no cover
    raise AssertionError("a needle holds a digit or a dot: the boring shapes are not exact")
_BORING = re.compile("|".join(f"({_shape_regex(shape)})" for shape in BORING))
_BORING_PLAN = ((), *map(_shape_plan, BORING))
"""By the index of the shape's group in ``_BORING``."""
_boring_shape = _BORING.fullmatch
_HEAD = re.compile(f"(?>{_PREFIX.pattern})(?:(?:{_BORING.pattern})\\Z)?")
"""The logger prefix and, when the rest of the line is of a boring shape,
that shape, in one match: the prefix is atomic (``(?>...)``), so it ends where
``_PREFIX.match`` ends whether or not a shape follows; the shapes' groups keep
their numbers (the prefix has none), so ``lastindex`` names the shape as in
``_BORING`` and its group starts where the message does."""
_head = _HEAD.match


def _candidates(msg: str) -> tuple[int, ...]:
    """Table indexes, in table order, of every signature whose needle is in
    ``msg`` (plus the needle-less ones when the line may be an exception).

    Exact: a needle occurrence the scan skipped overlaps an occurrence it
    reported, and every needle that can overlap a reported one is tested."""
    hits = _PREFILTER.findall(msg)
    if not hits:
        return _NO_NEEDLE if _EXCEPTION_HINT.search(msg) else ()
    first = hits[0]
    if len(hits) == 1 and not _OVERLAPS[first]:
        return _PLAN[first]
    found = set(hits)
    for needle in hits:
        found.update(o for o in _OVERLAPS[needle] if o not in found and o in msg)
    return tuple(sorted({i for n in found for i in _BY_NEEDLE[n]}.union(_NO_NEEDLE)))


def split_timestamp(line: str) -> tuple[str | None, str]:
    """Split a leading RFC 3339 timestamp: docker ``--timestamps``
    (``2026-11-29T01:02:03.123456789Z msg``) or journald ``short-iso-precise``
    (``2026-11-29T01:02:03.456789+0000 host kernel: msg``)."""
    m = _LINE_TS.match(line)
    if m is None:
        return None, line
    return m.group(1), line[m.end():]


def clean(line: str) -> str:
    """Strip ANSI codes, tqdm carriage returns and trailing blanks; keep what
    a terminal would show last (the final ``\\r``-separated update)."""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    line = line.rstrip("\r\n\t ")
    if "\r" in line:
        last = line.rpartition("\r")[2]
        if last.strip():  # the usual redraw: the last one is what shows
            return last
        parts = [p for p in line.split("\r") if p.strip()]
        line = parts[-1] if parts else ""
    return line


def strip_prefixes(text: str) -> str:
    """Remove logger prefixes (vLLM process and level headers, SGLang's
    ``[date TPn]``, uvicorn's ``INFO:``, journald's ``date host kernel:``)."""
    end = _prefix_end(text).end()  # type: ignore[union-attr]  # every part optional
    return text[end:] if end else text


def _text_of(line: str) -> str:
    """A line without its docker timestamp, ANSI codes, redraws and
    trailing blanks: what the logger prefix and the signatures are matched in."""
    if line[:1].isdigit():
        _, line = split_timestamp(line)
    # clean(line), without a call for the common line (no ANSI code, no redraw)
    return clean(line) if "\x1b" in line or "\r" in line else line.rstrip("\n\t ")


def message_of(line: str) -> str:
    """The message the signatures are matched against: the line without its
    timestamp, ANSI codes, progress-bar redraws and logger prefixes."""
    text = _text_of(line)
    return strip_prefixes(text) if text else ""


class _Fields(Mapping[str, str]):
    """The named groups a signature's match captured, not None, found when
    first read: most events (stats lines) are never asked for theirs, and the
    search and its ``groupdict`` were half the cost of classifying one."""

    __slots__ = ("_found", "_msg", "_search")

    def __init__(self, search: Callable[[str], re.Match[str] | None], msg: str) -> None:
        self._search, self._msg = search, msg
        self._found: dict[str, str] | None = None

    def _dict(self) -> dict[str, str]:
        found = self._found
        if found is None:
            m = self._search(self._msg)
            found = {} if m is None else m.groupdict()
            if None in found.values():  # an optional group that did not take part
                found = {k: v for k, v in found.items() if v is not None}
            self._found = found
        return found

    def __getitem__(self, key: str) -> str:
        return self._dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self._dict())

    def __contains__(self, key: object) -> bool:
        return key in self._dict()

    def get(self, key: str, default: Any = None) -> Any:
        return self._dict().get(key, default)

    def __repr__(self) -> str:
        return repr(self._dict())


def event_of(sig: Signature, msg: str) -> LogEvent:
    """The event of ``sig``, which matches ``msg`` (its fields read when asked)."""
    # What LogEvent(sig.kind, ...) builds, without the frozen dataclass's
    # __init__ (one object.__setattr__ per field).
    ev = _new(LogEvent)
    d = ev.__dict__
    d["kind"], d["severity"], d["phase"], d["fields"], d["text"] = \
        sig.kind, sig.severity, sig.phase, _Fields(sig.pattern.search, msg), msg
    return ev


_MASK = bytes.maketrans(b"123456789", b"000000000")
ROUTES_KEPT = 4096
"""Routes remembered (``_masked_route``): the line shapes of a few busy
engines, with room for chatter; least recently used go first."""
ROUTE_KEY_MAX = 512
"""Longer lines (tracebacks' source lines, huge errors) are routed afresh."""


def _route(text: str) -> tuple[int, int] | None:
    """Where the message of a cleaned line starts and the index of the first
    signature it matches, in table order; None when none does."""
    head = _head(text)  # every part optional: it always matches
    shape = head.lastindex  # type: ignore[union-attr]
    if shape is None:
        start = head.end()  # type: ignore[union-attr]
        if start == len(text):
            return None
        plan = _candidates(text[start:] if start else text)
    else:
        plan = _BORING_PLAN[shape]
        if not plan:
            return None
        start = head.start(shape)  # type: ignore[union-attr]
    msg = text[start:] if start else text
    for i in plan:
        if _SEARCH[i](msg) is not None:
            return start, i
    return None


@lru_cache(maxsize=ROUTES_KEPT)
def _masked_route(key: bytes) -> tuple[int, int] | None:
    """The route of a line with every digit made ``0`` (``_MASK``).

    It is the route of every line with that key: the timestamp, ANSI, prefix
    and signature patterns treat all ASCII digits alike (each matches all
    ten or none, no literal digit; tests/core/test_logsig_memo.py checks
    every one), and so does ``_text_of``'s code, so a line and its masked
    copy clean to texts of one length whose messages start at one offset and
    match the same signatures. The shapes and the needle scan only shorten
    the walk (their verdict is the walk's). Stats, access and progress lines
    differ in their numbers only, so one route serves all of an engine's
    lines of one kind, and a line of no interest costs a lookup."""
    return _route(_text_of(key.decode("utf-8", "surrogatepass")))


def classify(line: str) -> LogEvent | None:
    """Classify one log line (docker timestamp already split off or not).

    Returns None for lines that mean nothing to the watchers. Never raises.
    """
    try:
        if not isinstance(line, str):
            return None
        key = line.encode("utf-8", "surrogatepass")
        if len(key) <= ROUTE_KEY_MAX:
            route = _masked_route(key.translate(_MASK))
            if route is None:
                return None
            text = _text_of(line)
        else:
            text = _text_of(line)
            route = _route(text)
            if route is None:
                return None
        start, i = route
        return event_of(SIGNATURES[i], text[start:] if start else text)
    except (RecursionError, MemoryError):  # pragma: no cover - pathological input
        return None


def container_exit(exit_code: int, oom_killed: bool = False) -> LogEvent:
    """The event for a rank container that exited (``docker inspect`` State).

    Any exit of an engine container is fatal for its lane; 137 means SIGKILL,
    which is not by itself evidence of OOM: SGLang SIGKILLs its own process
    tree after a plain Python error (``kill_process_tree``), and ``docker rm
    -f`` kills too. Only ``OOMKilled`` (or the kernel's oom-killer lines and
    MemAvailable, read elsewhere) say memory.
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


def parse_int(value: str | None) -> int | None:
    """``"1,234,567"`` -> 1234567; None when absent or malformed."""
    if value is None:
        return None
    try:
        return int(value.replace(",", ""))
    except ValueError:
        return None


_SIZE = re.compile(r"([\d.]+)([kMGTPEZY]?)")
_SIZE_UNITS = "kMGTPEZY"


def parse_mib(size: str | None) -> int | None:
    """tqdm's binary size (``unit_divisor=1024``: ``188G``, ``5.00G``, ``512M``,
    ``0.00``) in MiB; None when it is not one."""
    m = _SIZE.fullmatch(size or "")
    if m is None:
        return None
    try:
        value = float(m.group(1))
    except ValueError:
        return None
    power = _SIZE_UNITS.index(m.group(2)) + 1 if m.group(2) else 0
    return round(value * 1024 ** power / 1024 ** 2)


def parse_float(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def parse_timestamp(ts: str | None) -> float | None:
    """RFC 3339 (docker ``--timestamps``, journald ``short-iso-precise``) to
    epoch seconds; nanoseconds are truncated to microseconds."""
    if not ts:
        return None
    try:
        return datetime.fromisoformat(ts).timestamp()
    except ValueError:
        return None
