"""What the operator should do next: after a lane's first fatal line, by
kind; for a node under memory pressure or thrashing; for a lane that stopped
generating.

One table for every reader: the console's alerts, the incident bundle's
SUMMARY.md, the phone notification and the Prometheus rules' runbook
annotations (core/metrics_rules.py) all say the same next step.
"""

from __future__ import annotations

from sparktui.core.logsig import Kind

NEXT_STEP: dict[Kind, str] = {
    Kind.CUDA_OOM: "stop the lane (x); lower gpu_memory_utilization or the KV pin, "
                   "or serve on more nodes (fit shows the envelope)",
    Kind.GPU_ADMISSION: "GB10 admits at most the admission_free_gib; lower "
                        "gpu_memory_utilization in the recipe",
    Kind.KV_TOO_SMALL: "raise the KV pin (SGLang: mem_fraction_static) or lower max_model_len "
                       "(fit gives both numbers)",
    Kind.NCCL_ERROR: "check kernel pins and the shared switch; stop the lane (x) and re-serve",
    Kind.HF_ENTRY_MISSING: "the HF cache on that node is not the NAS symlink: fix it, re-serve",
    Kind.RPC_TIMEOUT: "the engine is dead: stop the lane (x); watch memory of its nodes "
                      "(the 22:45 signature) and recover (R) a node that stops answering",
    Kind.ENGINE_DEAD: "stop the lane (x); the cause is the first fatal line of its boot log "
                      "(3), the evidence here quotes it",
    Kind.PAGE_SIZE_ASSERT: "the KV cache dtype or block size does not fit this model's "
                           "hybrid layers: change kv_cache_dtype or block_size, re-serve",
    Kind.CONTAINER_EXIT: "read that rank's last lines; exit 137 is a SIGKILL, an OOM only if "
                         "its node's kernel journal shows the oom-killer killing its container "
                         "(none was found there, unless it was not read: SGLang kills its own "
                         "tree after a Python error)",
    Kind.KERNEL_OOM_KILL: "the node ran out of memory: stop the lane (x); lower "
                          "gpu_memory_utilization or the KV pin, or serve on more nodes (fit "
                          "shows the envelope); check the node answers before re-serving (R)",
    Kind.PORT_TAKEN: "another server holds the lane's port: stop this lane (x), then serve "
                     "it on a free port or stop the other lane",
}


def fatal_next_step(kind: Kind, rank: int) -> str:
    """The next step after a fatal line of ``kind`` on ``rank``."""
    return NEXT_STEP.get(kind, f"stop the lane (x) and read the boot log (rank {rank}) "
                               "before re-serving")


PRESSURE_NEXT = "watch memory; do not send long prompts or start loads on this node"
UNRESPONSIVE_NEXT = ("the engine is hung (its process lives, it generates nothing or its "
                     "/health gives no answer): stop the lane (x) and re-serve; read rank "
                     "0's log for its last lines first")


SENTINEL_UNIT = "sparktui-sentinel.service"
"""The systemd user unit `sparktui sentinel --install-unit` writes."""
SENTINEL_DOWN_NEXT = (f"restart the sentinel: systemctl --user restart {SENTINEL_UNIT} (or run "
                      f"`sparktui sentinel`); its last lines: journalctl --user -u "
                      f"{SENTINEL_UNIT.removesuffix('.service')}")
"""Nobody watches the night: a console that lost its sentinel, the dead-sentinel rule."""
STALE_NEXT = ("read the node's state in the console (sparktui): a starved node is recovered "
              "with R, an unreachable one needs its network or power checked")
"""A node whose probe has not come back for minutes: the sentinel's stale line, the rule."""


def thrash_next_step(retries: int, interval_s: float) -> str:
    """While the node still answers SSH (the runbook's first step)."""
    return (f"reduce load now (stop long prompts); if SSH stops answering: {retries} SSH "
            f"retries ~{interval_s:.0f} s apart")


def retry_next_step(done: int, retries: int, interval_s: float, node: str) -> str:
    """While SSH retries of a starved node go on."""
    return (f"SSH retry {done}/{retries} (~{interval_s:.0f} s apart); if all fail: "
            f"Home Assistant plug cycle of {node} only, then re-check")


def cycle_next_step(retries: int, node: str) -> str:
    """After every SSH retry failed."""
    return (f"{retries} SSH retries failed: plug-cycle {node} only via Home Assistant, "
            "then re-check before continuing")
