"""A simulated inference engine inside one rank container: its boot follows
the command line, the model on the NAS and the node it runs on, and every
failure arises from that model (memory, cache path, fabric, kernel).

The engine is a scheduler process (see scheduler.py); its log lines come from
a `LogStyle` (vLLM or SGLang wording, engine_vllm.py / engine_sglang.py).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from .catalog import ModelInfo, repo_dir
from .docker import Container
from .engine_args import EngineArgs
from .memory import GIB
from .scheduler import Proc, Process, Wait

if TYPE_CHECKING:
    from .cluster import Sim
    from .dialects import Dialect
    from .node import Node

CUDA_CONTEXT_GIB = 1.2
PREFILL_GIB_TOKENS_PER_S = 90_000.0
DECODE_GIB_TOKENS_PER_S = 2_150.0
RECLAIM_HOLD_GIB = 1.0
"""With ``reclaim_stall_s``, how far short of its limit a node's prefill scratch
stops while the host reclaims (MemAvailable ~1 GiB, PSI some rising)."""
SCAN_STEP_S = 60.0
"""A silent scan reads in steps this long (a NAS that hangs shows within one)."""
STORE_TIMEOUT_S = 600.0
"""How long the ranks wait for each other at distributed init (torch's TCPStore)."""


@dataclass
class Request:
    prompt_tokens: int
    max_tokens: int
    done: bool = False
    error: str = ""
    completion_tokens: int = 0
    started_t: float = 0.0
    first_token_t: float = 0.0
    streaming: bool = False


@dataclass
class Stats:
    prompt_tokens: int = 0
    generation_tokens: int = 0
    """Tokens as the engine's steps make them (vLLM's token counters, SGLang's
    ``realtime_tokens_total``)."""
    success: int = 0
    running: int = 0
    waiting: int = 0
    gen_throughput: float = 0.0
    """SGLang's ``gen_throughput`` gauge: the decode rate of its last decode
    report, 0 once it idles (0.5.23 ``scheduler_components/metrics_reporter.py:944``,
    ``:1515``); a hung scheduler leaves it as it was."""
    ttft: list[float] = field(default_factory=list)
    e2e: list[float] = field(default_factory=list)
    streamed: list[bool] = field(default_factory=list)
    """Whether each finished request (of ``ttft``, ``e2e``) was streamed."""
    finished: list[tuple[int, int]] = field(default_factory=list)
    """Each finished request's prompt and completion tokens (of ``ttft``,
    ``e2e``): what SGLang's ``prompt_tokens_total`` and
    ``generation_tokens_total`` count, at finish only (0.5.23
    ``observability/metrics_collector.py:2109``)."""


STATS_INTERVAL_S = 10.0
"""vLLM logs its stats every 10 s while busy, at DEBUG once idle (v1/metrics/loggers.py:280)."""
API_EXIT_S = 5.0
"""A dead engine core's API server answers /health 503 this long, then exits
(vLLM 0.33: the engine-dead watchdog; VLLM_KEEP_ALIVE_ON_ENGINE_DEATH unset)."""


class LogStyle(Protocol):
    """How one engine kind words its boot; each method logs to the container."""

    failure_exit: int
    """The container's exit code after a fatal error (SGLang SIGKILLs its tree: 137)."""
    d: Dialect
    """The release this engine speaks, fixed when its container starts."""

    def start(self, e: Engine) -> None: ...
    def model_missing(self, e: Engine) -> None: ...
    def admission_failed(self, e: Engine, free: float, requested: float) -> None: ...
    def nccl_failed(self, e: Engine, reason: str, warn: str) -> None: ...
    def store_timeout(self, e: Engine, joined: int, waited: float) -> None: ...
    def load_begin(self, e: Engine) -> None: ...
    def load_progress(self, e: Engine, done: int, total: int, elapsed: float) -> None: ...
    def load_end(self, e: Engine, gib: float, seconds: float) -> None: ...
    def kv_short(self, e: Engine, need_gib: float, have_gib: float, fits: int) -> None: ...
    def kv_ready(self, e: Engine, kv_gib: float, tokens: int) -> None: ...
    def graphs(self, e: Engine, seconds: float, gib: float) -> None: ...
    def serving(self, e: Engine) -> None: ...
    def stats(self, e: Engine, prompt_tps: float, gen_tps: float) -> None: ...
    timed_stats: bool
    """Stats logged every ``STATS_INTERVAL_S`` while busy (vLLM), or by batch (SGLang)."""

    def prefill_batch(self, e: Engine, tokens: int, pending: int) -> None: ...
    def decode_chunk(self, e: Engine) -> int: ...
    def decode_batch(self, e: Engine, tokens: int, chunk: int) -> None: ...
    def stall_notice(self, e: Engine) -> None: ...
    def rpc_timeout(self, e: Engine) -> None: ...
    def peer_died(self, e: Engine) -> None: ...
    def core_exited(self, e: Engine) -> None: ...
    def shutdown(self, e: Engine) -> None: ...


class Engine:
    def __init__(self, sim: Sim, node: Node, container: Container, args: EngineArgs,
                 style: LogStyle, pid: int) -> None:
        self.sim, self.node, self.container = sim, node, container
        self.args, self.style = args, style
        self.pid = pid
        self.phase = "init"
        """init | loading | loaded | kv | graphs | ready | dead | stopped"""
        self.model: ModelInfo | None = sim.model_for(container.labels.get("sparktui.lane", ""),
                                                     args.model)
        self.kv_tokens = 0
        self.kv_in_use = 0
        """Tokens of the request in flight (KV cache usage)."""
        self.stats = Stats()
        self.requests: list[Request] = []
        self.proc: Proc | None = None
        self.http_wanted = False
        self.health_status = 503
        env = dict(e.split("=", 1) for e in container.env if "=" in e)
        self.env = env
        self.rpc_timeout_s = float(env.get("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "300"))
        self.joined = False
        self.core_dead = False
        self.prefilling = False
        """A prompt is being prefilled: no output comes out of the engine until
        its first token (SGLang's ``/health`` waits for one, engine_http)."""
        self.read_done = 0.0
        """Bytes read by the engine's reads that ended (see :meth:`bytes_read`)."""
        self._reading: tuple[float, float] | None = None
        """(wall time, bytes/s) of the read under way."""
        """The engine core died silently; the API server still answers (vllm#39863)."""
        """All ranks were present once (a rank missing after that has died)."""

    # --- identity -----------------------------------------------------------
    @property
    def rank(self) -> int:
        return int(self.container.labels.get("sparktui.rank", self.args.node_rank))

    @property
    def nranks(self) -> int:
        return int(self.container.labels.get("sparktui.nranks", self.args.nnodes))

    @property
    def serves_http(self) -> bool:
        return self.rank == 0 and not self.args.headless

    def t(self) -> float:
        return self.sim.wall()

    def log(self, text: str, stream: str = "stdout") -> None:
        self.container.log(self.t(), text, stream)

    def write(self, text: str, stream: str = "stdout") -> None:
        """Raw output, newlines only where ``text`` has them (a tqdm redraw)."""
        self.container.write(self.t(), text, stream)

    def bytes_read(self) -> int:
        """Bytes the engine has read so far (its process's ``/proc/<pid>/io``)."""
        done = self.read_done
        if self._reading is not None:
            since, rate = self._reading
            done += max(0.0, self.t() - since) * rate
        return int(done)

    def _read(self, rate: float, seconds: float) -> Process:
        """Read at ``rate`` bytes/s for ``seconds`` (the counters move meanwhile)."""
        self._reading = (self.t(), rate)
        yield seconds
        self._reading = None
        self.read_done += rate * seconds

    # --- lifecycle ------------------------------------------------------------
    def start(self) -> None:
        self.proc = self.sim.sched.spawn(f"{self.node.name}/{self.container.name}", self._boot())
        self.proc.gate = lambda: not self.node.thrashing

    def hold(self, gib: float) -> None:
        self.node.memory.set(self.container.id, gib * GIB)

    def peers(self) -> list[Engine]:
        return self.sim.lane_engines(self)

    def _die(self, code: int, http_delay: float = 5.0) -> None:
        self.phase = "dead"
        self.health_status = 503
        self.container.finish(self.t(), code)
        self.node.memory.set(self.container.id, 0)
        self.node.memory.set(self.container.id + ":scratch", 0)
        for r in self.requests:
            if not r.done:
                r.done, r.error = True, "EngineDeadError"
        if self.http_wanted:
            self.sim.schedule_http_stop(self, delay=http_delay)

    def stop(self, *, kill: bool) -> None:
        """docker stop / rm -f: the process ends now."""
        if self.container.status != "running":
            return
        self.sim.sched.cancel(self.proc)
        if not kill:
            self.style.shutdown(self)
        graceful = not kill and self.phase == "ready"
        self.phase = "stopped"
        self.container.finish(self.t(), 0 if graceful else 137)
        self.node.memory.set(self.container.id, 0)
        self.node.memory.set(self.container.id + ":scratch", 0)
        for r in self.requests:
            if not r.done:
                r.done, r.error = True, "aborted"
        if self.http_wanted:
            self.sim.schedule_http_stop(self, delay=0.0)

    def oom_killed(self) -> None:
        """The kernel's global OOM killer took this rank: exit 137, not OOMKilled
        (that flag is for cgroup OOMs)."""
        self.sim.sched.cancel(self.proc)
        self._die(137)

    # --- the boot ---------------------------------------------------------------
    def _boot(self) -> Process:
        a, style = self.args, self.style
        style.start(self)
        yield 3.0
        if not self._model_reachable():
            style.model_missing(self)
            yield 1.0
            self._die(style.failure_exit)
            return
        free = self.node.memory.admission_free_gib()
        requested = a.gmu * self.sim.usable_gib
        if free < requested:
            style.admission_failed(self, free, requested)
            yield 1.0
            self._die(style.failure_exit)
            return
        runtime = self._runtime_gib()
        self.hold(CUDA_CONTEXT_GIB)
        yield 4.0
        if self.nranks > 1:
            yield from self._join_fabric()
            if self.phase == "dead":
                return
        yield from self._load_weights(runtime)
        if self.nranks > 1:
            yield lambda: all(p.phase != "loading" for p in self.peers()) or self._peer_dead()
            if self._peer_dead():
                yield from self._peer_failure()
                return
        yield from self._kv_and_graphs(runtime)
        if self.phase == "dead":
            return
        self.phase = "ready"
        if self.serves_http:
            self.http_wanted = True
            self.health_status = 200
            self.sim.schedule_http_start(self)
            if self.args.kind == "sglang":
                self._sglang_warmup()
            style.serving(self)
            name = f"{self.node.name}/{self.container.name}"
            if self.sim.spec.engine_core_dies_after_s is not None:
                self.sim.sched.spawn(f"{name}/core",
                                     self._core_death(self.sim.spec.engine_core_dies_after_s))
            if self.sim.spec.engine_core_exits_after_s is not None:
                self.sim.sched.spawn(f"{name}/core",
                                     self._core_exit(self.sim.spec.engine_core_exits_after_s))
            if style.timed_stats and not self.args.log_stats_off:
                self.sim.sched.spawn(f"{name}/stats", self._stats_ticker())
        yield from self._serve()

    def _sglang_warmup(self) -> None:
        """SGLang serves a warmup request before it says it is fired up: ``The
        capital city of France is``, 8 new tokens (0.5.23
        ``srt/entrypoints/http_server.py:2572``, ``:2407``, ``:2455``), so its
        step and finish counters have their series from the start."""
        st, prompt, new = self.stats, 7, 8
        ttft = 0.05 + prompt / self.prefill_tps()
        st.prompt_tokens += prompt
        st.generation_tokens += new
        st.ttft.append(ttft)
        st.e2e.append(ttft + new / self.decode_tps())
        st.streamed.append(False)
        st.finished.append((prompt, new))

    def _model_reachable(self) -> bool:
        """The model's snapshot through the container's HF cache mount, as the engine
        (HF_HUB_OFFLINE) would resolve it; False gives LocalEntryNotFoundError."""
        if self.model is None:
            return False
        cache = self.env.get("HF_HUB_CACHE") or posixpath.join(
            self.env.get("HF_HOME", "/root/.cache/huggingface"), "hub")
        for bind in self.container.binds:
            src, dst = bind.split(":")[:2]
            if cache == dst or cache.startswith(dst.rstrip("/") + "/"):
                host = posixpath.join(src, posixpath.relpath(cache, dst))
                return self.node.fs.exists(posixpath.join(host, repo_dir(self.model.repo),
                                                          "snapshots", self.model.snapshot))
        return False

    def _runtime_gib(self) -> float:
        if self.model and self.model.runtime_reserve_gib is not None:
            return self.model.runtime_reserve_gib
        return self.sim.spec.runtime_reserve_gib

    def weights_gib(self) -> float:
        m = self.model
        if m is not None and m.weights_per_rank_gib is not None:
            return m.weights_per_rank_gib * (m.qualified_ranks or self.nranks) / self.nranks
        size = self.model.size_gb if self.model else 0.0
        return size * 1e9 / max(1, self.args.tp, self.nranks) / GIB

    def _join_fabric(self) -> Process:
        waited = 0.0
        while len(self.peers()) < self.nranks and not self._peer_dead():
            if waited >= STORE_TIMEOUT_S:
                self.style.store_timeout(self, len(self.peers()), waited)
                yield 1.0
                self._die(1)
                return
            yield 5.0
            waited += 5.0
        if self._peer_dead():
            yield from self._peer_failure()
            return
        self.joined = True
        reason = self.sim.fabric_fault(self)
        yield 6.0
        if reason:
            warn, msg = reason
            self.style.nccl_failed(self, msg, warn)
            yield 1.0
            self._die(1)

    def _peer_dead(self) -> bool:
        """A rank of the lane has died, or vanished with its node's power."""
        peers = self.peers()
        if self.joined and len(peers) < self.nranks:
            return True
        return any(p.phase in ("dead", "stopped") for p in peers if p is not self)

    def _peer_failure(self) -> Process:
        yield 8.0
        self.style.peer_died(self)
        self._die(1)

    def _load_weights(self, runtime: float) -> Process:
        """Every rank streams the recipe's per-rank NFS volume (by default the
        whole checkpoint: with TP each shard holds a slice of every tensor; the
        seeds measured 376 GB/rank and 704 GB/rank) and keeps its own slice resident."""
        self.phase = "loading"
        shards = self.model.shards if self.model else 1
        total = self.weights_gib()
        m = self.model
        read_gb = (m.nfs_read_per_rank_gb if m.nfs_read_per_rank_gb is not None
                   else m.size_gb) if m else total * GIB / 1e9
        per_shard_bytes = read_gb * 1e9 / shards
        self.style.load_begin(self)
        self.style.load_progress(self, 0, shards, 0.0)
        elapsed = 0.0
        scan = self.sim.spec.silent_scan_gb * 1e9
        while scan > 0:  # a sparse shard: read without a line, memory flat
            rate = self.sim.nfs_rate_bytes_per_s(self)
            step = SCAN_STEP_S if rate <= 0 else min(SCAN_STEP_S, scan / rate)
            yield from self._read(rate, step)
            scan -= rate * step
            elapsed += step
        for i in range(1, shards + 1):
            rate = self.sim.nfs_rate_bytes_per_s(self) or 1.0
            dt = per_shard_bytes / rate
            yield from self._read(rate, dt)
            elapsed += dt
            self.hold(CUDA_CONTEXT_GIB + total * i / shards)
            self.style.load_progress(self, i, shards, elapsed)
        self.style.load_end(self, total, elapsed)
        self.phase = "loaded"

    def _kv_and_graphs(self, runtime: float) -> Process:
        a, m = self.args, self.model
        assert m is not None
        weights = self.weights_gib()
        extras = m.pinned_extras_gib + m.drafter_weights_gib
        per_token = m.kv_bytes_per_token + m.drafter_kv_bytes_per_token
        if a.kv_cache_memory_bytes is not None:
            kv_gib = a.kv_cache_memory_bytes / GIB
        else:
            kv_gib = a.gmu * self.sim.usable_gib - weights - runtime - extras
        self.phase = "kv"
        yield 12.0
        self.hold(weights + extras + runtime * 0.8)
        yield 8.0
        max_len = a.max_model_len or 32768
        need_gib = max_len * per_token / GIB
        if kv_gib <= 0 or need_gib > kv_gib:
            fits = int(max(0.0, kv_gib) * GIB / per_token) // a.block_size * a.block_size
            self.style.kv_short(self, need_gib, max(0.0, kv_gib), fits)
            yield 1.0
            self._die(self.style.failure_exit)
            return
        self.kv_tokens = int(kv_gib * GIB / per_token)
        self.hold(weights + extras + runtime * 0.8 + kv_gib)
        self.sim.nvrm_noise(self.node)
        self.style.kv_ready(self, kv_gib, self.kv_tokens)
        self.phase = "graphs"
        graph_s = 40.0 + 14.0 * bool(a.speculative)
        yield graph_s
        self.hold(weights + extras + runtime + kv_gib)
        self.style.graphs(self, graph_s, runtime * 0.2)
        yield 2.0

    # --- serving ------------------------------------------------------------------
    def prefill_tps(self) -> float:
        """Prompt tokens per second: ~1,900 at 47 GiB of weights per rank, ~900 at 99."""
        return PREFILL_GIB_TOKENS_PER_S / max(1.0, self.weights_gib())

    def decode_tps(self) -> float:
        """Decode is bandwidth-bound on GB10: tokens/s x weights per rank is nearly
        constant (Flash 47 GiB -> 52 t/s, full 99 GiB -> 19 t/s); speculation ~1.75x."""
        slowest = min((p.node.spec.decode_factor for p in self.peers() or [self]), default=1.0)
        return DECODE_GIB_TOKENS_PER_S / max(1.0, self.weights_gib()) * self.tokens_per_step() \
            * slowest

    def tokens_per_step(self) -> float:
        """Tokens a decode step yields: ~1.75 with speculation, else one."""
        return 1.75 if self.args.speculative or "speculative-algorithm" in self.args.extra \
            else 1.0

    @property
    def garbles(self) -> bool:
        """This image corrupts this model's output (the r37 lab tree on DS4.1)."""
        repo = self.model.repo if self.model else self.args.model
        return (self.container.image_arg, repo) in self.sim.spec.garbling

    def submit(self, prompt_tokens: int, max_tokens: int, *, streaming: bool = False) -> Request:
        req = Request(prompt_tokens, max_tokens, started_t=self.sim.sched.t, streaming=streaming)
        if self.core_dead and self.phase == "ready":
            # accepted by the API server, never answered, never counted: the
            # gauges and token counters are recorded from the core's step
            # outputs only (vLLM 0.33 v1/engine/async_llm.py:930, 0.11 :474;
            # SGLang's from its scheduler, metrics_reporter.py:1476), so they
            # keep the values of the core's last step
            self.requests.append(req)
        elif self.phase != "ready":
            req.done, req.error = True, "EngineDeadError" if self.phase == "dead" else "not ready"
        else:
            self.requests.append(req)
            self.stats.waiting += 1
        return req

    def _core_exit(self, after_s: float) -> Process:
        """The engine core is SIGKILLed: one line from the client, /health 503,
        requests fail, the API server exits ``API_EXIT_S`` later (port closed)."""
        yield after_s
        if self.phase != "ready":
            return
        self.sim.sched.cancel(self.proc)
        self.style.core_exited(self)
        self.phase = "dead"
        self.health_status = 503
        for r in self.requests:
            if not r.done:
                r.done, r.error = True, "EngineDeadError"
        yield API_EXIT_S
        self._die(self.style.failure_exit, http_delay=0.0)

    def _stats_ticker(self) -> Process:
        """The stats line every ``STATS_INTERVAL_S`` while busy (and once more
        for an interval that produced tokens); nothing at INFO when idle."""
        st = self.stats
        last = (st.prompt_tokens, st.generation_tokens)
        while self.phase == "ready" and not self.core_dead:
            yield STATS_INTERVAL_S
            if self.phase != "ready":
                return
            now = (st.prompt_tokens, st.generation_tokens)
            if st.running or st.waiting or now != last:
                self.style.stats(self, (now[0] - last[0]) / STATS_INTERVAL_S,
                                 (now[1] - last[1]) / STATS_INTERVAL_S)
            last = now

    def _core_death(self, after_s: float) -> Process:
        """The engine core hangs without a word: no step any more, so /metrics
        keep the last step's values. vLLM's /health keeps answering 200 (it
        asks the client whether the core *died*, 0.33
        ``entrypoints/serve/instrumentator/health.py:22``,
        ``v1/engine/async_llm.py:1129``); SGLang's generates a token and
        gives up after 20 s (engine_http)."""
        yield after_s
        if self.phase == "ready":
            self.sim.sched.cancel(self.proc)
            self.core_dead = True

    def _serve(self) -> Process:
        while True:
            yield lambda: any(not r.done for r in self.requests) or self._peer_dead()
            if self._peer_dead():
                yield from self._peer_failure()
                return
            req = next(r for r in self.requests if not r.done)
            self.stats.waiting -= 1
            self.stats.running += 1
            ok = yield from self._prefill(req)
            if not ok:
                return
            self.stats.running -= 1

    def _prefill(self, req: Request) -> Generator[Wait, None, bool]:
        self.prefilling = True
        try:
            return (yield from self._prefill_and_decode(req))
        finally:
            self.prefilling = False

    def _prefill_and_decode(self, req: Request) -> Generator[Wait, None, bool]:
        m = self.model
        assert m is not None
        scratch = m.scratch_base_gib + req.prompt_tokens * m.scratch_gib_per_token
        lane = self.peers() or [self]
        stall_s = self.sim.spec.reclaim_stall_s
        if stall_s > 0 and any(p.node.memory.headroom_gib() < scratch for p in lane):
            # the hosts reclaim before they give up: scratch stops a GiB short of each
            # node's limit, no token is processed, sshd still answers; then they wedge
            for p in lane:
                room = p.node.memory.headroom_gib() - RECLAIM_HOLD_GIB
                p.node.memory.set(p.container.id + ":scratch",
                                  max(0.0, min(scratch, room)) * GIB)
            yield stall_s
        for p in lane:
            p.node.memory.set(p.container.id + ":scratch", scratch * GIB)
        prefill_s = req.prompt_tokens / self.prefill_tps() + 0.05
        deadline = self.sim.sched.t + prefill_s + self.rpc_timeout_s
        stalled: Callable[[], bool] = lambda: any(p.node.thrashing for p in lane)  # noqa: E731
        # The executor's RPC timer runs in rank 0's API-side process, which a thrashing
        # host still schedules (slowly): it fires; workers stuck in reclaim do not move.
        gate = self.proc.gate if self.proc is not None else None
        if self.proc is not None:
            self.proc.gate = None
        self.kv_in_use = req.prompt_tokens
        left = req.prompt_tokens
        while left > 0:  # chunked prefill: the prompt counter moves with each step
            n = min(left, max(1, self.args.max_num_batched_tokens))
            yield n / self.prefill_tps()
            left -= n
            if not stalled():  # a chunk whose forward is done: counted and reported
                self.stats.prompt_tokens += n
                self.style.prefill_batch(self, n, left)
        yield 0.05
        if stalled():
            # what rank 0 still logs while its workers hang: zero-throughput stats
            # every 10 s and shm_broadcast's 60 s notice
            waited = 0.0
            while self.sim.sched.t < deadline:
                step = min(10.0, deadline - self.sim.sched.t)
                yield step
                waited += step
                if int(waited) % 60 == 0:
                    self.style.stall_notice(self)
            self.style.rpc_timeout(self)
            self._die(1)
            return False
        for p in lane:
            p.node.memory.set(p.container.id + ":scratch", 0)
        if self.proc is not None:
            self.proc.gate = gate
        req.first_token_t = self.sim.sched.t
        self.prefilling = False
        st = self.stats
        left = req.max_tokens
        while left > 0:  # the step counters move as tokens come, a chunk at a time
            chunk = self.style.decode_chunk(self)
            n = min(left, chunk)
            yield n / self.decode_tps()
            left -= n
            st.generation_tokens += n
            st.gen_throughput = self.decode_tps()
            self.style.decode_batch(self, n, chunk)
        req.completion_tokens = req.max_tokens
        req.done = True
        self.kv_in_use = 0
        st.success += 1
        st.ttft.append(req.first_token_t - req.started_t)
        st.e2e.append(self.sim.sched.t - req.started_t)
        st.streamed.append(req.streaming)
        st.finished.append((req.prompt_tokens, req.completion_tokens))
        if all(r.done for r in self.requests):
            st.gen_throughput = 0.0  # the idle report (metrics_reporter.py:1515)
        return True
