"""The boot-phase tracker: phases in order, shard ETA from log timestamps,
KV pool, first fatal line of any rank with context, progress-based stall
(never a total timeout)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.loadprogress import format_duration
from sparktui.core.logsig import Kind, Phase, container_exit
from sparktui.core.phases import PhaseTracker
from sparktui.ops.journal import Journal
from sparktui.ops.shiftlog import render
from sparktui.sim.clock import SimClock

P = "(EngineCore_DP0 pid=312) INFO 11-29 01:02:03 [x.py:1] "
E = "(EngineCore_DP0 pid=312) ERROR 11-29 01:02:03 [core.py:1] "


def ts(seconds: float) -> str:
    whole = int(seconds)
    h, rem = divmod(whole, 3600)
    m, s = divmod(rem, 60)
    frac = f"{seconds - whole:.9f}"[2:]
    return f"2026-11-29T{h:02d}:{m:02d}:{s:02d}.{frac}Z "


def shard(done: int, total: int) -> str:
    return (f"\rLoading safetensors checkpoint shards: {100 * done // total:3d}% Completed | "
            f"{done}/{total} [00:40<10:00, 40.00s/it]\n")


def boot_lines(total: int = 4, per_shard: float = 40.0) -> list[tuple[float, str]]:
    t = 0.0
    out = [(t, P + "vLLM server version 0.33.0, serving model m"),
           (t + 1, P + "Starting to load model m...")]
    for i in range(1, total + 1):
        out.append((t + 1 + i * per_shard, shard(i, total)))
    t = 1 + total * per_shard
    out += [
        (t + 1, P + "Model loading took 61.23 GiB memory and 160.000000 seconds"),
        (t + 2, P + "Available KV cache memory: 24.5 GiB"),
        (t + 3, P + "GPU KV cache size: 972,032 tokens, Maximum concurrency for 524,288 "
                    "tokens per request: 1.85x"),
        (t + 4, "\rCapturing CUDA graphs (decode, FULL):  50%|█████     | 1/2 [00:01<00:01]\n"),
        (t + 9, P + "Graph capturing finished in 5 secs, took 1.25 GiB"),
        (t + 10, "(APIServer pid=1) INFO 11-29 01:02:03 [a.py:1] Starting vLLM server on "
                 "http://0.0.0.0:8000"),
        (t + 11, "INFO:     Application startup complete."),
    ]
    return out


def test_cold_boot_reaches_serving_in_order() -> None:
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0)
    seen = [tr.phase]
    for t, line in boot_lines():
        tr.feed(0, ts(t) + line, now=t)
        if tr.phase != seen[-1]:
            seen.append(tr.phase)
    assert seen == [Phase.STARTING, Phase.LOADING, Phase.KV_ALLOC, Phase.GRAPH_CAPTURE,
                    Phase.API_STARTING, Phase.SERVING]
    assert tr.done and tr.failure is None
    assert tr.kv.tokens == 972_032 and tr.kv.concurrency == 1.85 and tr.kv.max_len == 524_288
    times = tr.stage_seconds()
    assert times[Phase.LOADING] == 1.0 and times[Phase.SERVING] == 172.0
    assert "serving" in tr.summary() and "972,032" in tr.summary()


def test_shard_rate_and_eta_from_timestamps() -> None:
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0)
    for i in range(1, 11):
        t = 100.0 + 40.0 * i
        tr.feed(0, ts(t) + shard(i, 141), now=5.0)  # receipt time is irrelevant for the rate
    lp = tr.load_progress()
    assert lp is not None
    assert (lp.done, lp.total) == (10, 141)
    assert abs(lp.rate_per_s - 1 / 40) < 1e-9
    assert abs(lp.eta_s - 131 * 40) < 1e-6
    assert "shard 10/141" in lp.describe() and "40 s/shard" in lp.describe()
    assert "ETA 1h27m" in lp.describe()


def test_eta_falls_back_to_tqdm_remaining_with_one_sample() -> None:
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0)
    tr.feed(0, shard(1, 4).replace("10:00", "1:02:03"), now=1.0)
    lp = tr.load_progress()
    assert lp is not None and lp.rate_per_s is None and lp.eta_s == 3723


def test_slowest_rank_is_reported() -> None:
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0)
    for i in range(1, 5):
        tr.feed(0, ts(40.0 * i) + shard(i * 2, 10), now=0)
        tr.feed(5, ts(40.0 * i) + shard(i, 10), now=0)
    lp = tr.load_progress()
    assert lp is not None and lp.rank == 5 and lp.done == 4


def test_fatal_line_from_a_worker_rank_fails_the_lane_with_context() -> None:
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0, context_lines=3)
    tr.feed(0, P + "Starting to load model m...", now=1)
    for i in range(5):
        tr.feed(6, f"worker line {i}", now=2)
    tr.feed(6, "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate "
               "cached snapshot folder", now=3)
    tr.feed(0, E + "EngineCore failed to start.", now=4)  # later fatal lines do not replace it
    assert tr.phase is Phase.FAILED and tr.done
    f = tr.failure
    assert f is not None and f.rank == 6 and f.kind is Kind.HF_ENTRY_MISSING
    assert f.context == ("worker line 2", "worker line 3", "worker line 4")
    assert "rank 6" in tr.summary() and "LocalEntryNotFoundError" in tr.summary()


def test_traceback_last_line_is_fatal_during_boot() -> None:
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0)
    tr.feed(2, E + "Traceback (most recent call last):", now=1)
    tr.feed(2, E + '  File "x.py", line 3, in f', now=1)
    tr.feed(2, E + "KeyError: 'layers.0'", now=1)
    assert tr.failure is not None and tr.failure.kind is Kind.EXCEPTION
    assert tr.failure.line == "KeyError: 'layers.0'"


def test_exception_without_traceback_is_not_fatal() -> None:
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0)
    tr.feed(0, "KeyError: 'x'", now=1)
    assert tr.failure is None


def test_traceback_while_serving_is_not_the_lanes_death() -> None:
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0)
    tr.feed(0, "INFO:     Application startup complete.", now=1)
    tr.feed(0, "Traceback (most recent call last):", now=2)
    tr.feed(0, "ValueError: bad request json", now=2)
    assert tr.phase is Phase.SERVING and tr.failure is None
    tr.feed(0, E + "TimeoutError: RPC call to sample_tokens timed out.", now=3)
    assert tr.phase is Phase.FAILED and tr.failure.kind is Kind.RPC_TIMEOUT


def test_container_exit_event_fails_the_lane() -> None:
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0)
    tr.feed_event(3, container_exit(137), now=5)
    assert tr.failure is not None and tr.failure.rank == 3 and "SIGKILL" in tr.failure.line


def test_stall_only_after_window_without_progress_and_recovers() -> None:
    tr = PhaseTracker("lane", stall_after_s=600, start=0.0)
    tr.feed(0, P + "Starting to load model m...", now=10)
    # noise is not progress
    for t in range(20, 600, 50):
        tr.feed(0, "INFO:     some unrelated chatter", now=t)
        assert not tr.check_stall(t)
    assert not tr.check_stall(609.9)
    assert tr.check_stall(610)
    assert tr.phase is Phase.STALLED and "last progress" in tr.summary()
    tr.feed(0, shard(1, 141), now=700)
    assert tr.phase is Phase.LOADING
    assert not tr.check_stall(1200)


def test_a_two_hour_load_that_keeps_progressing_never_stalls_or_fails() -> None:
    """The seed's 8x load: 122 min, no fixed total timeout may cut it."""
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0)
    t = 0.0
    for i in range(1, 142):
        t = i * 52.0  # 141 shards x 52 s = 122 min
        tr.feed(0, ts(t) + shard(i, 141), now=t)
        assert not tr.check_stall(t + 800)
    assert tr.phase is Phase.LOADING and tr.failure is None
    assert t > 7200


