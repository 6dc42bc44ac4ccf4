"""What the operator should do next after a lane's first fatal line, by kind.

One table for every reader: the console's fatal alert, the incident bundle's
SUMMARY.md and the phone notification all say the same next step.
"""

from __future__ import annotations

from sparktui.core.logsig import Kind

NEXT_STEP: dict[Kind, str] = {
    Kind.CUDA_OOM: "stop the lane (x); lower gpu_memory_utilization or the KV pin, "
                   "or serve on more nodes (fit shows the envelope)",
    Kind.GPU_ADMISSION: "GB10 admits at most the admission_free_gib; lower "
                        "gpu_memory_utilization in the recipe",
    Kind.KV_TOO_SMALL: "raise the KV pin or lower max_model_len (fit gives both numbers)",
    Kind.NCCL_ERROR: "check kernel pins and the shared switch; stop the lane (x) and re-serve",
    Kind.HF_ENTRY_MISSING: "the HF cache on that node is not the NAS symlink: fix it, re-serve",
    Kind.RPC_TIMEOUT: "the engine is dead: stop the lane (x); watch memory of its nodes "
                      "(the 22:45 signature) and recover (R) a node that stops answering",
    Kind.ENGINE_DEAD: "stop the lane (x); read the first fatal line above for the cause",
    Kind.PORT_TAKEN: "another server holds the lane's port: stop this lane (x), then serve "
                     "it on a free port or stop the other lane",
}


def fatal_next_step(kind: Kind, rank: int) -> str:
    """The next step after a fatal line of ``kind`` on ``rank``."""
    return NEXT_STEP.get(kind, f"stop the lane (x) and read the boot log (rank {rank}) "
                               "before re-serving")
