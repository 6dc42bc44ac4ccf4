"""Regenerate the engines' dialects (src/sparktui/sim/dialects/*.json) from
their PyPI wheels, so the next engine release is a diff, not a guess.

    pip download --no-deps -d /tmp/wheels vllm==0.33.0
    python scripts/engine_dialects.py vllm-0.33 /tmp/wheels/vllm-0.33.0-*.whl
    git diff src/sparktui/sim/dialects/

Each line we rely on is named by an anchor (a literal that must be in the
file); the script finds the first source line holding it, reads the logger
call, ``raise`` or assignment around it with ``ast`` and writes the string it
builds (``%s`` formats kept, f-string fields as ``{expression}``) with its
``file:line``. An anchor that is gone is an error naming it: the engine has
changed what we parse, and that is exactly what a release diff must show.
The wheel is read, never imported (it needs a GPU stack).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent / "src" / "sparktui" / "sim" / "dialects"

# (key, file in the wheel, anchor). The key names what the console reads.
VLLM_COMMON: tuple[tuple[str, str, str], ...] = (
    ("load_start_v1", "vllm/v1/worker/gpu_model_runner.py", "Starting to load model"),
    ("shard_bar", "vllm/model_executor/model_loader/weight_utils.py", "_BAR_FORMAT ="),
    ("weights_took", "vllm/model_executor/model_loader/default_loader.py",
     "Loading weights took"),
    ("model_loading_v1", "vllm/v1/worker/gpu_model_runner.py", "Model loading took"),
    ("graph_bar_v1", "vllm/v1/worker/gpu_model_runner.py", 'desc="Capturing CUDA graphs'),
    ("graph_done_v1", "vllm/v1/worker/gpu_model_runner.py", "Graph capturing finished"),
    ("kv_available", "vllm/v1/worker/gpu_worker.py", "Available KV cache memory"),
    ("core_fatal", "vllm/v1/engine/core.py", "EngineCore encountered a fatal error."),
    ("core_failed", "vllm/v1/engine/core.py", "EngineCore failed to start."),
    ("worker_hit", "vllm/v1/executor/multiproc_executor.py", "WorkerProc hit an exception."),
    ("workerproc_failed_start", "vllm/v1/executor/multiproc_executor.py",
     "WorkerProc failed to start."),
    ("workerproc_failed", "vllm/v1/executor/multiproc_executor.py", '"WorkerProc failed."'),
    ("worker_died", "vllm/v1/executor/multiproc_executor.py", '"Worker proc %s died'),
    ("rpc_timeout", "vllm/v1/executor/multiproc_executor.py", "RPC call to {method} timed out"),
    ("worker_failed_error", "vllm/v1/executor/multiproc_executor.py",
     "Worker failed with error"),
    ("output_handler", "vllm/v1/engine/async_llm.py", "AsyncLLM output_handler failed."),
    ("engine_dead", "vllm/v1/engine/exceptions.py", "EngineCore encountered an issue."),
    ("shm_wait", "vllm/distributed/device_communicators/shm_broadcast.py",
     "No available shared memory broadcast block found"),
    ("nccl_error", "vllm/distributed/device_communicators/pynccl_wrapper.py",
     'RuntimeError(f"NCCL error'),
    ("stats", "vllm/v1/metrics/loggers.py", '"Avg prompt throughput: %.1f tokens/s'),
)
VLLM_033: tuple[tuple[str, str, str], ...] = (
    ("prefix", "vllm/logger.py", "_FORMAT = ("),
    ("admission", "vllm/v1/worker/utils.py", "is less than desired GPU memory utilization"),
    ("oom_load", "vllm/v1/worker/gpu_model_runner.py", "Failed to load model - not enough"),
    ("health_503", "vllm/entrypoints/serve/instrumentator/health.py", "status_code=503"),
    ("version", "vllm/entrypoints/common/startup.py", "vLLM server version %s"),
    ("logo", "vllm/entrypoints/common/startup.py", "logo_template = Template("),
    ("version_call", "vllm/entrypoints/common/startup.py", "lgr.info(message, version"),
    ("nondefault", "vllm/entrypoints/common/startup.py", '"non-default args: %s"'),
    ("v2_default", "vllm/config/vllm.py", "def use_v2_model_runner"),
    ("load_start_v2", "vllm/v1/worker/gpu/model_runner.py", "Loading model from scratch"),
    ("model_loading_v2", "vllm/v1/worker/gpu/model_runner.py", "Model loading took"),
    ("graph_bar_v2", "vllm/v1/worker/gpu/cudagraph_utils.py",
     'desc=f"{progress_bar_desc} ({mode.name})"'),
    ("graph_done_v2", "vllm/v1/worker/gpu/model_runner.py", "Graph capturing finished"),
    ("kv_profile_cudagraphs", "vllm/v1/worker/gpu_worker.py",
     "cudagraph_memory_estimate = self.model_runner.profile_cudagraph_memory()"),
    ("kv_pin", "vllm/v1/worker/gpu_worker.py", 'f"Initial free memory {format_gib(self.init'),
    ("kv_size", "vllm/v1/core/kv_cache_utils.py", '"%s KV cache size: %s tokens, "'),
    ("kv_short", "vllm/v1/core/kv_cache_planning.py", "To serve at least one request"),
    ("no_cache_blocks", "vllm/v1/core/kv_cache_planning.py", "No available memory for the cache"),
    ("init_engine", "vllm/v1/engine/core.py", '"init engine (profile, create kv cache, warmup '
     'model) took %.2f s"'),
    ("api_start", "vllm/entrypoints/launchers/api_server/entry.py", "Starting vLLM server on"),
    ("mpclient_exit", "vllm/v1/engine/core_client.py", "engine core exited unexpectedly"),
    ("frontend_failed", "vllm/v1/engine/utils.py", "Frontend process failed during"),
    ("core_init_failed", "vllm/v1/engine/utils.py", '"Engine core initialization failed. "'),
    ("page_size_assert", "vllm/v1/kv_cache_interface.py",
     "assert self.page_size_padded >= self.unpadded_page_size_bytes"),
    ("stats_prefix", "vllm/v1/metrics/loggers.py", 'return "Engine {:03d}: "'),
    ("stats_call", "vllm/v1/metrics/loggers.py", 'self.log_prefix + ", ".join(log_parts),'),
    ("stats_kv", "vllm/v1/metrics/loggers.py", 'log_parts.append("%s KV cache usage: %.1f%%")'),
    ("stats_hit", "vllm/v1/metrics/loggers.py", 'log_parts.append("Prefix cache hit rate'),
    ("profiling_cudagraph_v1", "vllm/v1/worker/gpu_model_runner.py",
     '"Profiling CUDA graph memory: %s"'),
    ("profiling_cudagraph_v2", "vllm/v1/worker/gpu/cudagraph_utils.py",
     "def profile_cudagraph_memory(runner"),
    ("stats_idle_debug", "vllm/v1/metrics/loggers.py", "log_fn = logger.debug if"),
    ("multiline", "vllm/logging_utils/formatter.py", 'msg.replace("\\n", "\\r\\n"'),
    ("delta_reasoning", "vllm/entrypoints/generate/base/protocol.py", "    reasoning: str | None"),
    ("instanttensor_bar", "vllm/model_executor/model_loader/weight_utils.py",
     'desc="Loading safetensors using InstantTensor loader"'),
    ("error_json", "vllm/entrypoints/serve/engine/protocol.py", "class ErrorResponse"),
)
VLLM_011: tuple[tuple[str, str, str], ...] = (
    ("prefix", "vllm/logger.py", "_FORMAT = ("),
    ("admission", "vllm/v1/worker/gpu_worker.py", "is less than desired GPU memory utilization"),
    ("health_503", "vllm/entrypoints/openai/api_server.py", "return Response(status_code=503)"),
    ("process_prefix", "vllm/utils/__init__.py", 'prefix = f"{CYAN}({worker_name}'),
    ("version", "vllm/entrypoints/openai/api_server.py", '"vLLM API server version %s"'),
    ("kv_pin", "vllm/v1/worker/gpu_worker.py", 'f"Initial free memory {GiB(self.init'),
    ("kv_size", "vllm/v1/core/kv_cache_utils.py", "GPU KV cache size: %s tokens"),
    ("kv_concurrency", "vllm/v1/core/kv_cache_utils.py", '"Maximum concurrency for %s'),
    ("kv_short", "vllm/v1/core/kv_cache_utils.py", "To serve at least one request"),
    ("no_cache_blocks", "vllm/v1/core/kv_cache_utils.py", "No available memory for the cache"),
    ("init_engine", "vllm/v1/engine/core.py", "init engine (profile, create kv cache, "),
    ("api_start", "vllm/entrypoints/openai/api_server.py", "Starting vLLM API server %d on"),
    ("core_proc_died", "vllm/v1/engine/core_client.py", '"Engine core proc %s died'),
    ("core_init_failed", "vllm/v1/engine/utils.py", '"Engine core initialization failed. "'),
    ("page_size_assert", "vllm/v1/kv_cache_interface.py", "assert self.page_size_padded >="),
    ("stats_prefix", "vllm/v1/metrics/loggers.py", '"Engine %03d: "'),
    ("delta_reasoning", "vllm/entrypoints/openai/protocol.py",
     "class DeltaMessage(OpenAIBaseModel): >>     reasoning_content: Optional"),
    ("error_json", "vllm/entrypoints/openai/protocol.py", "class ErrorResponse"),
)
SGLANG_05: tuple[tuple[str, str, str], ...] = (
    ("prefix", "sglang/srt/utils/common.py", 'format = f"[%(asctime)s{maybe_ms}{prefix}]'),
    ("shard_bar", "sglang/srt/utils/common.py", "BAR_FORMAT = "),
    ("load_begin", "sglang/srt/model_executor/model_runner.py", 'f"Load weight begin.'),
    ("load_end", "sglang/srt/model_executor/model_runner.py", 'f"Load weight end. "'),
    ("quant_str", "sglang/srt/configs/model_config.py", 'log_str = f"quant={quant_method}"'),
    ("kv_allocated", "sglang/srt/mem_cache/memory_pool.py", "#tokens: {num_tokens}, K size"),
    ("memory_pool_end", "sglang/srt/mem_cache/kv_cache_configurator.py", 'f"Memory pool end. "'),
    ("max_total", "sglang/srt/managers/scheduler.py", 'f"max_total_num_tokens={self.max'),
    ("fired_up", "sglang/srt/entrypoints/http_server.py", "The server is fired up"),
    # uvicorn's own lines (its "Uvicorn running on" among them: uvicorn.Server.run()
    # binds the socket itself, http_server.py:3010) in SGLang's format
    ("uvicorn_format", "sglang/srt/utils/common.py",
     'LOGGING_CONFIG["formatters"]["default"]["fmt"] = ('),
    ("prefill_batch", "sglang/srt/managers/scheduler_components/metrics_reporter.py",
     'f"Prefill batch{iter_msg}, "'),
    # every form of the prefill line: its head (iter_msg only with
    # SGLANG_LOG_FORWARD_ITERS, off by default), the pool's usage parts (joined
    # by ", " and ended by one, metrics_reporter.py:743; no "#token:" on a
    # prefill line: that is the decode line's), what a configuration inserts
    # before the graph flag, its tail
    ("prefill_iter", "sglang/srt/managers/scheduler_components/metrics_reporter.py",
     'iter_msg = f" [{batch_iter}]" if LOG_FORWARD_ITERS'),
    ("log_forward_iters", "sglang/srt/environ.py", "SGLANG_LOG_FORWARD_ITERS = EnvBool("),
    ("prefill_usage", "sglang/srt/managers/scheduler_components/pool_stats_observer.py",
     'parts.append(f"token usage: {self.full_token_usage:.2f}")'),
    ("prefill_usage_swa", "sglang/srt/managers/scheduler_components/pool_stats_observer.py",
     "def get_prefill_usage_msg_parts >> parts += ["),
    ("prefill_usage_full", "sglang/srt/managers/scheduler_components/pool_stats_observer.py",
     'def get_prefill_usage_msg_parts >> parts.append(f"full token usage: '),
    ("prefill_usage_mamba", "sglang/srt/managers/scheduler_components/pool_stats_observer.py",
     'parts.append(f"mamba usage: '),
    ("prefill_replay", "sglang/srt/managers/scheduler_components/metrics_reporter.py",
     'msg += f"#replay-token: '),
    ("prefill_bootstrap", "sglang/srt/managers/scheduler_components/metrics_reporter.py",
     'msg += f"#bootstrap-req: '),
    ("prefill_inflight", "sglang/srt/managers/scheduler_components/metrics_reporter.py",
     'f"#inflight-req: '),
    ("prefill_optimistic", "sglang/srt/managers/scheduler_components/metrics_reporter.py",
     'msg += f"#optimistic-req: '),
    ("prefill_image", "sglang/srt/managers/scheduler_components/metrics_reporter.py",
     'f"waiting-image-req: '),
    ("prefill_graph", "sglang/srt/managers/scheduler_components/metrics_reporter.py",
     'msg += f"{self._graph_backend_label}: {can_run_cuda_graph}, "'),
    ("prefill_throughput", "sglang/srt/managers/scheduler_components/metrics_reporter.py",
     'msg += f"input throughput (token/s): '),
    ("prefill_mfu", "sglang/srt/managers/scheduler_components/metrics_reporter.py",
     'msg += f", est. prefill TFLOPS/s (per GPU): '),
    ("decode_usage", "sglang/srt/managers/scheduler_components/pool_stats_observer.py",
     'f"#token: {self.full_num_used}, token usage: '),
    ("decode_batch", "sglang/srt/managers/scheduler_components/metrics_reporter.py",
     'msg = f"Decode batch{iter_msg}'),
    ("scheduler_exception", "sglang/srt/managers/scheduler.py", "Scheduler hit an exception"),
    ("sigquit", "sglang/srt/entrypoints/engine.py", "Received sigquit from a child process"),
    ("scheduler_died", "sglang/srt/entrypoints/engine.py", "scheduler died during initialization"),
    ("subprocess_crashed", "sglang/srt/utils/watchdog.py", 'f"Subprocess {name} (pid='),
    ("not_enough_memory", "sglang/srt/model_executor/pool_configurator.py",
     "Not enough memory. Please try to increase --mem-fraction-static"),
    ("enable_metrics", "sglang/srt/arg_groups/fields/observability.py",
     "    enable_metrics: A[bool,"),
    ("tp_size", "sglang/srt/arg_groups/fields/parallel.py", "    tp_size: A["),
    ("delta_reasoning", "sglang/srt/entrypoints/openai/protocol.py",
     "class DeltaMessage(BaseModel): >>     reasoning_content: Optional[str] = None"),
    ("error_json", "sglang/srt/entrypoints/openai/protocol.py", "class ErrorResponse"),
    # /metrics: the token counters the rules read (core/canary.step_tokens)
    ("metric_step_tokens", "sglang/srt/observability/metrics_collector.py",
     'name="sglang:realtime_tokens_total"'),
    ("metric_step_tokens_decode", "sglang/srt/managers/scheduler_components/metrics_reporter.py",
     "decode_tokens=decode_tokens,"),
    ("metric_tokens_at_finish", "sglang/srt/observability/metrics_collector.py",
     "self.generation_tokens_total.labels(**stream_labels).inc("),
    ("metric_finish_observed", "sglang/srt/managers/tokenizer_manager.py",
     "self.metrics_collector.observe_one_finished_request("),
    ("metric_gen_throughput", "sglang/srt/observability/metrics_collector.py",
     'name="sglang:gen_throughput"'),
)
DIALECTS = {
    "vllm-0.33": ("vllm", "0.33.0", VLLM_COMMON + VLLM_033),
    "vllm-0.11": ("vllm", "0.11.0", VLLM_COMMON + VLLM_011),
    "sglang-0.5": ("sglang", "0.5.23", SGLANG_05),
}


class AnchorMissing(Exception):
    pass


def _text(node: ast.AST) -> str | None:
    """The string an expression builds: literals joined, f-string fields as
    ``{expression[:spec]}``; None when it builds no string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
            elif isinstance(part, ast.FormattedValue):
                spec = ""
                if part.format_spec is not None:
                    spec = ":" + (_text(part.format_spec) or "")
                out.append("{" + ast.unparse(part.value) + spec + "}")
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _text(node.left), _text(node.right)
        if a is not None and b is not None:
            return a + b
        return a if a is not None else b
    if isinstance(node, ast.Call) and node.args:  # RuntimeError(f"..."), "...".format(...)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "format":
            return _text(node.func.value)
        return _text(node.args[0])
    if isinstance(node, (ast.List, ast.Tuple)):
        parts = [t for t in map(_text, node.elts) if t is not None]
        return ", ".join(parts) if parts else None
    return None