def test_external_progress_keeps_a_silent_load_alive() -> None:
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0)
    tr.feed(0, P + "Starting to load model m...", now=0)
    for t in range(300, 7200, 300):
        tr.note_progress("rank 0 read 12.0 GB more", now=t)
        assert not tr.check_stall(t + 1)
    assert tr.last_progress == "rank 0 read 12.0 GB more"


def test_a_serving_log_with_a_silent_endpoint_stalls_a_confirmed_one_never() -> None:
    tr = PhaseTracker("lane", stall_after_s=10, start=0.0)
    tr.feed(0, "INFO:     Application startup complete.", now=0)
    assert tr.phase is Phase.SERVING and not tr.check_stall(9)
    assert tr.check_stall(10)  # "startup complete" but the endpoint never answered
    confirmed = PhaseTracker("lane", stall_after_s=10, start=0.0)
    confirmed.feed(0, "INFO:     Application startup complete.", now=0)
    confirmed.mark_serving(1)
    assert confirmed.ready and not confirmed.check_stall(1e6)


def test_failure_order_compares_times_not_text() -> None:
    """Docker trims trailing zeros: ``.4Z`` is after ``.35Z`` although it sorts first."""
    tr = PhaseTracker("lane", stall_after_s=10, start=0.0)
    tr.feed(0, "EngineCore encountered a fatal error.", 0, "2026-11-29T01:00:00.4Z")
    tr.feed(1, "huggingface_hub.errors.LocalEntryNotFoundError: x", 0, "2026-11-29T01:00:00.35Z")
    assert tr.failure is not None and tr.failure.rank == 1


