"""`sparktui logs`: phase markers, progress with ETA, fatal lines flagged."""

from __future__ import annotations

from sparktui.cli.logs_cmd import FATAL_MARK, PHASE_MARK, PROGRESS_MARK, Annotator
from sparktui.cli.main import build_parser

P = "(EngineCore_DP0 pid=312) INFO 11-29 01:02:03 [x.py:1] "


class Clock:
    def time(self) -> float:
        return 0.0

    def monotonic(self) -> float:
        return 0.0

    async def sleep(self, seconds: float) -> None:
        return None


def test_logs_is_registered() -> None:
    args = build_parser().parse_args(["logs", "glm53", "--rank", "5", "-f"])
    assert (args.lane, args.rank, args.follow, args.tail) == ("glm53", 5, True, None)


def test_annotations() -> None:
    a = Annotator("m", Clock())
    out = a.annotate(0, "2026-11-29T01:02:03.000000001Z " + P + "Starting to load model m...")
    assert out[0] == "   01:02:03 " + P + "Starting to load model m..."
    assert out[1] == f"{PHASE_MARK} m: loading weights"
    for i in (1, 2):
        out = a.annotate(0, f"2026-11-29T01:0{i}:00.000000001Z \rLoading safetensors checkpoint "
                            f"shards: {i}% Completed | {i}/100 [00:40<10:00, 40.00s/it]")
    assert out[0].startswith("   01:02:00 Loading safetensors checkpoint shards:")
    assert out[1].startswith(f"{PROGRESS_MARK} shard 2/100 (rank 0), 60 s/shard, ETA 1h38m")
    out = a.annotate(0, "(EngineCore_DP0 pid=312) ERROR 11-29 01:02:03 [core.py:1] "
                        "TimeoutError: RPC call to sample_tokens timed out.")
    assert out[0].startswith(f"{FATAL_MARK} ")
    assert out[1] == f"{FATAL_MARK} lane failed on rank 0 (rpc_timeout)"
    assert a.fatal_seen


def test_traceback_last_line_is_flagged() -> None:
    a = Annotator("m", Clock())
    a.annotate(0, "Traceback (most recent call last):")
    out = a.annotate(0, "KeyError: 'x'")
    assert out[0] == f"{FATAL_MARK} KeyError: 'x'"