def _statement(tree: ast.Module, line: int) -> ast.stmt | None:
    """The innermost simple statement spanning ``line``."""
    best: ast.stmt | None = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Expr, ast.Assign, ast.Raise, ast.Return, ast.AnnAssign,
                             ast.Assert, ast.AugAssign)):
            end = node.end_lineno or node.lineno
            if node.lineno <= line <= end and (best is None or node.lineno >= best.lineno):
                best = node
    return best


def _keyword_literal(text: str) -> str | None:
    """The string of a source line that is one keyword argument
    (``desc="...",`` inside a call spanning lines); None otherwise."""
    try:
        call = ast.parse(f"f({text.strip().rstrip(',')})", mode="eval").body
    except SyntaxError:
        return None
    if isinstance(call, ast.Call) and len(call.keywords) == 1 and not call.args:
        value = call.keywords[0].value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return value.value
    return None


def _entry(source: str, path: str, anchor: str) -> dict[str, str | int]:
    """``anchor`` is a literal of the line, or ``A >> B``: the first line
    holding B after the first holding A (a field of one class of several
    declaring it)."""
    after, _, anchor = anchor.rpartition(" >> ")
    lines = list(enumerate(source.splitlines(), 1))
    if after:
        start = next((n for n, text in lines if after in text), None)
        if start is None:
            raise AnchorMissing(f"{path}: {after!r} is not there")
        lines = lines[start:]
    found = [(n, text) for n, text in lines if anchor in text]
    if not found:
        raise AnchorMissing(f"{path}: {anchor!r} is not there")
    i, text = found[0]
    stmt = _statement(ast.parse(source), i)
    built: str | None = None
    if stmt is not None:
        value = getattr(stmt, "value", None) or getattr(stmt, "exc", None) \
            or getattr(stmt, "test", None)
        if isinstance(value, ast.IfExp):  # x = f"..." if FLAG else "": the string it holds
            value = value.body
        built = _text(value) if value is not None else None
        if built is None and isinstance(stmt, ast.Assert):
            built = ast.unparse(stmt.test)
    if built is None or not built.strip():
        built = (_keyword_literal(text) if stmt is None else None) or text.strip()
    # the statement's first line: what vLLM's [%(fileinfo)s:%(lineno)d] shows for a
    # logger call spanning lines (the call's line on Python 3.11+)
    line = stmt.lineno if stmt is not None else i
    return {"source": f"{path}:{line}", "text": built}