def test_sglang_boot() -> None:
    s = "[2026-11-29 01:02:03 TP0] "
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0)
    for i, line in enumerate([
        s + "Load weight begin. avail mem=110.52 GB",
        s + "Load weight end. elapsed=312.45 s, type=X, avail mem=40.10 GB, mem usage=70.42 GB.",
        s + "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1048576, K size: 1.00 GB, "
            "V size: 1.00 GB",
        s + "max_total_num_tokens=1048576, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            "max_running_requests=64, context_len=524288, available_gpu_mem=12.00 GB",
        "[2026-11-29 01:02:03] The server is fired up and ready to roll!",
    ]):
        tr.feed(0, line, now=i)
    assert tr.phase is Phase.SERVING
    assert tr.kv.tokens == 1_048_576 and tr.kv.concurrency == 2.0


def test_format_duration() -> None:
    assert format_duration(5) == "5s"
    assert format_duration(125) == "2m05s"
    assert format_duration(7338) == "2h02m"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.text(max_size=80)), max_size=40))
def test_fuzz_tracker_never_raises(lines: list[tuple[int, str]]) -> None:
    tr = PhaseTracker("lane", stall_after_s=10, start=0.0)
    for i, (rank, line) in enumerate(lines):
        tr.feed(rank, line, now=float(i))
        tr.check_stall(float(i))
    tr.summary()
    tr.load_progress()


def test_root_cause_after_a_generic_fatal_line_is_kept() -> None:
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0)
    tr.feed(0, E + "EngineCore failed to start.", now=1)
    tr.feed(1, "unrelated rank line", now=1)
    tr.feed(0, "Traceback (most recent call last):", now=1)
    tr.feed(0, '  File "gpu_worker.py", line 248, in init_device', now=1)
    tr.feed(0, "ValueError: Free memory on device cuda:0 (108.78/121.6 GiB) on startup is less "
               "than desired GPU memory utilization (0.91, 110.66 GiB). Decrease GPU memory "
               "utilization or reduce GPU memory used by other processes.", now=1)
    tr.feed(0, "RuntimeError: Engine core initialization failed. See root cause above.", now=1)
    f = tr.failure
    assert f is not None and f.kind is Kind.ENGINE_FAILED and f.rank == 0
    assert f.cause is not None and f.cause.startswith("ValueError: Free memory on device")
    assert len(f.after) == 4 and "unrelated rank line" not in f.after
    assert "(cause: ValueError: Free memory" in f.describe()


