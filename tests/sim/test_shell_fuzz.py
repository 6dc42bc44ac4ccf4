"""The shell interpreter never breaks on odd input: it answers like dash or
reports a syntax error, whatever the bytes (hypothesis, in memory, no SSH)."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.sim.fs import NodeFs
from sparktui.sim.shell import BufferSink, Ctx, Shell, ShellEnv, ShellExit, parse


async def _echo_args(ctx: Ctx) -> int:
    ctx.out("|".join(ctx.argv[1:]) + "\n")
    return 0


def run(script: str) -> tuple[int, bytes, bytes]:
    fs = NodeFs()
    for i in range(3):
        fs.add_file(f"/sys/x/gids/{i}", f"{i}\n")
    env = ShellEnv(commands={"args": _echo_args}, glob=fs.glob, home="/home/u")
    out, err = BufferSink(), BufferSink()

    async def go() -> int:
        try:
            return await Shell(env, out, err, None).run(script)
        except ShellExit as e:
            return e.status

    return asyncio.run(go()), bytes(out.data), bytes(err.data)


def test_quoting_and_expansion():
    status, out, _ = run("""args 'a b' "c $? d" e\\ f ~/x /sys/x/gids/* '/sys/x/gids/*'""")
    assert out == b"a b|c 0 d|e f|/home/u/x|/sys/x/gids/0|/sys/x/gids/1|/sys/x/gids/2|" \
                  b"/sys/x/gids/*\n"
    assert status == 0


def test_syntax_errors_like_dash():
    status, _, err = run("echo 'unterminated")
    assert status == 2 and err.startswith(b"sh: 1: Syntax error: ")
    status, _, err = run("&& echo x")
    assert status == 2 and b"Syntax error" in err


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab $?'\"\\;&|><21*~#\n\t-c")), max_size=40))
def test_arbitrary_scripts_never_crash(script):
    status, _, _ = run(script)
    assert 0 <= status <= 255


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12),
                min_size=1, max_size=5))
def test_single_quoted_words_round_trip(words):
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    tree = parse("args " + quoted)
    assert len(tree) == 1
    status, out, _ = run("args " + quoted)
    assert status == 0
    assert out.decode() == "|".join(words) + "\n"
