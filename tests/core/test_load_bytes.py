"""An InstantTensor load's progress (issue 28 item 7: `serve: readiness`
throughout a 40-minute load): rank 0's byte bar as vLLM 0.33 prints it,
SGLang 0.5.23's tensor bar, and
the weights become resident where the log prints nothing (core/memload.py)."""

from __future__ import annotations

from sparktui.core.loadprogress import READ, RESIDENT, SHARDS, TENSORS, LoadProgress
from sparktui.core.logsig import Kind, Phase, classify, parse_mib
from sparktui.core.memload import MemoryLoad
from sparktui.core.phases import PhaseTracker

GIB_KIB = 1024 * 1024
# vLLM 0.33 model_loader/weight_utils.py:1457-1467 (desc, unit "B", unit_scale,
# unit_divisor 1024) in _BAR_FORMAT (:842), rendered by tqdm 4.70's format_meter
# for 376 GiB (n, elapsed): (0, 0), (3 GiB, 10 s), (188 GiB, 1440 s); docker's
# stamp before each.
DESC = "Loading safetensors using InstantTensor loader"
BAR = (
    ("2026-11-30T01:00:00.000000000Z", f"\r{DESC}:   0% Completed | 0.00/376G [00:00<?, ?B/s]\n"),
    ("2026-11-30T01:00:10.000000000Z",
     f"\r{DESC}:   1% Completed | 3.00G/376G [00:10<20:43, 322MB/s]\n"),
    ("2026-11-30T01:24:00.000000000Z",
     f"\r{DESC}:  50% Completed | 188G/376G [24:00<24:00, 140MB/s]\n"),
)


def test_the_byte_bar_is_load_progress_in_mib() -> None:
    ev = classify(BAR[2][1])
    assert ev is not None and ev.kind is Kind.LOAD_BYTES and ev.phase is Phase.LOADING
    assert (ev.fields["pct"], ev.fields["done"], ev.fields["total"]) == ("50", "188G", "376G")
    assert parse_mib("188G") == 188 * 1024 and parse_mib("0.00") == 0
    assert parse_mib("512M") == 512 and parse_mib("1.20T") == round(1.2 * 1024 * 1024)
    assert parse_mib("?") is None


def test_a_byte_bar_gives_the_lane_a_fraction_a_rate_and_an_eta() -> None:
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0)
    for i, (ts, line) in enumerate(BAR):
        tr.feed(0, f"{ts} {line}", now=float(i))
    assert tr.phase is Phase.LOADING
    lp = tr.load_progress()
    assert lp is not None and lp.measure == READ and lp.rank == 0
    assert (lp.done, lp.total, lp.fraction) == (188 * 1024, 376 * 1024, 0.5)
    # 188 GiB in 1440 s by docker's stamps: 188 GiB to go in 24 min
    assert lp.rate_per_s is not None and abs(lp.rate_per_s * 1440 - 188 * 1024) < 1
    assert lp.eta_s is not None and abs(lp.eta_s - 1440) < 1
    assert lp.amount() == "188/376G"
    assert lp.describe() == "188/376 GiB read (rank 0), 7.8 GiB/min, ETA 24m00s"
    assert tr.rank_shards() == {}  # the OOM predictor counts shards only


def test_the_loaders_desc_alone_is_no_signature() -> None:
    """vLLM 0.33 prints the desc only inside its bar (weight_utils.py:1459), never
    as a logger line: the bar alone is the load's progress (the phase comes with
    V2's ``Loading model from scratch...``, v1/worker/gpu/model_runner.py:399)."""
    assert classify("(EngineCore_DP0 pid=312) INFO 11-30 01:00:00 [default_loader.py:267] "
                    f"{DESC}") is None
    ev = classify(BAR[0][1])
    assert ev is not None and ev.kind is Kind.LOAD_BYTES and ev.phase is Phase.LOADING


# sglang 0.5.23 srt/model_loader/weight_utils.py:1258-1266: rank 0's tqdm over the
# tensors InstantTensor loads (desc without " loader", total=len(f.keys()),
# mininterval=1) in BAR_FORMAT (srt/utils/common.py:1414, no newline: tqdm redraws
# with \r only), under SGLang's [date TPn] prefix; tqdm 4.70's count units.
SGL = "[2026-11-30 01:00:00 TP0] "
SGL_DESC = "Loading safetensors using InstantTensor"
SGL_BAR = (
    ("2026-11-30T01:00:00.000000000Z",
     f"{SGL}\r{SGL_DESC}:   0% Completed | 0/2400 [00:00<?, ?it/s]"),
    ("2026-11-30T01:00:10.000000000Z",
     f"{SGL}\r{SGL_DESC}:   0% Completed | 0/2400 [00:00<?, ?it/s]"
     f"\r{SGL_DESC}:  10% Completed | 240/2400 [00:10<01:30, 24.00it/s]"),
    ("2026-11-30T01:01:00.000000000Z",
     f"\r{SGL_DESC}:  50% Completed | 1200/2400 [01:00<01:00, 20.00it/s]"),
)