def test_specific_first_fatal_has_no_cause() -> None:
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0)
    tr.feed(2, "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO "
               "for details)", now=1)
    tr.feed(2, "KeyError: 'x'", now=1)
    assert tr.failure is not None and tr.failure.cause is None


def test_earliest_fatal_line_by_timestamp_wins_across_ranks():
    """Ranks' log streams arrive in any order: rank 0's "Worker proc died" may
    arrive first, but the lane died on rank 1's LocalEntryNotFoundError, 10 s earlier."""
    tr = PhaseTracker("lane", stall_after_s=900.0, start=0.0)
    tr.feed(0, "2026-09-18T16:10:12.000000000Z (EngineCore_DP0 pid=312) ERROR 09-18 16:10:12 "
               "[multiproc_executor.py:154] Worker proc VllmWorker-1 died unexpectedly "
               "(exit code: 1), shutting down executor.", 1.0)
    assert tr.failure is not None and tr.failure.rank == 0
    tr.feed(1, "2026-09-18T16:10:02.000000000Z huggingface_hub.errors.LocalEntryNotFoundError: "
               "Cannot find an appropriate cached snapshot folder for the specified revision "
               "on the local disk and outgoing traffic has been disabled.", 1.1)
    assert tr.failure.rank == 1
    assert "LocalEntryNotFoundError" in tr.failure.line
    # a later fatal line of another rank does not displace it
    tr.feed(2, "2026-09-18T16:10:20.000000000Z RuntimeError: NCCL error: remote process exited "
               "or there was a network error", 1.2)
    assert tr.failure.rank == 1


def vllm(t: float, msg: str) -> tuple[str, str]:
    """A vLLM line logged at ``t`` seconds past 01:00:00: docker's stamp (a
    few ms later) and the engine's own header (whole seconds)."""
    whole = int(t)
    engine = f"(EngineCore_DP0 pid=312) INFO 11-29 01:{whole // 60:02d}:{whole % 60:02d} [x.py:1] "
    return ts(3600 + t + 0.004).strip(), engine + msg


def catch_up_boot() -> list[tuple[str, str]]:
    """A boot whose graph capture took 27 s by the engine's log."""
    return [
        vllm(10.2, "Starting to load model m..."),
        vllm(300.5, "Model loading took 61.23 GiB memory and 290.000000 seconds"),
        vllm(301.1, "GPU KV cache size: 972,032 tokens, Maximum concurrency for 524,288 "
                    "tokens per request: 1.85x"),
        (ts(3600 + 305.3).strip(), "Capturing CUDA graphs (decode, FULL):  50%|█████     | 1/2"),
        vllm(332.6, "Graph capturing finished in 27 secs, took 1.25 GiB"),
        vllm(340.9, "Starting vLLM server on http://0.0.0.0:8000"),
        (ts(3600 + 342.0).strip(), "INFO:     Application startup complete."),
    ]


def test_phases_read_in_one_batch_keep_the_durations_the_log_says() -> None:
    """The shift log's "graph capture 0s" (issue 13): every line of the boot
    read at once (a catch-up) still dates each phase by its own line."""
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0)
    for stamp, line in catch_up_boot():
        tr.feed(0, line, now=350.0, ts=stamp)
    assert tr.phase is Phase.SERVING
    assert set(tr.phase_times.values()) == {0.0, 350.0}  # as learnt: all at once
    s = tr.stage_seconds()
    # engine stamps (whole seconds) where the line has one, else docker's
    assert s[Phase.GRAPH_CAPTURE] - s[Phase.KV_ALLOC] == pytest.approx(305.3 - 300.0, abs=0.01)
    assert s[Phase.API_STARTING] - s[Phase.GRAPH_CAPTURE] == pytest.approx(332 - 305.3, abs=0.01)
    assert s[Phase.SERVING] - s[Phase.API_STARTING] == pytest.approx(342.0 - 332, abs=0.01)
    assert s[Phase.SERVING] <= 350.0  # never later than it was read


