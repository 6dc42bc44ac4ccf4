"""Line-by-line tests of the signature table, in the engines' exact wording
(REFERENCE.md §1, §2, §4): vLLM 0.33 prefixes, vLLM 0.11 with its ANSI
process prefix, SGLang, uvicorn, kernel journal lines."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.logsig import (
    Kind,
    Phase,
    Severity,
    classify,
    clean,
    container_exit,
    parse_int,
    parse_timestamp,
    split_timestamp,
)

V33 = "(EngineCore_DP0 pid=312) INFO 11-29 01:02:03 [gpu_model_runner.py:5089] "
V33_ERR = "(EngineCore_DP0 pid=312) ERROR 11-29 01:02:03 [core.py:708] "
V11 = "\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO 11-29 01:02:03 [gpu_model_runner.py:2602] "
V11_RAW = "\x1b[1;36m(EngineCore_DP0 pid=312)\x1b[0;0m "
SGL = "[2026-11-29 01:02:03 TP0] "
SGL_DP = "[2026-11-29 01:02:03 DP0 TP1] "
TS = "2026-11-29T01:02:03.123456789Z "
JOURNAL = "2026-11-29T01:02:03.456789+0000 dgx6 kernel: "
JOURNAL_NEW = "2026-11-29T01:02:03.456789+00:00 dgx6 kernel: "

CASES: list[tuple[str, Kind, dict[str, str]]] = [
    (V33 + "vLLM server version 0.33.0, serving model zai-org/GLM-5.3", Kind.ENGINE_VERSION,
     {"version": "0.33.0", "model": "zai-org/GLM-5.3"}),
    (V11 + "vLLM API server version 0.11.0", Kind.ENGINE_VERSION, {"version": "0.11.0"}),
    (V33 + "Starting to load model zai-org/GLM-5.3...", Kind.LOAD_START,
     {"model": "zai-org/GLM-5.3"}),
    # vllm 0.33 model_loader/weight_utils.py:1457-1467: rank 0's byte bar (no
    # logger line; the process prefix before tqdm's \r is not what shows)
    ("(EngineCore_DP0 pid=312) \rLoading safetensors using InstantTensor loader:  50% "
     "Completed | 188G/376G [24:00<24:00, 140MB/s]\n", Kind.LOAD_BYTES,
     {"pct": "50", "done": "188G", "total": "376G", "rate": "140MB/s"}),
    # sglang 0.5.23 srt/model_loader/weight_utils.py:1258-1266: rank 0's tensor bar
    (SGL + "\rLoading safetensors using InstantTensor:  50% Completed | 1234/2468 "
     "[00:10<00:10, 120.00it/s]", Kind.LOAD_TENSORS,
     {"pct": "50", "done": "1234", "total": "2468", "remaining": "00:10"}),
    ("\rLoading safetensors checkpoint shards:  25% Completed | 1/4 [00:00<00:02,  1.20s/it]\n",
     Kind.LOAD_SHARD, {"pct": "25", "done": "1", "total": "4", "remaining": "00:02",
                       "rate": "1.20s/it"}),
    (TS + "\rLoading safetensors checkpoint shards: 100% Completed | 141/141 "
     "[1:34:00<00:00, 40.00s/it]\n", Kind.LOAD_SHARD, {"done": "141", "total": "141"}),
    (V33 + "Loading weights took 45.12 seconds", Kind.LOAD_WEIGHTS_DONE, {"seconds": "45.12"}),
    (V33 + "Model loading took 61.2 GiB memory and 45.123456 seconds", Kind.LOAD_DONE,
     {"gib": "61.2", "seconds": "45.123456"}),
    (V11 + "Model loading took 49.5500 GiB and 7338.000000 seconds", Kind.LOAD_DONE,
     {"gib": "49.5500", "seconds": "7338.000000"}),
    (V33 + "Available KV cache memory: 24.5 GiB", Kind.KV_MEMORY, {"gib": "24.5"}),
    (V11 + "Available KV cache memory: 24.50 GiB", Kind.KV_MEMORY, {"gib": "24.50"}),
    (V33 + "GPU KV cache size: 972,032 tokens, Maximum concurrency for 524,288 tokens per "
     "request: 1.85x", Kind.KV_CACHE,
     {"device": "GPU", "tokens": "972,032", "max_len": "524,288", "concurrency": "1.85"}),
    (V11 + "GPU KV cache size: 145,664 tokens", Kind.KV_CACHE, {"tokens": "145,664"}),
    (V11 + "Maximum concurrency for 131,072 tokens per request: 1.11x", Kind.KV_CONCURRENCY,
     {"max_len": "131,072", "concurrency": "1.11"}),
    ("\rCapturing CUDA graphs (mixed prefill-decode, PIECEWISE):  33%|███▎      | 1/3 "
     "[00:00<00:00, 12.3it/s]\rCapturing CUDA graphs (mixed prefill-decode, PIECEWISE): "
     "100%|██████████| 3/3 [00:00<00:00, 12.3it/s]\n", Kind.GRAPH_CAPTURE,
     {"mode": "mixed prefill-decode, PIECEWISE", "pct": "100", "done": "3", "total": "3"}),
    (V33 + "Graph capturing finished in 54 secs, took 1.25 GiB", Kind.GRAPH_DONE,
     {"seconds": "54", "gib": "1.25"}),
    (V33 + "init engine (profile, create kv cache, warmup model) took 120.50 s "
     "(compilation: 30.10 s)", Kind.ENGINE_INIT_DONE, {"seconds": "120.50"}),
    (V11 + "init engine (profile, create kv cache, warmup model) took 120.50 seconds",
     Kind.ENGINE_INIT_DONE, {"seconds": "120.50"}),
    ("(APIServer pid=1) INFO 11-29 01:02:03 [api_server.py:1] Starting vLLM server on "
     "http://0.0.0.0:8000", Kind.API_STARTING, {"url": "http://0.0.0.0:8000"}),
    (V11 + "Starting vLLM API server 0 on http://0.0.0.0:8000", Kind.API_STARTING,
     {"url": "http://0.0.0.0:8000"}),
    ("INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
     Kind.API_STARTING, {"url": "http://0.0.0.0:8000"}),
    ("INFO:     Application startup complete.", Kind.API_UP, {}),
    ("\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO:     Application startup complete.",
     Kind.API_UP, {}),
    ("(APIServer pid=1) INFO 11-29 01:02:03 [loggers.py:123] Engine 000: Avg prompt "
     "throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 1 reqs, "
     "Waiting: 0 reqs, GPU KV cache usage: 12.5%, Prefix cache hit rate: 0.0%", Kind.STATS,
     {"prompt_tps": "0.0", "gen_tps": "0.0", "running": "1", "waiting": "0", "kv_pct": "12.5"}),
    ("(EngineCore_DP0 pid=312) WARNING 11-29 01:02:03 [shm_broadcast.py:466] No available "
     "shared memory broadcast block found in 60 seconds. This typically happens when some "
     "processes are hanging.", Kind.ENGINE_WAIT, {"seconds": "60"}),
    # ---- fatal -------------------------------------------------------------
    (V33_ERR + "EngineCore encountered a fatal error.", Kind.ENGINE_DEAD, {}),
    (V33_ERR + "EngineCore failed to start.", Kind.ENGINE_FAILED, {}),
    ("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack "
     "trace (above) for the root cause.", Kind.ENGINE_DEAD, {}),
    ("(APIServer pid=1) ERROR 11-29 01:02:03 [async_llm.py:1] AsyncLLM output_handler failed.",
     Kind.ENGINE_FAILED, {}),
    (V33_ERR + "Worker proc VllmWorker-1 died unexpectedly (exit code: -9), shutting down "
     "executor.", Kind.WORKER_DIED, {"proc": "VllmWorker-1", "exit_code": "-9"}),
    (V11_RAW + "Worker proc VllmWorker-1 died unexpectedly, shutting down executor.",
     Kind.WORKER_DIED, {"proc": "VllmWorker-1"}),
    ("RuntimeError: Engine core initialization failed. See root cause above. Failed core "
     "proc(s): {'EngineCore_DP0': 1}", Kind.ENGINE_FAILED, {}),
    (V33_ERR + "TimeoutError: RPC call to sample_tokens timed out.", Kind.RPC_TIMEOUT,
     {"method": "sample_tokens"}),
    (V11_RAW + "TimeoutError: RPC call to execute_model timed out.", Kind.RPC_TIMEOUT,
     {"method": "execute_model"}),
    ("RuntimeError: Worker failed with error 'boom', please check the stack trace above for "
     "the root cause", Kind.WORKER_DIED, {"error": "boom"}),
    ("ValueError: Failed to load model - not enough GPU memory. Try lowering "
     "--gpu-memory-utilization to free memory for weights (original error: x)", Kind.CUDA_OOM,
     {}),
    (V33_ERR + "ValueError: Free memory on device cuda:0 (108.78/121.6 GiB) on startup is less "
     "than desired GPU memory utilization (0.91, 110.7 GiB). Decrease GPU memory utilization "
     "or reduce GPU memory used by other processes.", Kind.GPU_ADMISSION,
     {"device": "cuda:0", "free": "108.78", "total": "121.6", "gmu": "0.91",
      "required": "110.7"}),
    ("ValueError: No available memory for the cache blocks. Try increasing "
     "`gpu_memory_utilization` when initializing the engine.", Kind.KV_TOO_SMALL, {}),
    ("ValueError: To serve at least one request with the model's max seq len (131072), "
     "(8.08 GiB KV cache is needed, which is larger than the available KV cache memory "
     "(8.0 GiB). Try increasing `gpu_memory_utilization`", Kind.KV_TOO_SMALL,
     {"max_len": "131072", "needed": "8.08", "available": "8.0"}),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25 GiB. GPU 0 has a "
     "total capacity of 93.02 GiB of which 1.18 GiB is free.", Kind.CUDA_OOM,
     {"tried": "1.25 GiB"}),
    ("RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
     Kind.NCCL_ERROR, {"error": "unhandled system error (run with NCCL_DEBUG=INFO for details)"}),
    ("RuntimeError: NCCL error: remote process exited or there was a network error",
     Kind.NCCL_ERROR, {}),
    ("[rank0]:[E1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught "
     "collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, Timeout(ms)=600000) "
     "ran for 600081 milliseconds before timing out.", Kind.NCCL_ERROR, {}),
    ("huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate cached "
     "snapshot folder for the specified revision on the local disk and outgoing traffic has "
     "been disabled.", Kind.HF_ENTRY_MISSING, {}),
    # the assert's source line as the traceback shows it (vLLM 0.33 kv_cache_interface.py:599)
    (V33_ERR + "    assert self.page_size_padded >= self.unpadded_page_size_bytes",
     Kind.PAGE_SIZE_ASSERT, {}),
    ('  File "/usr/lib/python3/site.py", line 1, in <module>', Kind.FRAME, {}),
    ('    raise RuntimeError(f"NCCL error: {error_str}")', Kind.FRAME, {}),
    (V33_ERR + "Traceback (most recent call last):", Kind.TRACEBACK, {}),
    (V11_RAW + "Traceback (most recent call last):", Kind.TRACEBACK, {}),
    (V33_ERR + "KeyError: 'model.layers.0.mlp'", Kind.EXCEPTION,
     {"exc": "KeyError", "error": "'model.layers.0.mlp'"}),
    ("AssertionError", Kind.EXCEPTION, {"exc": "AssertionError"}),
    # ---- SGLang ------------------------------------------------------------
    (SGL + "Load weight begin. avail mem=110.52 GB", Kind.LOAD_START, {"avail_gb": "110.52"}),
    (SGL_DP + "Load weight end. elapsed=312.45 s, type=DeepseekV4ForCausalLM, avail mem=40.10 "
     "GB, mem usage=70.42 GB.", Kind.LOAD_DONE,
     {"seconds": "312.45", "type": "DeepseekV4ForCausalLM", "gb": "70.42"}),
    (SGL + "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1234567, K size: 10.00 GB, "
     "V size: 10.00 GB", Kind.KV_CACHE, {"dtype": "torch.bfloat16", "tokens": "1234567"}),
    (SGL + "Memory pool end. avail mem=12.34 GB", Kind.KV_MEMORY, {"avail_gb": "12.34"}),
    (SGL + "max_total_num_tokens=1234567, chunked_prefill_size=8192, max_prefill_tokens=16384, "
     "max_running_requests=64, context_len=524288, available_gpu_mem=12.00 GB",
     Kind.KV_CONCURRENCY, {"tokens": "1234567", "max_running": "64", "max_len": "524288"}),
    ("[2026-11-29 01:02:03] The server is fired up and ready to roll!", Kind.API_UP, {}),
    (SGL + "Decode batch, #running-req: 3, token usage: 0.12, gen throughput (token/s): 40.1",
     Kind.STATS, {"batch": "Decode", "running": "3", "token_usage": "0.12"}),
    (SGL + "Prefill batch, #new-seq: 1, #new-token: 8192, #cached-token: 0, token usage: 0.05, "
     "#running-req: 0, #queue-req: 0", Kind.STATS, {"batch": "Prefill", "running": "0"}),
    # ---- kernel journal ----------------------------------------------------
    ("2026-11-29T01:02:03.456789+0000 dgx6 systemd-journald[412]: Under memory pressure, "
     "flushing caches.", Kind.KERNEL_PRESSURE, {}),
    (JOURNAL + "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] "
     "(0x00000051) returned from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359",
     Kind.KERNEL_NVRM_NOMEM, {}),
    (JOURNAL_NEW + "NVRM: _iovaspaceCreateMappingDataFromMemDesc: failed to allocate 0x176028 "
     "bytes for IOVA mapping metadata", Kind.KERNEL_NVRM_NOMEM,
     {"function": "_iovaspaceCreateMappingDataFromMemDesc"}),
    (JOURNAL + "python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), "
     "order=0, oom_score_adj=0", Kind.KERNEL_OOM_KILL, {"task": "python3"}),
    (JOURNAL + "Out of memory: Killed process 4242 (python3) total-vm:1234kB, anon-rss:1kB, "
     "file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:1kB oom_score_adj:0", Kind.KERNEL_OOM_KILL,
     {"pid": "4242", "task": "python3"}),
    (JOURNAL + "Memory cgroup out of memory: Killed process 77 (vllm) total-vm:1kB",
     Kind.KERNEL_OOM_KILL, {"pid": "77", "task": "vllm"}),
]


@pytest.mark.parametrize(("line", "kind", "fields"), CASES, ids=[c[1].value for c in CASES])
def test_signature(line: str, kind: Kind, fields: dict[str, str]) -> None:
    ev = classify(line)
    assert ev is not None, line
    assert ev.kind is kind
    for k, v in fields.items():
        assert ev.fields.get(k) == v, (k, ev.fields)
    assert "\x1b" not in ev.text and "\r" not in ev.text


FATAL_KINDS = {
    Kind.ENGINE_DEAD, Kind.ENGINE_FAILED, Kind.WORKER_DIED, Kind.RPC_TIMEOUT, Kind.CUDA_OOM,
    Kind.GPU_ADMISSION, Kind.KV_TOO_SMALL, Kind.NCCL_ERROR, Kind.HF_ENTRY_MISSING,
    Kind.PAGE_SIZE_ASSERT,
}


@pytest.mark.parametrize(("line", "kind", "fields"), CASES, ids=[c[1].value for c in CASES])
def test_severity_follows_kind(line: str, kind: Kind, fields: dict[str, str]) -> None:
    ev = classify(line)
    assert ev is not None
    assert ev.fatal == (kind in FATAL_KINDS)
    if ev.fatal:
        assert ev.phase is Phase.FAILED


@pytest.mark.parametrize("line", [
    "",
    "\n",
    V33 + "non-default args: {'model': 'x'}",
    "INFO:     127.0.0.1:53422 - \"GET /health HTTP/1.1\" 200 OK",
    "INFO:     Started server process [1]",
    "INFO:     Waiting for application startup.",
    V33 + "Using max model len 131072",
    SGL + "Init torch distributed begin.",
    JOURNAL + "usb 1-1: new high-speed USB device number 2 using xhci_hcd",
    V33 + "This is a DeprecationWarning: nothing to see",
])
def test_uninteresting_lines(line: str) -> None:
    assert classify(line) is None


def test_specific_fatal_beats_generic_exception() -> None:
    ev = classify(V33_ERR + "RuntimeError: NCCL error: unhandled cuda error (run with x)")
    assert ev is not None and ev.kind is Kind.NCCL_ERROR


def test_timestamp_split_and_parse() -> None:
    ts, rest = split_timestamp(TS + "hello")
    assert ts == TS.strip() and rest == "hello"
    assert parse_timestamp(ts) == pytest.approx(1795914123.123456)
    assert parse_timestamp("2026-11-29T01:02:03.5+0000") == pytest.approx(1795914123.5)
    assert parse_timestamp("2026-11-29T01:02:03.5+00:00") == pytest.approx(1795914123.5)
    assert parse_timestamp("garbage") is None
    assert split_timestamp("no ts here") == (None, "no ts here")


def test_clean_keeps_last_carriage_return_segment() -> None:
    assert clean("\ra 10%\rb 20%\r\n") == "b 20%"
    assert clean("\x1b[31mred\x1b[0m\r\n") == "red"
    assert clean("\r\r\n") == ""


def test_container_exit_is_fatal() -> None:
    ev = container_exit(137)
    assert ev.fatal and ev.kind is Kind.CONTAINER_EXIT and "SIGKILL" in ev.text
    assert ev.fields["exit_code"] == "137"
    assert "OOMKilled" in container_exit(137, oom_killed=True).text
    assert "code 1" in container_exit(1).text


def test_parse_int_tolerates_commas_and_garbage() -> None:
    assert parse_int("2,584,421") == 2584421
    assert parse_int("x") is None and parse_int(None) is None


def test_progress_lines_are_progress() -> None:
    for line, kind, _ in CASES:
        ev = classify(line)
        assert ev is not None
        if kind in (Kind.LOAD_SHARD, Kind.LOAD_DONE, Kind.KV_CACHE, Kind.API_UP):
            assert ev.severity is Severity.PROGRESS


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_fuzz_never_raises(text: str) -> None:
    ev = classify(text)
    assert ev is None or ev.text


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([c[0] for c in CASES]), st.text(max_size=30), st.integers(0, 200))
def test_fuzz_mutated_real_lines_never_raise(line: str, junk: str, cut: int) -> None:
    classify(line[:cut] + junk + line[cut:])
    classify(line[:cut])
