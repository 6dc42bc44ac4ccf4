"""vLLM 0.33 wording of an engine's life (REFERENCE.md §1): the
`(Process pid=N) LEVEL MM-DD HH:MM:SS [file.py:LINE] msg` prefix, tqdm bars
as `\\r`-separated updates, uvicorn's own lines, and the fatal errors."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .timefmt import vllm_ts

if TYPE_CHECKING:
    from .engine import Engine

VERSION = "0.33.0"


def _fmt_interval(s: float) -> str:
    m, sec = divmod(int(s), 60)
    h, m = divmod(m, 60)
    return f"{h:d}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


def _rate(n: int, elapsed: float) -> str:
    if n == 0 or elapsed <= 0:
        return "?it/s"
    per = elapsed / n
    return f"{per:.2f}s/it" if per > 1 else f"{1 / per:.2f}it/s"


def _bar(frac: float) -> str:
    full = int(frac * 10)
    part = int((frac * 10 - full) * 8)
    body = "█" * full + (" ▏▎▍▌▋▊▉"[part] if full < 10 and part else "")
    return body.ljust(10)


def tqdm_line(desc: str, n: int, total: int, elapsed: float) -> str:
    remaining = "?" if n == 0 else _fmt_interval(elapsed / n * (total - n))
    return (f"{desc}: {100 * n / total:3.0f}%|{_bar(n / total)}| {n}/{total} "
            f"[{_fmt_interval(elapsed)}<{remaining}, {_rate(n, elapsed)}]")


class VllmStyle:
    def _line(self, e: Engine, proc: str, pid: int, where: str, msg: str,
              level: str = "INFO") -> None:
        header = f"({proc} pid={pid}) {level} {vllm_ts(e.t())} [{where}] "
        e.log(header + msg.replace("\n", "\r\n" + header))

    def _api(self, e: Engine, where: str, msg: str, level: str = "INFO") -> None:
        self._line(e, "APIServer", 1, where, msg, level)

    def _core(self, e: Engine, where: str, msg: str, level: str = "INFO") -> None:
        if e.serves_http:
            self._line(e, "EngineCore_DP0", e.pid, where, msg, level)
        else:
            self._line(e, f"Worker_TP{e.rank}", e.pid, where, msg, level)

    def start(self, e: Engine) -> None:
        a = e.args
        if e.serves_http:
            nondefault = {"model_tag": a.model, "host": a.host, "port": a.port,
                          "model": a.model, "max_model_len": a.max_model_len,
                          "gpu_memory_utilization": a.gmu, "tensor_parallel_size": a.tp}
            self._api(e, "utils.py:253", f"non-default args: {nondefault}")
            self._api(e, "api_server.py:1885",
                      f"vLLM server version {VERSION}, serving model {a.model}")
        else:
            self._line(e, "APIServer", 1, "api_server.py:1741",
                       f"Launching headless engine, node rank {a.node_rank}")
        self._core(e, "core.py:93", f"Initializing a V1 LLM engine (v{VERSION}) with config: "
                   f"model='{a.model}', tensor_parallel_size={a.tp}, "
                   f"max_seq_len={a.max_model_len}, load_format={a.load_format}, "
                   f"kv_cache_dtype={a.kv_cache_dtype}")

    def model_missing(self, e: Engine) -> None:
        tb = ("Traceback (most recent call last):\n"
              '  File "/usr/local/lib/python3.12/dist-packages/vllm/transformers_utils/'
              'config.py", line 612, in get_config\n'
              "    config_dict, _ = PretrainedConfig.get_config_dict(\n"
              "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate "
              "cached snapshot folder for the specified revision on the local disk and "
              "outgoing traffic has been disabled. To enable repo look-ups and downloads "
              "online, set 'HF_HUB_OFFLINE=0' as environment variable.")
        for line in tb.split("\n"):
            e.log(line, "stderr")

    def admission_failed(self, e: Engine, free: float, requested: float) -> None:
        self._core(e, "core.py:933", "EngineCore failed to start.", "ERROR")
        tb = ("Traceback (most recent call last):\n"
              '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", '
              "line 248, in init_device\n"
              "    self.requested_memory = request_memory(self.init_snapshot, self.cache_config)\n"
              f"ValueError: Free memory on device cuda:0 ({round(free, 2)}/"
              f"{round(e.sim.usable_gib, 2)} GiB) on startup is less than desired GPU memory "
              f"utilization ({e.args.gmu}, {round(requested, 2)} GiB). Decrease GPU memory "
              "utilization or reduce GPU memory used by other processes.")
        for line in tb.split("\n"):
            e.log(line, "stderr")
        if e.serves_http:
            e.log("RuntimeError: Engine core initialization failed. See root cause above. "
                  f"Failed core proc(s): {{'EngineCore_DP0': {1}}}", "stderr")

    def nccl_failed(self, e: Engine, reason: str, warn: str) -> None:
        e.log(f"{e.node.name}:{e.pid}:{e.pid + 93} [{e.rank}] NCCL WARN {warn}", "stdout")
        self._core(e, "multiproc_executor.py:671", "WorkerProc failed to start.", "ERROR")
        e.log(f"RuntimeError: NCCL error: {reason}", "stderr")

    def store_timeout(self, e: Engine, joined: int, waited: float) -> None:
        e.log(f"torch.distributed.DistStoreError: Timed out after {int(waited) + 1} seconds "
              f"waiting for clients. {joined}/{e.nranks} clients joined.", "stderr")

    def load_begin(self, e: Engine) -> None:
        self._core(e, "gpu_model_runner.py:3338", f"Starting to load model {e.args.model}...")
        if e.args.load_format == "instanttensor":
            self._core(e, "default_loader.py:267", "Loading safetensors using InstantTensor loader")

    def load_progress(self, e: Engine, done: int, total: int, elapsed: float) -> None:
        if e.args.load_format == "instanttensor":
            return
        remaining = "?" if done == 0 else _fmt_interval(elapsed / done * (total - done))
        e.log(f"\rLoading safetensors checkpoint shards: {100 * done / total:3.0f}% Completed "
              f"| {done}/{total} [{_fmt_interval(elapsed)}<{remaining}, "
              f"{_rate(done, elapsed)}]", "stderr")

    def load_end(self, e: Engine, gib: float, seconds: float) -> None:
        self._core(e, "default_loader.py:314", f"Loading weights took {seconds:.2f} seconds")
        self._core(e, "gpu_model_runner.py:3420",
                   f"Model loading took {round(gib, 2)} GiB memory and {seconds + 3.4:.6f} seconds")

    def kv_short(self, e: Engine, need_gib: float, have_gib: float, fits: int) -> None:
        self._core(e, "core.py:933", "EngineCore failed to start.", "ERROR")
        e.log(f"ValueError: To serve at least one request with the model's max seq len "
              f"({e.args.max_model_len}), ({round(need_gib, 2)} GiB KV cache is needed, which "
              f"is larger than the available KV cache memory ({round(have_gib, 2)} GiB). Based "
              f"on the available memory, the estimated maximum model length is {fits}. Try "
              "increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
              "initializing the engine.", "stderr")

    def kv_ready(self, e: Engine, kv_gib: float, tokens: int) -> None:
        max_len = e.args.max_model_len or 32768
        self._core(e, "gpu_worker.py:359", f"Available KV cache memory: {round(kv_gib, 2)} GiB")
        self._core(e, "kv_cache_utils.py:1229",
                   f"GPU KV cache size: {tokens:,} tokens, Maximum concurrency for "
                   f"{max_len:,} tokens per request: {tokens / max_len:.2f}x")

    def graphs(self, e: Engine, seconds: float, gib: float) -> None:
        for kind, mode, n in (("mixed prefill-decode", "PIECEWISE", 67), ("decode", "FULL", 35)):
            desc = f"Capturing CUDA graphs ({kind}, {mode})"
            updates = [tqdm_line(desc, k, n, seconds / 2 * k / n) for k in (0, n // 3, n)]
            e.log("\r" + "\r".join(updates), "stderr")
        self._core(e, "gpu_model_runner.py:4489",
                   f"Graph capturing finished in {seconds:.0f} secs, took {gib:.2f} GiB")
        self._core(e, "core.py:250", "init engine (profile, create kv cache, warmup model) "
                   f"took {seconds + 20.0:.2f} s (compilation: {seconds / 3:.2f} s)")

    def serving(self, e: Engine) -> None:
        self._api(e, "api_server.py:2016", f"Starting vLLM server on http://{e.args.host}:"
                  f"{e.args.port}")
        for msg in ("Started server process [1]", "Waiting for application startup.",
                    "Application startup complete.",
                    f"Uvicorn running on http://{e.args.host}:{e.args.port} "
                    "(Press CTRL+C to quit)"):
            e.log(f"INFO:     {msg}", "stderr")

    def stats(self, e: Engine, prompt_tps: float, gen_tps: float) -> None:
        st = e.stats
        usage = 100.0 * e.kv_in_use / e.kv_tokens if e.kv_tokens else 0.0
        self._api(e, "loggers.py:236",
                  f"Avg prompt throughput: {prompt_tps:.1f} tokens/s, "
                  f"Avg generation throughput: {gen_tps:.1f} tokens/s, "
                  f"Running: {st.running} reqs, Waiting: {st.waiting} reqs, "
                  f"GPU KV cache usage: {usage:.1f}%, Prefix cache hit rate: {0.0:.1f}%")

    def stall_notice(self, e: Engine) -> None:
        self._core(e, "shm_broadcast.py:542",
                   "No available shared memory broadcast block found in 60 seconds. This "
                   "typically happens when some processes are hanging or doing some "
                   "time-consuming work (e.g. compilation, weight/kv cache quantization).",
                   "WARNING")

    def rpc_timeout(self, e: Engine) -> None:
        self._core(e, "core.py:1012", "EngineCore encountered a fatal error.", "ERROR")
        for line in ("Traceback (most recent call last):",
                     '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/'
                     'multiproc_executor.py", line 312, in get_response',
                     "    raise TimeoutError(f\"RPC call to {method} timed out.\") from e",
                     "TimeoutError: RPC call to sample_tokens timed out."):
            e.log(line, "stderr")
        self._api(e, "async_llm.py:551", "AsyncLLM output_handler failed.", "ERROR")
        e.log("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
              "See stack trace (above) for the root cause.", "stderr")

    def peer_died(self, e: Engine) -> None:
        if e.serves_http:
            dead = [p for p in e.peers() if p is not e and p.phase in ("dead", "stopped")]
            rank = dead[0].rank if dead else 1
            code = dead[0].container.exit_code if dead else -9
            self._core(e, "multiproc_executor.py:512",
                       f"Worker proc VllmWorker-{rank} died unexpectedly (exit code: {code}), "
                       "shutting down executor.", "ERROR")
            e.log("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
                  "See stack trace (above) for the root cause.", "stderr")
        else:
            e.log("RuntimeError: NCCL error: remote process exited or there was a network "
                  "error", "stderr")

    def shutdown(self, e: Engine) -> None:
        if e.serves_http and e.phase == "ready":
            for msg in ("Shutting down", "Waiting for application shutdown.",
                        "Application shutdown complete.", "Finished server process [1]"):
                e.log(f"INFO:     {msg}", "stderr")


def models_json(e: Engine, created: int) -> str:
    a = e.args
    return json.dumps({"object": "list", "data": [{
        "id": a.name, "object": "model", "created": created, "owned_by": "vllm",
        "root": a.model, "parent": None, "max_model_len": a.max_model_len or 32768,
        "permission": [{"id": f"modelperm-{e.container.id[:32]}", "object": "model_permission",
                        "created": created, "allow_create_engine": False,
                        "allow_sampling": True, "allow_logprobs": True,
                        "allow_search_indices": False, "allow_view": True,
                        "allow_fine_tuning": False, "organization": "*", "group": None,
                        "is_blocking": False}]}]})
