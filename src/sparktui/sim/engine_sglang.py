"""SGLang 0.5 wording of an engine's life (REFERENCE.md §2):
`[YYYY-MM-DD HH:MM:SS TPn] msg`, the TP prefix only when tp > 1."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .timefmt import sglang_ts

if TYPE_CHECKING:
    from .engine import Engine


class SglangStyle:
    def _line(self, e: Engine, msg: str, stream: str = "stdout") -> None:
        prefix = f" TP{e.rank}" if e.args.tp > 1 else ""
        e.log(f"[{sglang_ts(e.t())}{prefix}] {msg}", stream)

    def _avail(self, e: Engine) -> float:
        return max(0.0, e.node.memory.admission_free_gib() * 1.073741824)

    def start(self, e: Engine) -> None:
        a = e.args
        self._line(e, f"server_args=ServerArgs(model_path='{a.model}', tp_size={a.tp}, "
                   f"mem_fraction_static={a.gmu}, context_length={a.max_model_len}, "
                   f"host='{a.host}', port={a.port}, nnodes={a.nnodes}, node_rank={a.node_rank})")

    def model_missing(self, e: Engine) -> None:
        e.log("huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate "
              "cached snapshot folder for the specified revision on the local disk and outgoing "
              "traffic has been disabled. To enable repo look-ups and downloads online, set "
              "'HF_HUB_OFFLINE=0' as environment variable.", "stderr")

    def admission_failed(self, e: Engine, free: float, requested: float) -> None:
        e.log(f"RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
              f"Current value: mem_fraction_static={e.args.gmu}", "stderr")

    def nccl_failed(self, e: Engine, reason: str, warn: str) -> None:
        e.log(f"{e.node.name}:{e.pid}:{e.pid + 93} [{e.rank}] NCCL WARN {warn}")
        e.log(f"RuntimeError: NCCL error: {reason}", "stderr")

    def store_timeout(self, e: Engine, joined: int, waited: float) -> None:
        e.log(f"torch.distributed.DistStoreError: Timed out after {int(waited) + 1} seconds "
              f"waiting for clients. {joined}/{e.nranks} clients joined.", "stderr")

    def load_begin(self, e: Engine) -> None:
        self._line(e, f"Load weight begin. avail mem={self._avail(e):.2f} GB")

    def load_progress(self, e: Engine, done: int, total: int, elapsed: float) -> None:
        from .engine_vllm import tqdm_line

        if e.rank == 0:
            e.log("\r" + tqdm_line("Loading safetensors checkpoint shards", done, total, elapsed),
                  "stderr")

    def load_end(self, e: Engine, gib: float, seconds: float) -> None:
        self._line(e, f"Load weight end. elapsed={seconds:.2f} s, type={e.args.model}, "
                   f"avail mem={self._avail(e):.2f} GB, mem usage={gib * 1.073741824:.2f} GB.")

    def kv_short(self, e: Engine, need_gib: float, have_gib: float, fits: int) -> None:
        e.log("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
              "stderr")

    def kv_ready(self, e: Engine, kv_gib: float, tokens: int) -> None:
        half = kv_gib * 1.073741824 / 2
        self._line(e, f"KV Cache is allocated. dtype: {e.args.kv_cache_dtype}, #tokens: {tokens}, "
                   f"K size: {half:.2f} GB, V size: {half:.2f} GB")
        self._line(e, f"Memory pool end. avail mem={self._avail(e):.2f} GB")

    def graphs(self, e: Engine, seconds: float, gib: float) -> None:
        a = e.args
        self._line(e, f"max_total_num_tokens={e.kv_tokens}, chunked_prefill_size="
                   f"{a.max_num_batched_tokens}, max_prefill_tokens=16384, max_running_requests="
                   f"{a.max_num_seqs}, context_len={a.max_model_len}, "
                   f"available_gpu_mem={self._avail(e):.2f} GB")

    def serving(self, e: Engine) -> None:
        e.log("INFO:     Started server process [1]", "stderr")
        e.log("INFO:     Waiting for application startup.", "stderr")
        e.log("INFO:     Application startup complete.", "stderr")
        e.log(f"INFO:     Uvicorn running on http://{e.args.host}:{e.args.port} "
              "(Press CTRL+C to quit)", "stderr")
        self._line(e, "The server is fired up and ready to roll!")

    def stats(self, e: Engine, prompt_tps: float, gen_tps: float) -> None:
        usage = e.kv_in_use / e.kv_tokens if e.kv_tokens else 0.0
        self._line(e, f"Decode batch, #running-req: {e.stats.running}, token usage: {usage:.2f}, "
                   f"gen throughput (token/s): {gen_tps:.2f}, #queue-req: {e.stats.waiting}")

    def stall_notice(self, e: Engine) -> None:
        return None

    def rpc_timeout(self, e: Engine) -> None:
        e.log("RuntimeError: NCCL error: remote process exited or there was a network error",
              "stderr")

    def peer_died(self, e: Engine) -> None:
        e.log("RuntimeError: NCCL error: remote process exited or there was a network error",
              "stderr")

    def shutdown(self, e: Engine) -> None:
        e.log("INFO:     Shutting down", "stderr")