def test_phases_without_a_stamp_keep_the_time_they_were_read() -> None:
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0)
    for now, (_, line) in zip((5.0, 9.0, 9.0, 30.0, 60.0, 61.0, 70.0), catch_up_boot(),
                               strict=True):
        tr.feed(0, line.split("] ", 1)[-1], now=now)  # no docker stamp, no engine header
    assert tr.stage_seconds() == {Phase.STARTING: 0.0, Phase.LOADING: 5.0,
                                  Phase.KV_ALLOC: 9.0, Phase.GRAPH_CAPTURE: 30.0,
                                  Phase.API_STARTING: 60.0, Phase.SERVING: 70.0}


def test_phase_dates_use_each_ranks_own_clock_and_never_go_backwards() -> None:
    """Rank 1's node runs 100 s ahead: its lines are mapped by its own reads,
    and a phase is never dated before the one reached before it."""
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0)
    boot = catch_up_boot()
    tr.feed(0, boot[0][1], now=20.0, ts=boot[0][0])
    tr.feed(1, "some line", now=21.0, ts=ts(3600 + 100 + 10.5).strip())
    line = boot[1][1]
    ahead = ts(3600 + 100 + 300.5).strip()
    tr.feed(1, line.replace("01:05:00", "01:06:40"), now=310.0, ts=ahead)
    tr.feed(0, boot[2][1], now=311.0, ts=boot[2][0])
    s = tr.stage_seconds()
    assert s[Phase.KV_ALLOC] - s[Phase.LOADING] == pytest.approx(300 - 10, abs=1.0)
    assert list(s.values()) == sorted(s.values())


async def test_the_shift_log_shows_the_graph_capture_the_log_says(tmp_path: Path) -> None:
    """What the serve workflow journals (stage_seconds, rounded) and the shift
    log renders from it, after a catch-up read."""
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0)
    for stamp, line in catch_up_boot():
        tr.feed(0, line, now=350.0, ts=stamp)
    clock = SimClock()
    j = Journal(tmp_path / "journal.jsonl", clock)
    j.append("s1", "begin", workflow="serve", target="lane", detail={"recipe": "lane",
                                                                     "cluster": "c"})
    await clock.advance(400)
    j.append("s1", "end", workflow="serve", target="lane", ok=True, message="serving",
             detail={"phases": {p.value: round(s, 1) for p, s in tr.stage_seconds().items()}})
    text = render(j.entries(), since=0)
    assert "graph capture 27s" in text
    assert "Phases: loading weights 4m50s, KV allocation 5s, graph capture 27s, " \
           "API starting 10s." in text


def test_a_tie_goes_to_the_lower_rank_whichever_stream_arrives_first():
    """Fatal lines stamped the same instant (the simulator's clock steps, or
    an engine stamp in whole seconds): the verdict must not depend on which
    rank's stream was read first."""
    line = ("2026-11-29T22:00:03.000000000Z huggingface_hub.errors.LocalEntryNotFoundError: "
            "Cannot find an appropriate cached snapshot folder")
    for order in ((7, 5, 6), (5, 6, 7), (6, 7, 5)):
        tr = PhaseTracker("lane", stall_after_s=900.0, start=0.0)
        for i, rank in enumerate(order):
            tr.feed(rank, line, 1.0 + i)
        assert tr.failure is not None and tr.failure.rank == 5, order


def test_a_failure_in_brief_says_why_without_the_exception_class() -> None:
    """The Lanes table's Progress cell of a failed lane (issue 28 item 7): the
    cause when the first fatal line only says the engine died."""
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0)
    tr.feed(0, E + "EngineCore encountered a fatal error.", now=1)
    tr.feed(0, "TimeoutError: RPC call to sample_tokens timed out.", now=1)
    assert tr.failure is not None
    assert tr.failure.brief() == "rank 0: RPC call to sample_tokens timed out."
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0)
    tr.feed(2, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", now=1)
    assert tr.failure is not None
    assert tr.failure.brief() == "rank 2: CUDA out of memory. Tried to allocate 2.00 GiB"
