"""vLLM's wording of an engine's life, rendered from the dialect fixtures
(sim/dialects/vllm-0.33.json, vllm-0.11.json: the wheels' own strings with
their file:line): the logger prefix of each version, Model Runner V2's boot
order in 0.33 (unless ``VLLM_USE_V2_MODEL_RUNNER=0``): ``Loading model from
scratch...``, the CUDA-graph memory-profiling pass before the KV cache, the
KV pin's ``Initial free memory ... reserved`` instead of ``Available KV cache
memory``; tracebacks under the repeated header and again raw; no ``Uvicorn
running on`` (vLLM starts uvicorn without it); the weight bars (the shard
bar, an InstantTensor load's bytes, its only output) on the global first rank
only, the other ranks silent while they load; the head sees only its own
workers, so a remote rank's death is an NCCL error of a local worker."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .dialects import Dialect

if TYPE_CHECKING:
    from .engine import Engine

PY = "/usr/local/lib/python3.12/dist-packages"


def _fmt_interval(s: float) -> str:
    m, sec = divmod(int(s), 60)
    h, m = divmod(m, 60)
    return f"{h:d}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


def _remaining(n: float, total: float, elapsed: float) -> str:
    """tqdm's ``remaining``: the rest at the mean rate so far, ``?`` before
    the first step."""
    return "?" if n == 0 or elapsed <= 0 else _fmt_interval((total - n) / (n / elapsed))


def _rate(n: int, elapsed: float) -> str:
    """tqdm's ``rate_fmt`` without ``unit_scale``: ``f"{rate:5.2f}"``, padded
    to five (tqdm 4.70 ``std.py`` ``format_meter``)."""
    if n == 0 or elapsed <= 0:
        return "?it/s"
    per = elapsed / n
    return f"{per:5.2f}s/it" if per > 1 else f"{1 / per:5.2f}it/s"


def _bar(frac: float) -> str:
    full = int(frac * 10)
    part = int((frac * 10 - full) * 8)
    body = "█" * full + (" ▏▎▍▌▋▊▉"[part] if full < 10 and part else "")
    return body.ljust(10)


def tqdm_line(desc: str, n: int, total: int, elapsed: float) -> str:
    """tqdm's default format (the capture bars)."""
    return (f"{desc}: {100 * n / total:3.0f}%|{_bar(n / total)}| {n}/{total} "
            f"[{_fmt_interval(elapsed)}<{_remaining(n, total, elapsed)}, {_rate(n, elapsed)}]")


def shard_bar(d: Dialect, done: int, total: int, elapsed: float) -> str:
    """The engine's own shard bar format (``{desc}: {percentage:3.0f}% Completed | ...``)."""
    return d.entry("shard_bar").text.format(
        desc="Loading safetensors checkpoint shards", percentage=100 * done / total,
        n_fmt=done, total_fmt=total, elapsed=_fmt_interval(elapsed),
        remaining=_remaining(done, total, elapsed),
        rate_fmt=_rate(done, elapsed)).rstrip("\n")


def sizeof(num: float, divisor: int = 1000) -> str:
    """tqdm's ``format_sizeof`` (tqdm 4.70 ``std.py:368``): three significant
    figures and an SI prefix, ``divisor`` between prefixes."""
    for unit in ("", "k", "M", "G", "T", "P", "E", "Z"):
        if abs(num) < 999.5:
            if abs(num) < 99.95:
                if abs(num) < 9.995:
                    return f"{num:1.2f}{unit}"
                return f"{num:2.1f}{unit}"
            return f"{num:3.0f}{unit}"
        num /= divisor
    return f"{num:3.1f}Y"


def byte_bar(d: Dialect, done: float, total: float, elapsed: float) -> str:
    """InstantTensor's bar over the bytes it loads (vLLM 0.33
    ``model_loader/weight_utils.py:1457-1467``: ``unit="B"``, ``unit_scale``,
    ``unit_divisor=1024``, in ``_BAR_FORMAT`` :842): sizes in binary prefixes,
    the rate in decimal ones (tqdm's ``format_meter`` formats the rate with
    ``format_sizeof``'s default divisor), as tqdm 4.70 writes them."""
    rate = done / elapsed if done and elapsed > 0 else 0.0
    if not rate:
        rate_fmt = "?B/s"
    elif rate < 1:
        rate_fmt = sizeof(1 / rate) + "s/B"
    else:
        rate_fmt = sizeof(rate) + "B/s"
    return d.entry("shard_bar").text.format(
        desc=d.msg("instanttensor_bar"), percentage=100 * done / total,
        n_fmt=sizeof(done, 1024), total_fmt=sizeof(total, 1024), elapsed=_fmt_interval(elapsed),
        remaining=_remaining(done, total, elapsed), rate_fmt=rate_fmt).rstrip("\n")


