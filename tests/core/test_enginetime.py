"""The engine's own stamp of a log line, and the lane's first fatal line by it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from sparktui.core.enginetime import MAX_SKEW_S, engine_time
from sparktui.core.phases import PhaseTracker

SECONDS = st.datetimes(min_value=datetime(2001, 1, 1), max_value=datetime(2098, 12, 31)) \
    .map(lambda d: d.replace(microsecond=0, tzinfo=UTC))
LAG = st.floats(min_value=0.0, max_value=5.0)
PROCESS = st.sampled_from(["(EngineCore_DP0 pid=312) ", "(Worker_TP3 pid=294) ",
                           "\x1b[1;36m(APIServer pid=1)\x1b[0;0m ", ""])
LEVEL = st.sampled_from(["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"])
PREFIX = st.sampled_from(["", " TP0", " DP0 TP1"])


def docker(d: datetime) -> str:
    return d.astimezone(UTC).isoformat().replace("+00:00", "Z")


@given(SECONDS, LAG, PROCESS, LEVEL, st.text(max_size=40))
def test_vllm_stamp_round_trips(d: datetime, lag: float, proc: str, level: str,
                                msg: str) -> None:
    line = f"{proc}{level} {d:%m-%d %H:%M:%S} [core.py:1] {msg}"
    assert engine_time(line, docker(d + timedelta(seconds=lag))) == d.timestamp()


@given(SECONDS, LAG, PREFIX, st.text(max_size=40))
def test_sglang_stamp_round_trips(d: datetime, lag: float, prefix: str, msg: str) -> None:
    line = f"[{d:%Y-%m-%d %H:%M:%S}{prefix}] {msg}"
    assert engine_time(line, docker(d + timedelta(seconds=lag))) == d.timestamp()
    assert engine_time(line, None) == d.timestamp()  # SGLang's stamp has its year


@given(st.text(max_size=200), st.one_of(st.none(), SECONDS.map(docker)))
def test_any_text_gives_a_time_or_none(text: str, ts: str | None) -> None:
    t = engine_time(text, ts)
    assert t is None or isinstance(t, float)


def test_vllm_year_is_the_one_nearest_dockers_time() -> None:
    line = "(Worker_TP1 pid=294) ERROR 12-31 23:59:59 [core.py:1] boom"
    assert engine_time(line, "2027-01-01T00:00:01.5Z") == \
        datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()
    assert engine_time(line, None) is None  # no year to place it in


def test_no_stamp_or_another_clock_is_none() -> None:
    assert engine_time("KeyError: 'x'", "2026-11-30T22:45:01Z") is None
    assert engine_time("ERROR 02-30 22:45:01 [x.py:1] no such day", "2026-02-28T22:45:01Z") \
        is None
    far = datetime(2026, 11, 30, 22, 45, 1, tzinfo=UTC) + timedelta(seconds=MAX_SKEW_S + 60)
    # a container in another time zone: its stamp is not docker's clock
    assert engine_time("[2026-11-30 22:45:01 TP0] x", docker(far)) is None


def fatal(rank: int, engine: str, ts: str) -> str:
    return f"{ts} (Worker_TP{rank} pid=294) ERROR 11-30 {engine} [core.py:1] " \
           "RuntimeError: NCCL error: remote process exited or there was a network error"


def test_the_engines_stamps_order_the_ranks_before_dockers() -> None:
    """docker received rank 2's line late (a buffered stderr): by docker's
    time rank 1 came first, by the engines' rank 2 did."""
    tr = PhaseTracker("m", 900, 0.0)
    tr.feed(1, fatal(1, "22:45:03", "2026-11-30T22:45:03.100Z"), 0.0)
    tr.feed(2, fatal(2, "22:45:01", "2026-11-30T22:45:03.900Z"), 0.0)
    assert tr.failure is not None and tr.failure.rank == 2
    assert tr.failure.read_past() == datetime(2026, 11, 30, 22, 45, 3, 900000,
                                              tzinfo=UTC).timestamp()


def test_same_second_falls_back_to_dockers_time() -> None:
    tr = PhaseTracker("m", 900, 0.0)
    tr.feed(1, fatal(1, "22:45:01", "2026-11-30T22:45:01.700Z"), 0.0)
    tr.feed(2, fatal(2, "22:45:01", "2026-11-30T22:45:01.300Z"), 0.0)
    assert tr.failure is not None and tr.failure.rank == 2
    # read past the end of the engine's second, not only docker's stamp
    assert tr.failure.read_past() == datetime(2026, 11, 30, 22, 45, 2,
                                              tzinfo=UTC).timestamp()


def test_a_line_without_a_stamp_is_ordered_by_docker() -> None:
    tr = PhaseTracker("m", 900, 0.0)
    tr.feed(1, fatal(1, "22:45:01", "2026-11-30T22:45:01.700Z"), 0.0)
    tr.feed(2, "2026-11-30T22:45:01.200Z huggingface_hub.errors.LocalEntryNotFoundError: "
               "Cannot find an appropriate cached snapshot folder", 0.0)
    assert tr.failure is not None and tr.failure.rank == 2
