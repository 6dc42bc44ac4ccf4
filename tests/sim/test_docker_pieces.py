"""The simulator's ``docker logs`` prints a line without its newline as docker
does (moby ``daemon/logger/copier.go``: nothing until the newline or 16 KiB
of the line, then 16 KiB pieces, every piece under the first one's stamp,
``:133``, ``:142-150``; json-file stores no newline after a piece but the last,
``jsonfilelog/jsonfilelog.go:133-137``; ``docker logs`` prints every message
with its stamp, ``api/server/httputils/write_log_stream.go:55-62``): the rule
the golden transcripts are rendered with (tests/fixtures/dialects/
build_transcripts.py ``docker_line``), so the sim no longer shows a long tqdm
bar whole at its close."""

from __future__ import annotations

from sparktui.sim.docker import COPIER_BUF, Container
from sparktui.sim.timefmt import rfc3339nano

from .conftest import exec_on, logs_cmd

T0 = 1_800_000_000.0


def redraw(n: int) -> str:
    return f"\rLoading safetensors using InstantTensor: {n // 90:3d}% Completed | {n}/9000 " \
           f"[00:00<09:59, 15.00it/s]"


def container(sim) -> Container:  # type: ignore[no-untyped-def]
    node = sim.nodes["dgx1"]
    img = next(iter(node.docker.images.values()))
    c = Container(id="f" * 64, name="pieces", image=img, image_arg=img.ref, args=["sh"],
                  labels={}, env=[], binds=[], created_t=T0, status="running", started_t=T0)
    node.docker.containers[c.name] = c
    return c


async def test_a_bar_is_logged_in_16_kib_pieces_under_the_first_stamp(sim) -> None:  # type: ignore[no-untyped-def]
    c = container(sim)
    c.log(T0, "Load weight begin. avail mem=119.42 GB", "stderr")
    bar = ""
    first = None
    for k in range(600):
        bar += redraw(15 * k)
        c.write(T0 + 1 + k, redraw(15 * k), "stderr")
        if first is None and len(bar) >= COPIER_BUF:
            first = T0 + 1 + k
    assert first is not None
    head = f"{rfc3339nano(T0)} Load weight begin. avail mem=119.42 GB\n"
    ts = rfc3339nano(first) + " "
    pieces = [bar[i:i + COPIER_BUF] for i in range(0, len(bar) // COPIER_BUF * COPIER_BUF,
                                                   COPIER_BUF)]
    out, _, _ = await exec_on(sim, "dgx1", logs_cmd("pieces"))
    assert out == head + "".join(ts + p for p in pieces)  # no newline: the bar is open
    c.write(T0 + 700, "\n", "stderr")
    c.log(T0 + 701, "Load weight end.", "stderr")
    rest = bar[len(pieces) * COPIER_BUF:]
    out, _, _ = await exec_on(sim, "dgx1", logs_cmd("pieces"))
    assert out == (head + "".join(ts + p for p in pieces) + ts + rest + "\n"
                   + f"{rfc3339nano(T0 + 701)} Load weight end.\n")
    # --since the bar's stamp (inclusive) prints every piece again
    since, _, _ = await exec_on(sim, "dgx1", f"docker logs --since {ts.strip()} --timestamps "
                                "pieces 2>&1")
    assert since == out[len(head):]


async def test_a_short_bar_is_one_line_at_its_close_and_an_exit_flushes_the_held_rest(sim) -> None:  # type: ignore[no-untyped-def]
    c = container(sim)
    for k in range(9):
        c.write(T0 + k, redraw(1000 * k), "stderr")
    out, _, _ = await exec_on(sim, "dgx1", logs_cmd("pieces"))
    assert out == ""  # under 16 KiB and no newline: docker has logged nothing
    c.write(T0 + 9, "\n" + redraw(0), "stderr")
    out, _, _ = await exec_on(sim, "dgx1", logs_cmd("pieces"))
    assert out == rfc3339nano(T0 + 9) + " " + "".join(redraw(1000 * k) for k in range(9)) + "\n"
    c.finish(T0 + 10, 137)  # the process died mid-bar: copier.go's EOF piece, no newline
    out, _, _ = await exec_on(sim, "dgx1", logs_cmd("pieces"))
    assert out.endswith("\n" + rfc3339nano(T0 + 10) + " " + redraw(0))