def frames(*calls: tuple[str, int, str, str]) -> list[str]:
    out = []
    for path, line, fn, src in calls:
        out += [f'  File "{PY}/{path}", line {line}, in {fn}', f"    {src}"]
    return out


class VllmStyle:
    failure_exit = 1
    timed_stats = True

    def __init__(self, dialect: Dialect) -> None:
        self.d = dialect

    def _v2(self, e: Engine) -> bool:
        """Model Runner V2 is 0.33's default (config/vllm.py use_v2_model_runner)."""
        return self.d.name == "vllm-0.33" and e.env.get("VLLM_USE_V2_MODEL_RUNNER") != "0"

    def _proc(self, e: Engine) -> str:
        return "EngineCore_DP0" if e.serves_http else f"Worker_TP{e.rank}"

    def _record(self, e: Engine, proc: str, pid: int, where: str, msg: str,
                level: str = "INFO") -> None:
        for line in self.d.record(msg, when=e.t(), where=where, proc=proc, pid=pid,
                                  level=level):
            e.log(line, "stderr" if level != "INFO" else "stdout")

    def _log(self, e: Engine, key: str, *args: object, api: bool = False,
             level: str = "INFO") -> None:
        proc, pid = ("APIServer", 1) if api else (self._proc(e), e.pid)
        self._record(e, proc, pid, self.d.entry(key).where, self.d.msg(key, *args), level)

    def _raw(self, e: Engine, lines: list[str], *, api: bool = False) -> None:
        proc, pid = ("APIServer", 1) if api else (self._proc(e), e.pid)
        for line in self.d.raw(lines, proc=proc, pid=pid):
            e.log(line, "stderr")

    def _dies(self, e: Engine, key: str, tb: list[str], *, summary: bool = True) -> None:
        """``logger.exception(...)`` of the engine core, the traceback again raw
        from multiprocessing, then the API server's summary."""
        proc = self._proc(e)
        self._record(e, proc, e.pid, self.d.entry(key).where,
                     self.d.msg(key) + "\n" + "\n".join(tb), "ERROR")
        self._raw(e, [f"Process {proc}:", *tb])
        if summary and e.serves_http:
            self._raw(e, ["Traceback (most recent call last):",
                          '  File "/usr/local/bin/vllm", line 10, in <module>',
                          "    sys.exit(main())",
                          "RuntimeError: " + self.d.msg("core_init_failed",
                                                        {"EngineCore_DP0": 1})], api=True)

    def start(self, e: Engine) -> None:
        a, d = e.args, self.d
        if e.serves_http:
            nondefault = {"model_tag": a.model, "host": a.host, "port": a.port,
                          "model": a.model, "max_model_len": a.max_model_len,
                          "gpu_memory_utilization": a.gmu, "tensor_parallel_size": a.tp}
            if d.has("logo") and e.env.get("VLLM_DISABLE_LOG_LOGO") != "1":
                logo = d.entry("logo").text
                for k in ("${w}", "${r}", "${o}", "${b}"):  # a monochrome logo off a TTY
                    logo = logo.replace(k, "")
                self._record(e, "APIServer", 1, d.entry("version_call").where,
                             logo % (d.version, a.model))
            elif d.has("nondefault"):
                self._record(e, "APIServer", 1, d.entry("version_call").where,
                             f"vLLM server version {d.version}, serving model {a.model}")
            else:
                self._log(e, "version", d.version, api=True)
            if d.has("nondefault"):
                self._log(e, "nondefault", nondefault, api=True)
        else:
            self._record(e, "APIServer", 1, "serve.py:150",
                         f"Launching headless engine, node rank {a.node_rank}")

    def model_missing(self, e: Engine) -> None:
        """The CLI resolves the model's config before any engine starts: a raw
        traceback of the API server (or headless) process."""
        self._raw(e, ["Traceback (most recent call last):",
                      *frames(("vllm/transformers_utils/config.py", 612, "get_config",
                               "config_dict, _ = PretrainedConfig.get_config_dict(")),
                      "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an "
                      "appropriate cached snapshot folder for the specified revision on the "
                      "local disk and outgoing traffic has been disabled. To enable repo "
                      "look-ups and downloads online, set 'HF_HUB_OFFLINE=0' as environment "
                      "variable."], api=True)

    def admission_failed(self, e: Engine, free: float, requested: float) -> None:
        d = self.d
        args: tuple[object, ...] = (round(free, 2), round(e.sim.usable_gib, 2), e.args.gmu,
                                    round(requested, 2))
        if "device_" in d.entry("admission").text:
            args = ("cuda:0", *args)
        tb = ["Traceback (most recent call last):",
              *frames(("vllm/v1/worker/gpu_worker.py", 290, "init_device",
                       "self.requested_memory = request_memory(self.init_snapshot, "
                       "self.cache_config)"),
                      ("vllm/v1/worker/utils.py", 764, "request_memory", "raise ValueError(")),
              "ValueError: " + d.msg("admission", *args)]
        self._dies(e, "core_failed", tb)

    def nccl_failed(self, e: Engine, reason: str, warn: str) -> None:
        e.log(f"{e.node.name}:{e.pid}:{e.pid + 93} [{e.rank}] NCCL WARN {warn}", "stdout")
        tb = ["Traceback (most recent call last):",
              *frames(("vllm/distributed/device_communicators/pynccl.py", 104, "__init__",
                       "self.comm: ncclComm_t = self.nccl.ncclCommInitRank("),
                      ("vllm/distributed/device_communicators/pynccl_wrapper.py", 464,
                       "NCCL_CHECK", 'raise RuntimeError(f"NCCL error: {error_str}")')),
              "RuntimeError: " + self.d.msg("nccl_error", reason)]
        self._dies(e, "workerproc_failed_start", tb, summary=False)

    def store_timeout(self, e: Engine, joined: int, waited: float) -> None:
        e.log(f"torch.distributed.DistStoreError: Timed out after {int(waited) + 1} seconds "
              f"waiting for clients. {joined}/{e.nranks} clients joined.", "stderr")

    def load_begin(self, e: Engine) -> None:
        if self._v2(e):
            self._log(e, "load_start_v2")
        else:
            self._log(e, "load_start_v1", e.args.model)

    def _instanttensor(self, e: Engine) -> bool:
        """An InstantTensor load (vLLM 0.33; 0.11 has no such loader, so its
        dialect loads the shards)."""
        return e.args.load_format == "instanttensor" and self.d.has("instanttensor_bar")

    def load_progress(self, e: Engine, done: int, total: int, elapsed: float) -> None:
        """tqdm's bar, one redraw per shard read, each ``\r...\n``, on the
        global first rank only: ``disable=not enable_tqdm(use_tqdm_on_load)``,
        ``enable_tqdm`` true only where ``torch.distributed.get_rank() == 0``
        (0.33 ``model_loader/weight_utils.py:845``, the shard bar ``:1201-1205``;
        0.11 ``:510``, ``:573-577``), not the first rank of each node. The
        other ranks print nothing while they load. An InstantTensor load prints
        nothing but its byte bar (no logger line), under the same gate
        (``:1457-1467``)."""
        if e.rank != 0:
            return
        if self._instanttensor(e):  # the checkpoint's tensors (f.total_tensor_size, :1458)
            size = e.model.size_gb * 1e9 if e.model else e.weights_gib() * 2**30
            self._raw(e, ["\r" + byte_bar(self.d, size * done / total, size, elapsed)])
            return
        self._raw(e, ["\r" + shard_bar(self.d, done, total, elapsed)])

    def load_end(self, e: Engine, gib: float, seconds: float) -> None:
        self._log(e, "weights_took", seconds)
        gib_text = round(gib, 2) if self.d.name == "vllm-0.33" else gib
        self._log(e, "model_loading_v2" if self._v2(e) else "model_loading_v1", gib_text,
                  seconds + 3.4)

    def kv_short(self, e: Engine, need_gib: float, have_gib: float, fits: int) -> None:
        msg = (f"To serve at least one request with the model's max seq len "
               f"({e.args.max_model_len}), ({round(need_gib, 2)} GiB KV cache is needed, which "
               f"is larger than the available KV cache memory ({round(have_gib, 2)} GiB). Based "
               f"on the available memory, the estimated maximum model length is {fits}. Try "
               "increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
               "initializing the engine.")
        tb = ["Traceback (most recent call last):",
              *frames(("vllm/v1/core/kv_cache_planning.py", 77, "check_enough_kv_cache_memory",
                       "raise ValueError(")), "ValueError: " + msg]
        self._dies(e, "core_failed", tb)

    def kv_ready(self, e: Engine, kv_gib: float, tokens: int) -> None:
        d, pin = self.d, e.args.kv_cache_memory_bytes is not None
        free = round(e.node.memory.admission_free_gib(), 2)
        if pin:  # gpu_worker.py:656: profiling is skipped, the pin is printed instead
            self._log(e, "kv_pin", free, round(kv_gib, 2))
        else:
            if self._v2(e):  # V2 captures once to measure, before the KV cache exists
                if e.serves_http:  # the bar: the global first rank only
                    self._raw(e, ["\r" + "\r".join(
                        tqdm_line("Capturing CUDA graphs (PIECEWISE)", k, 7, 0.4 * k)
                        for k in (0, 3, 7))])
                self._log(e, "graph_done_v2", 3, 0.41)
            elif d.name == "vllm-0.33":
                self._log(e, "profiling_cudagraph_v1", "67 PIECEWISE, 35 FULL")
            self._log(e, "kv_available", round(kv_gib, 2))
        if not e.serves_http:
            return
        max_len = e.args.max_model_len or 32768
        if d.name == "vllm-0.33":
            self._log(e, "kv_size", "GPU", f"{tokens:,}", f"{max_len:,}", tokens / max_len)
        else:
            self._log(e, "kv_size", f"{tokens:,}")
            self._log(e, "kv_concurrency", f"{max_len:,}", tokens / max_len)

    def graphs(self, e: Engine, seconds: float, gib: float) -> None:
        """Bars on the global first rank only; every worker logs that it finished;
        ``init engine`` is the engine core's (the head's)."""
        if self._v2(e):
            bars = (("Capturing CUDA graphs (PIECEWISE)", 67), ("Capturing CUDA graphs (FULL)", 35))
        else:
            bars = (("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)", 67),
                    ("Capturing CUDA graphs (decode, FULL)", 35))
        if e.serves_http:
            for desc, n in bars:
                self._raw(e, ["\r" + "\r".join(tqdm_line(desc, k, n, seconds / 2 * k / n)
                                                for k in (0, n // 3, n))])
        self._log(e, "graph_done_v2" if self._v2(e) else "graph_done_v1", seconds, gib)
        if e.serves_http:
            self._log(e, "init_engine", seconds + 20.0)

    def serving(self, e: Engine) -> None:
        """``Starting vLLM server on`` (0.33 ``launchers/api_server/entry.py:139``;
        0.11 ``Starting vLLM API server %d on``, ``openai/api_server.py:1912``),
        then uvicorn's lifespan lines at its default format. No ``Uvicorn running
        on``: vLLM binds the socket and passes it to ``serve(sockets=[sock])``
        (0.33 ``launchers/launcher.py:238``; 0.11 ``launcher.py:67-68``), where
        uvicorn says nothing of it (0.55 ``server.py:198-203``)."""
        url = f"http://{e.args.host}:{e.args.port}"
        if self.d.name == "vllm-0.33":
            self._log(e, "api_start", url, api=True)
        else:
            self._log(e, "api_start", 1, url, api=True)
        self._raw(e, [f"INFO:     {msg}" for msg in (
            "Started server process [1]", "Waiting for application startup.",
            "Application startup complete.")], api=True)

    def stats(self, e: Engine, prompt_tps: float, gen_tps: float) -> None:
        """loggers.py: every 10 s while busy, always with the ``Engine 000: `` prefix."""
        st, d = e.stats, self.d
        usage = 100.0 * e.kv_in_use / e.kv_tokens if e.kv_tokens else 0.0
        if d.name == "vllm-0.33":
            msg = d.msg("stats_prefix", 0) + ", ".join((
                d.msg("stats", prompt_tps, gen_tps, st.running, st.waiting),
                d.msg("stats_kv", "GPU", usage), d.msg("stats_hit", 0.0)))
            self._record(e, "APIServer", 1, d.entry("stats_call").where, msg)
        else:
            self._log(e, "stats", 0, prompt_tps, gen_tps, st.running, st.waiting, usage, 0.0,
                      api=True)

    def prefill_batch(self, e: Engine, tokens: int, pending: int) -> None:
        return None  # vLLM logs by time (stats)

    def decode_chunk(self, e: Engine) -> int:
        """Five seconds of tokens between the step counters' moves."""
        return max(1, int(e.decode_tps() * 5))

    def decode_batch(self, e: Engine, tokens: int, chunk: int) -> None:
        return None

    def stall_notice(self, e: Engine) -> None:
        self._log(e, "shm_wait", 60, level="WARNING")

    def rpc_timeout(self, e: Engine) -> None:
        """The execute-model timeout, chained (``raise TimeoutError(...) from e``)."""
        d = self.d
        tb = ["Traceback (most recent call last):",
              *frames(("vllm/distributed/device_communicators/shm_broadcast.py", 640,
                       "acquire_read", "raise TimeoutError")), "TimeoutError", "",
              "The above exception was the direct cause of the following exception:", "",
              "Traceback (most recent call last):",
              *frames(("vllm/v1/engine/core.py", 1577, "run_engine_core",
                       "engine_core.run_busy_loop()"),
                      ("vllm/v1/executor/multiproc_executor.py", 509, "get_response",
                       'raise TimeoutError(f"RPC call to {method} timed out.") from e')),
              "TimeoutError: " + d.msg("rpc_timeout", "sample_tokens" if d.name == "vllm-0.33"
                                       else "execute_model")]
        self._dies(e, "core_fatal", tb, summary=False)
        self._log(e, "output_handler", api=True, level="ERROR")
        self._raw(e, [f"vllm.v1.engine.exceptions.EngineDeadError: {d.msg('engine_dead')}"],
                  api=True)

    def core_exited(self, e: Engine) -> None:
        """All a SIGKILLed engine core leaves: the client's notice (0.33) or the
        liveness monitor's line (0.11); /health turns 503, the server exits."""
        if self.d.has("mpclient_exit"):
            self._log(e, "mpclient_exit", api=True, level="WARNING")
        else:
            self._log(e, "core_proc_died", "EngineCore_DP0", api=True, level="ERROR")

    def peer_died(self, e: Engine) -> None:
        """What a live rank sees of a dead one: its own worker's NCCL error
        (the head has no line for a remote rank)."""
        nccl = ("torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/"
                "distributed/c10d/ProcessGroupNCCL.cpp:3690, remote process exited or there "
                "was a network error, NCCL version 2.27.7")
        tb = ["Traceback (most recent call last):",
              *frames(("torch/distributed/distributed_c10d.py", 2811, "all_reduce",
                       "work = group.allreduce([tensor], opts)")), nccl]
        key = "workerproc_failed" if e.phase == "ready" else "workerproc_failed_start"
        self._record(e, f"Worker_TP{e.rank}", e.pid + 1, self.d.entry(key).where,
                     self.d.msg(key) + "\n" + "\n".join(tb), "ERROR")
        if e.serves_http:
            code: tuple[object, ...] = (1,) if "(exit code" in self.d.entry("worker_died").text \
                else ()
            self._log(e, "worker_died", f"Worker_TP{e.rank}", *code, level="ERROR")
            self._raw(e, [f"vllm.v1.engine.exceptions.EngineDeadError: "
                          f"{self.d.msg('engine_dead')}"], api=True)

    def shutdown(self, e: Engine) -> None:
        if e.serves_http and e.phase == "ready":
            self._raw(e, [f"INFO:     {msg}" for msg in (
                "Shutting down", "Waiting for application shutdown.",
                "Application shutdown complete.", "Finished server process [1]")], api=True)


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