def test_sglangs_instanttensor_bar_is_load_progress_in_tensors() -> None:
    ev = classify(SGL_BAR[1][1])
    assert ev is not None and ev.kind is Kind.LOAD_TENSORS and ev.phase is Phase.LOADING
    assert (ev.fields["pct"], ev.fields["done"], ev.fields["total"]) == ("10", "240", "2400")
    assert ev.fields["rate"] == "24.00it/s"
    ev = classify(SGL_BAR[0][1])
    assert ev is not None and ev.kind is Kind.LOAD_TENSORS and ev.fields["remaining"] == "?"


def test_a_tensor_bar_gives_the_lane_a_fraction_and_an_eta_but_no_shards() -> None:
    tr = PhaseTracker("lane", stall_after_s=900, start=0.0)
    for i, (ts, line) in enumerate(SGL_BAR):
        tr.feed(0, f"{ts} {line}", now=float(i))
    assert tr.phase is Phase.LOADING
    lp = tr.load_progress()
    assert lp is not None and lp.measure == TENSORS and lp.rank == 0
    assert (lp.done, lp.total, lp.fraction) == (1200, 2400, 0.5)
    assert lp.rate_per_s is not None and abs(lp.rate_per_s - 20.0) < 1e-9  # 1200 in 60 s
    assert lp.eta_s is not None and abs(lp.eta_s - 60) < 1e-9
    assert lp.amount() == "1200/2400"
    assert lp.describe() == "tensor 1200/2400 (rank 0), 20 tensors/s, ETA 1m00s"
    assert tr.rank_shards() == {}  # tensors are not shards: the OOM predictor waits


def test_shards_read_as_before() -> None:
    lp = LoadProgress(1, 4, 8, 1 / 30, 120.0)
    assert lp.measure == SHARDS and lp.amount() == "4/8"
    assert lp.describe() == "shard 4/8 (rank 1), 30 s/shard, ETA 2m00s"


def test_memory_become_resident_is_the_silent_loads_progress() -> None:
    """Four ranks of a 94 GiB/rank load read every minute: the slowest node's
    resident memory, its rate since it began to grow, the ETA at that rate."""
    m = MemoryLoad()
    ranks = {"dgx5": 0, "dgx6": 1, "dgx7": 2, "dgx8": 3}
    pairs = [(node, rank) for node, rank in ranks.items()]
    for node in ranks:
        m.observe(node, int(118.8 * GIB_KIB), 0.0)
    assert m.progress(pairs, 94.0) is None                # nothing resident yet
    for minute in range(1, 21):
        for node, rank in ranks.items():
            fill = 2.0 if rank != 2 else 1.8                 # dgx7 is the slowest
            m.observe(node, int((118.8 - fill * minute) * GIB_KIB), minute * 60.0)
    lp = m.progress(pairs, 94.0)
    assert lp is not None and lp.measure == RESIDENT and lp.rank == 2
    assert lp.amount() == "36/94G" and round(lp.fraction, 2) == 0.38
    assert lp.rate_per_s is not None and abs(lp.rate_per_s * 60 - 1.8 * 1024) < 1
    assert lp.eta_s is not None and abs(lp.eta_s - (94 - 36) / 1.8 * 60) < 2
    assert lp.describe().startswith("36/94 GiB resident (rank 2), 1.8 GiB/min, ETA 32m")


def test_memory_freed_starts_a_nodes_count_again_and_a_full_node_stays_at_its_total() -> None:
    m = MemoryLoad()
    m.observe("a", 100 * GIB_KIB, 0.0)
    m.observe("a", 95 * GIB_KIB, 60.0)
    lp = m.progress([("a", 0)], 10.0)
    assert lp is not None and lp.amount() == "5/10G"
    m.observe("a", 101 * GIB_KIB, 120.0)                    # freed: a restart
    assert m.progress([("a", 0)], 10.0) is None
    m.observe("a", 80 * GIB_KIB, 180.0)                     # more than the weights
    lp = m.progress([("a", 0)], 10.0)
    assert lp is not None and lp.fraction == 1.0 and lp.eta_s == 0.0


def test_a_node_that_has_not_begun_is_the_slowest_at_zero_and_unread_nodes_wait() -> None:
    m = MemoryLoad()
    m.observe("a", 100 * GIB_KIB, 0.0)
    m.observe("b", 100 * GIB_KIB, 0.0)
    m.observe("a", 95 * GIB_KIB, 60.0)
    lp = m.progress([("a", 0), ("b", 1), ("c", 2)], 10.0)    # c never read
    assert lp is not None and (lp.rank, lp.done) == (1, 0)
    assert m.progress([("a", 0)], 0.0) is None               # no total: no fraction


def test_a_node_holding_two_ranks_fills_for_both() -> None:
    m = MemoryLoad()
    m.observe("a", 100 * GIB_KIB, 0.0)
    m.observe("a", 99 * GIB_KIB, 60.0)
    m.observe("a", 90 * GIB_KIB, 120.0)                     # 10 GiB: 5 GiB a rank
    lp = m.progress([("a", 0), ("a", 1)], 10.0)
    assert lp is not None and (lp.rank, lp.amount(), lp.fraction) == (0, "5/10G", 0.5)
    assert lp.rate_per_s is not None and abs(lp.rate_per_s * 60 - 4.5 * 1024) < 1
