"""SGLang 0.5.23's wording of an engine's life, rendered from the dialect
fixture (sim/dialects/sglang-0.5.json, the wheel's strings with file:line):
``[YYYY-MM-DD HH:MM:SS TPn] msg`` (the TP prefix only when tp > 1), the shard
bar in its own ``% Completed |`` format redrawn with ``\\r`` only (one physical
line, ended when the bar closes), a crash as ``Scheduler hit an exception:
Traceback ...`` on one line with the frames raw after it, then the launcher's
sigquit and its own SIGKILL of the process tree (exit 137)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .dialects import Dialect
from .engine_vllm import frames, shard_bar

if TYPE_CHECKING:
    from .engine import Engine

DECODE_LOG_INTERVAL = 40
"""SGLang logs a decode batch every 40 decode steps (``decode_log_interval``,
0.5.23 ``srt/arg_groups/fields/observability.py:136``; ``metrics_reporter.py:934``)."""


class SglangStyle:
    failure_exit = 137
    """kill_process_tree SIGKILLs everything after a child's sigquit (engine.py:1978)."""
    timed_stats = False
    """The scheduler logs a prefill batch as it is scheduled and a decode batch
    every DECODE_LOG_INTERVAL steps (metrics_reporter.py:753, :934), no timer."""

    def __init__(self, dialect: Dialect) -> None:
        self.d = dialect

    def _tp(self, e: Engine) -> str:
        return f" TP{e.rank}" if e.args.tp > 1 else ""

    def _line(self, e: Engine, msg: str, stream: str = "stdout") -> None:
        for line in self.d.record(msg, when=e.t(), tp=self._tp(e)):
            e.log(line, stream)

    def _avail(self, e: Engine) -> float:
        return max(0.0, e.node.memory.admission_free_gib() * 1.073741824)

    def _crash(self, e: Engine, exc: str, *calls: tuple[str, int, str, str]) -> None:
        tb = ["Traceback (most recent call last):",
              *frames(("sglang/srt/managers/scheduler.py", 6367, "run_scheduler_process",
                       "scheduler = Scheduler(server_args, port_args)"), *calls), exc]
        self._line(e, self.d.msg("scheduler_exception", "\n".join(tb)), "stderr")
        self._line(e, self.d.msg("sigquit"), "stderr")

    def start(self, e: Engine) -> None:
        a = e.args
        self._line(e, f"server_args=ServerArgs(model_path='{a.model}', tp_size={a.tp}, "
                   f"mem_fraction_static={a.gmu}, context_length={a.max_model_len}, "
                   f"host='{a.host}', port={a.port}, nnodes={a.nnodes}, node_rank={a.node_rank}, "
                   f"enable_metrics={'enable-metrics' in a.extra})")

    def model_missing(self, e: Engine) -> None:
        self._crash(e, "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an "
                    "appropriate cached snapshot folder for the specified revision on the local "
                    "disk and outgoing traffic has been disabled. To enable repo look-ups and "
                    "downloads online, set 'HF_HUB_OFFLINE=0' as environment variable.")

    def _not_enough(self, e: Engine) -> None:
        self._crash(e, "RuntimeError: " + self.d.msg("not_enough_memory"),
                    ("sglang/srt/model_executor/pool_configurator.py", 97, "configure",
                     "raise RuntimeError(msg)"))

    def admission_failed(self, e: Engine, free: float, requested: float) -> None:
        self._not_enough(e)

    def nccl_failed(self, e: Engine, reason: str, warn: str) -> None:
        e.log(f"{e.node.name}:{e.pid}:{e.pid + 93} [{e.rank}] NCCL WARN {warn}")
        self._crash(e, f"RuntimeError: NCCL error: {reason}")

    def store_timeout(self, e: Engine, joined: int, waited: float) -> None:
        e.log(f"torch.distributed.DistStoreError: Timed out after {int(waited) + 1} seconds "
              f"waiting for clients. {joined}/{e.nranks} clients joined.", "stderr")

    def load_begin(self, e: Engine) -> None:
        self._line(e, f"Load weight begin. avail mem={self._avail(e):.2f} GB")

    def load_progress(self, e: Engine, done: int, total: int, elapsed: float) -> None:
        """BAR_FORMAT has no newline (utils/common.py:1414): tqdm redraws with
        ``\\r`` as each shard is read and ends the physical line only when the
        bar closes. Written as it goes: the container's log copier makes of it
        what docker makes (nothing until the newline, or 16 KiB pieces,
        sim/docker.py ``Container.write``)."""
        if e.rank != 0:
            return
        e.write("\r" + shard_bar(self.d, done, total, elapsed), "stderr")
        if done == total:
            e.write("\n", "stderr")

    def load_end(self, e: Engine, gib: float, seconds: float) -> None:
        quant = "quant=fp8, fmt=e4m3, " if "fp8" in e.args.model.lower() else ""
        self._line(e, f"Load weight end. elapsed={seconds:.2f} s, type={e.args.model}, "
                   f"{quant}avail mem={self._avail(e):.2f} GB, mem usage={gib * 1.073741824:.2f} "
                   "GB.")

    def kv_short(self, e: Engine, need_gib: float, have_gib: float, fits: int) -> None:
        self._not_enough(e)

    def kv_ready(self, e: Engine, kv_gib: float, tokens: int) -> None:
        half = kv_gib * 1.073741824 / 2
        self._line(e, f"KV Cache is allocated. dtype: {e.args.kv_cache_dtype}, #tokens: {tokens}, "
                   f"K size: {half:.2f} GB, V size: {half:.2f} GB")
        self._line(e, f"Memory pool end. avail mem={self._avail(e):.2f} GB")

    def graphs(self, e: Engine, seconds: float, gib: float) -> None:
        a = e.args
        if e.rank == 0:  # scheduler.py:1269 prints it on tp_rank 0
            self._line(e, f"max_total_num_tokens={e.kv_tokens}, chunked_prefill_size="
                       f"{a.max_num_batched_tokens}, max_prefill_tokens=16384, "
                       f"max_running_requests={a.max_num_seqs}, context_len={a.max_model_len}, "
                       f"available_gpu_mem={self._avail(e):.2f} GB")

    def serving(self, e: Engine) -> None:
        """uvicorn's start in SGLang's format for it (srt/utils/common.py:3512): the
        lifespan (its warmup thread started inside it, http_server.py:450-454),
        then ``Uvicorn running on``, which uvicorn logs when it binds the socket
        itself (0.55 server.py:198-199, :232): SGLang runs ``uvicorn.Server.run()``
        (http_server.py:2991-3010) at ``--log-level info`` (the default,
        arg_groups/fields/observability.py:31). The warmup's end is ``fired up``."""
        url = f"http://{e.args.host}:{e.args.port}"
        for msg in ("Started server process [1]", "Waiting for application startup.",
                    "Application startup complete.",
                    f"Uvicorn running on {url} (Press CTRL+C to quit)"):
            e.log(self.d.uvicorn(msg, when=e.t()), "stderr")
        self._line(e, self.d.msg("fired_up"))

    def stats(self, e: Engine, prompt_tps: float, gen_tps: float) -> None:
        """``Decode batch, ...`` (metrics_reporter.py:963-1040; with speculation its
        accept length and rate before the graph flag, :1005)."""
        usage = e.kv_in_use / e.kv_tokens if e.kv_tokens else 0.0
        per_step = e.tokens_per_step()
        spec = (f"accept len: {per_step:.2f}, accept rate: {(per_step - 1) / 5:.2f}, "
                if per_step > 1 else "")
        d = self.d
        self._line(e, d.msg("decode_batch", "", e.stats.running,
                            d.msg("decode_usage", e.kv_in_use, usage) + ", ")
                   + f"{spec}cuda graph: True, gen throughput (token/s): {gen_tps:.2f}, "
                   f"#queue-req: {e.stats.waiting}")

    def prefill_batch(self, e: Engine, tokens: int, pending: int) -> None:
        """``Prefill batch, ...`` once the chunk's forward is done
        (``report_prefill_stats``, called from batch_result_processor.py:510; the
        message metrics_reporter.py:753-762, no `` [N]`` without
        SGLANG_LOG_FORWARD_ITERS), a plain pool's usage: ``token usage`` alone,
        never ``#token:`` (pool_stats_observer.py:116); an extend batch runs no
        CUDA graph (``:782``), then the input throughput (``:783``)."""
        d = self.d
        used = max(0, e.kv_in_use - pending)  # the prompt's tokens in the pool so far
        usage = d.msg("prefill_usage", used / e.kv_tokens if e.kv_tokens else 0.0)
        self._line(e, d.msg("prefill_batch", "", 1, tokens, 0, usage + ", ",
                            e.stats.running - 1, e.stats.waiting, pending)
                   + d.msg("prefill_graph", "cuda graph", False)
                   + d.msg("prefill_throughput", e.prefill_tps()))

    def decode_chunk(self, e: Engine) -> int:
        """The tokens of DECODE_LOG_INTERVAL decode steps."""
        return max(1, round(DECODE_LOG_INTERVAL * e.tokens_per_step()))

    def decode_batch(self, e: Engine, tokens: int, chunk: int) -> None:
        if tokens == chunk:  # the 40th step since the last line
            self.stats(e, 0.0, e.decode_tps())

    def stall_notice(self, e: Engine) -> None:
        return None

    def rpc_timeout(self, e: Engine) -> None:
        self._crash(e, "RuntimeError: NCCL error: remote process exited or there was a network "
                    "error")

    def peer_died(self, e: Engine) -> None:
        self._crash(e, "RuntimeError: NCCL error: remote process exited or there was a network "
                    "error")

    def core_exited(self, e: Engine) -> None:
        self._line(e, self.d.msg("subprocess_crashed", "scheduler_0", e.pid + 7, -9), "stderr")
        self._line(e, self.d.msg("sigquit"), "stderr")

    def shutdown(self, e: Engine) -> None:
        e.log(self.d.uvicorn("Shutting down", when=e.t()), "stderr")
