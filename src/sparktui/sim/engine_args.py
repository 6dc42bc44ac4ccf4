"""The engine command line of a container (`vllm serve ...` or
`python3 -m sglang.launch_server ...`) as the simulated engine reads it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field


class ArgError(Exception):
    """The engine's argparse would refuse this command line."""


@dataclass
class EngineArgs:
    kind: str
    """``vllm`` or ``sglang``."""
    model: str
    tp: int = 1
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = ""
    master_port: int = 0
    headless: bool = False
    gmu: float = 0.9
    max_model_len: int | None = None
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    kv_cache_dtype: str = "auto"
    kv_cache_memory_bytes: int | None = None
    block_size: int = 16
    load_format: str = "auto"
    speculative: dict[str, object] | None = None
    revision: str = ""
    host: str = "0.0.0.0"
    port: int = 8000
    served_model_name: str = ""
    extra: dict[str, str | bool] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.served_model_name or self.model

    @property
    def log_stats_off(self) -> bool:
        """vLLM's ``--disable-log-stats``: no stat logger at all (0.33
        ``v1/engine/async_llm.py:159``, ``:204-214``), so neither the 10 s stats
        line nor a ``vllm:`` series on ``/metrics``, which still answers
        (``entrypoints/serve/instrumentator/metrics.py:56-81``)."""
        return self.kind == "vllm" and "disable-log-stats" in self.extra


_VLLM_FLAGS = {
    "--tensor-parallel-size": "tp", "-tp": "tp", "--nnodes": "nnodes", "--node-rank": "node_rank",
    "--master-addr": "master_addr", "--master-port": "master_port",
    "--gpu-memory-utilization": "gmu", "--max-model-len": "max_model_len",
    "--max-num-seqs": "max_num_seqs", "--max-num-batched-tokens": "max_num_batched_tokens",
    "--kv-cache-dtype": "kv_cache_dtype", "--kv-cache-memory-bytes": "kv_cache_memory_bytes",
    "--block-size": "block_size", "--load-format": "load_format", "--revision": "revision",
    "--host": "host", "--port": "port", "--served-model-name": "served_model_name",
    "--speculative-config": "speculative",
}
_SGLANG_FLAGS = {
    "--model-path": "model", "--tp": "tp", "--tp-size": "tp", "--nnodes": "nnodes",
    "--node-rank": "node_rank", "--dist-init-addr": "master_addr",
    "--mem-fraction-static": "gmu", "--context-length": "max_model_len",
    "--max-running-requests": "max_num_seqs", "--chunked-prefill-size": "max_num_batched_tokens",
    "--kv-cache-dtype": "kv_cache_dtype", "--page-size": "block_size",
    "--load-format": "load_format", "--revision": "revision", "--host": "host", "--port": "port",
    "--served-model-name": "served_model_name",
}
_INT = {"tp", "nnodes", "node_rank", "master_port", "max_model_len", "max_num_seqs",
        "max_num_batched_tokens", "kv_cache_memory_bytes", "block_size", "port"}


def parse_engine_argv(argv: list[str]) -> EngineArgs:
    """Parse the container's command; raise ArgError with the engine's own message."""
    if argv[:2] == ["vllm", "serve"] and len(argv) > 2:
        args = EngineArgs("vllm", argv[2])
        _flags(args, argv[3:], _VLLM_FLAGS, "vllm serve")
    elif argv[:3] in (["python3", "-m", "sglang.launch_server"],
                      ["python", "-m", "sglang.launch_server"]):
        args = EngineArgs("sglang", "", gmu=0.88, max_num_batched_tokens=8192, block_size=1)
        _flags(args, argv[3:], _SGLANG_FLAGS, "launch_server.py")
        if not args.model:
            raise ArgError("launch_server.py: error: the following arguments are required: "
                           "--model-path")
        if ":" in args.master_addr:
            addr, port = args.master_addr.rsplit(":", 1)
            args.master_addr, args.master_port = addr, int(port)
    else:
        raise ArgError(f"exec: \"{argv[0] if argv else ''}\": executable file not found in $PATH")
    args.headless = args.headless or "headless" in args.extra
    return args


def _flags(args: EngineArgs, rest: list[str], table: dict[str, str], prog: str) -> None:
    i = 0
    while i < len(rest):
        tok = rest[i]
        if not tok.startswith("-"):
            raise ArgError(f"{prog}: error: unrecognized arguments: {tok}")
        key, _, inline = tok.partition("=")
        has_value = bool(inline) or (i + 1 < len(rest) and not rest[i + 1].startswith("--"))
        value = inline or (rest[i + 1] if has_value and not inline else "")
        i += 1 if inline or not has_value else 2
        attr = table.get(key)
        if attr is None:
            args.extra[key.lstrip("-")] = value if has_value else True
            continue
        try:
            if attr == "speculative":
                args.speculative = json.loads(value)
            elif attr == "gmu":
                args.gmu = float(value)
            elif attr in _INT:
                setattr(args, attr, int(value))
            else:
                setattr(args, attr, value)
        except (ValueError, TypeError):
            raise ArgError(f"{prog}: error: argument {key}: invalid value: {value!r}") from None
