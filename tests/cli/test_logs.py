"""`sparktui logs`: phase markers, progress with ETA, fatal lines flagged."""

from __future__ import annotations

from sparktui.cli.logs_cmd import FATAL_MARK, PHASE_MARK, PROGRESS_MARK, LogPrinter
from sparktui.cli.main import build_parser
from sparktui.core.phases import PhaseTracker
from sparktui.watch.follower import LogLine
from sparktui.watch.lane import FatalDecided, LinesArrived

P = "(EngineCore_DP0 pid=312) INFO 11-29 01:02:03 [x.py:1] "


class Clock:
    def time(self) -> float:
        return 0.0

    def monotonic(self) -> float:
        return 0.0

    async def sleep(self, seconds: float) -> None:
        return None


class Annotator:
    """The lane watcher's part, one line at a time: the tracker is fed, the
    events it would emit are handed to the printer."""

    def __init__(self, lane: str, clock: Clock) -> None:
        self.tracker = PhaseTracker(lane, float("inf"), clock.monotonic())
        self.printer = LogPrinter(self.tracker, 0)

    def annotate(self, rank: int, raw: str) -> list[str]:
        ts, _, text = raw.partition(" ") if raw[:2] == "20" else (None, "", raw)
        failed = self.tracker.failure is not None
        ev = self.tracker.feed(rank, text, 0.0, ts)
        lane = self.tracker.lane
        out = self.printer.lines(LinesArrived(lane, rank, "n", (LogLine(rank, ts, text),),
                                              (ev,), 1))
        if self.tracker.failure is not None and not failed:
            out += self.printer.lines(FatalDecided(lane, self.tracker.failure))
        return out


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


def test_instanttensor_bars_get_progress_marks() -> None:
    """vllm 0.33 model_loader/weight_utils.py:1457-1467 (bytes) and sglang 0.5.23
    srt/model_loader/weight_utils.py:1258-1266 (tensors): progress like shards."""
    a = Annotator("m", Clock())
    for i in (1, 2):
        out = a.annotate(0, f"2026-11-29T01:0{i}:00.000000001Z \rLoading safetensors using "
                            f"InstantTensor loader:  {i}% Completed | {i * 4}.00G/376G "
                            "[01:00<20:00, 70MB/s]")
    assert out[-1] == f"{PROGRESS_MARK} 8/376 GiB read (rank 0), 4.0 GiB/min, ETA 1h32m"
    a = Annotator("s", Clock())
    for i in (1, 2):
        out = a.annotate(0, f"2026-11-29T01:0{i}:00.000000001Z [2026-11-29 01:0{i}:00 TP0] "
                            f"\rLoading safetensors using InstantTensor:  {i * 10}% Completed | "
                            f"{i * 240}/2400 [01:00<09:00, 4.00it/s]")
    assert out[-1] == f"{PROGRESS_MARK} tensor 480/2400 (rank 0), 4 tensors/s, ETA 8m00s"


def test_another_ranks_failure_names_its_line() -> None:
    a = Annotator("m", Clock())
    a.printer.rank = 1
    out = a.annotate(0, "(EngineCore_DP0 pid=312) ERROR 11-29 01:02:03 [core.py:1] "
                        "TimeoutError: RPC call to sample_tokens timed out.")
    assert out == [f"{FATAL_MARK} lane failed on rank 0 (rpc_timeout): "
                   "TimeoutError: RPC call to sample_tokens timed out."]


def test_traceback_last_line_is_flagged() -> None:
    a = Annotator("m", Clock())
    a.annotate(0, "Traceback (most recent call last):")
    out = a.annotate(0, "KeyError: 'x'")
    assert out[0] == f"{FATAL_MARK} KeyError: 'x'"