def read_wheel(wheel: Path) -> dict[str, str]:
    """The ``.py`` files of a wheel (a ``.whl`` or a directory it was unzipped to)."""
    if wheel.is_dir():
        return {str(p.relative_to(wheel)): p.read_text("utf-8", "replace")
                for p in wheel.rglob("*.py")}
    with zipfile.ZipFile(wheel) as z:
        return {n: z.read(n).decode("utf-8", "replace") for n in z.namelist()
                if n.endswith(".py")}


def build(dialect: str, files: dict[str, str]) -> dict[str, object]:
    engine, version, spec = DIALECTS[dialect]
    lines: dict[str, dict[str, str | int]] = {}
    missing = []
    for key, path, anchor in spec:
        if not path:
            continue
        if path not in files:
            missing.append(f"{path}: no such file in the wheel ({key})")
            continue
        try:
            lines[key] = _entry(files[path], path, anchor)
        except AnchorMissing as exc:
            missing.append(f"{exc} ({key})")
    if missing:
        raise AnchorMissing("\n".join(missing))
    return {"dialect": dialect, "engine": engine, "version": version, "lines": lines}


def doc_table() -> str:
    """The table of docs/DIALECTS.md: every key, and where each version has it."""
    data = {d: json.loads((HERE / f"{d}.json").read_text("utf-8")) for d in DIALECTS}
    keys = sorted({k for v in data.values() for k in v["lines"]})
    head = "| key | " + " | ".join(f"{v['engine']} {v['version']}" for v in data.values()) + " |"
    rows = [head, "|" + " --- |" * (len(data) + 1)]
    for k in keys:
        cells = [f"`{v['lines'][k]['source']}`" if k in v["lines"] else "—"
                 for v in data.values()]
        rows.append(f"| {k} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dialect", choices=[*sorted(DIALECTS), "doc"],
                    help="the dialect to regenerate, or `doc` to print docs/DIALECTS.md's table")
    ap.add_argument("wheel", type=Path, nargs="?",
                    help="the .whl, or the directory it was unzipped to")
    ap.add_argument("--out", type=Path, default=None,
                    help="where to write (default: src/sparktui/sim/dialects/DIALECT.json)")
    args = ap.parse_args(argv)
    if args.dialect == "doc":
        print(doc_table(), end="")
        return 0
    if args.wheel is None:
        ap.error("a wheel is needed to regenerate a dialect")
    if not args.wheel.exists():
        print(f"engine_dialects: {args.wheel}: no such file or directory", file=sys.stderr)
        return 2
    try:
        data = build(args.dialect, read_wheel(args.wheel))
    except AnchorMissing as exc:
        print(f"engine_dialects: {args.dialect}: anchors missing (the engine changed):\n{exc}",
              file=sys.stderr)
        return 1
    out = args.out or HERE / f"{args.dialect}.json"
    out.write_text(json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n",
                   "utf-8")
    print(f"{out}: {len(data['lines'])} lines from {data['engine']} {data['version']}")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
