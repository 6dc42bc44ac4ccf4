"""The simulator's progress bars are tqdm's own: each string below is what
tqdm 4.70.1's ``format_meter`` writes for those figures (taken from tqdm
itself; the simulator's functions matched it on 6,600 figures): the capture
bars in tqdm's default format, vLLM's shard and InstantTensor bars in
``_BAR_FORMAT`` (0.33 ``model_loader/weight_utils.py:842``), the rate padded
to five (``f"{rate:5.2f}"``) and the ETA from the rate, as tqdm has them."""

from __future__ import annotations

import pytest

from sparktui.sim.dialects import load
from sparktui.sim.engine_vllm import byte_bar, shard_bar, tqdm_line

CAPTURE = "Capturing CUDA graphs (PIECEWISE)"


@pytest.mark.parametrize("n,total,elapsed,line", [
    (0, 7, 0.0, f"{CAPTURE}:   0%|          | 0/7 [00:00<?, ?it/s]"),
    (3, 7, 1.2, f"{CAPTURE}:  43%|████▎     | 3/7 [00:01<00:01,  2.50it/s]"),
    (40, 67, 9.7, f"{CAPTURE}:  60%|█████▉    | 40/67 [00:09<00:06,  4.12it/s]"),
    (67, 67, 18.0, f"{CAPTURE}: 100%|██████████| 67/67 [00:18<00:00,  3.72it/s]"),
])
def test_capture_bars(n: int, total: int, elapsed: float, line: str) -> None:
    assert tqdm_line(CAPTURE, n, total, elapsed) == line


SHARDS = "Loading safetensors checkpoint shards"


@pytest.mark.parametrize("n,total,elapsed,tail", [
    (3, 8, 7.5, " 38% Completed | 3/8 [00:07<00:12,  2.50s/it]"),
    (3, 8, 1.2, " 38% Completed | 3/8 [00:01<00:02,  2.50it/s]"),
    (8, 8, 2.0, "100% Completed | 8/8 [00:02<00:00,  4.00it/s]"),
    (5, 99, 3600.0, "  5% Completed | 5/99 [1:00:00<18:48:00, 720.00s/it]"),
])
def test_shard_bars(n: int, total: int, elapsed: float, tail: str) -> None:
    assert shard_bar(load("vllm-0.33"), n, total, elapsed) == f"{SHARDS}: {tail}"


def test_instanttensor_bar() -> None:
    assert byte_bar(load("vllm-0.33"), 188e9, 376e9, 1440.0) == (
        "Loading safetensors using InstantTensor loader:  50% Completed | 175G/350G "
        "[24:00<24:00, 131MB/s]")
