"""The shell interpreter never breaks on odd input: it answers like dash or
reports a syntax error, whatever the bytes (hypothesis, in memory, no SSH)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from sparktui.core.probe import builtin_cat
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


def _run_with_files(script: str, files: dict[str, str]) -> tuple[int, bytes]:
    fs = NodeFs()
    for path, text in files.items():
        fs.add_file(path, text)
    env = ShellEnv(commands={}, glob=fs.glob, home="/home/u", read_file=fs.read)
    out = BufferSink()

    async def go() -> int:
        try:
            return await Shell(env, out, out, None).run(script)
        except ShellExit as e:
            return e.status

    return asyncio.run(go()), bytes(out.data)


def _dash(script: str, root: Path) -> tuple[int, bytes]:
    done = subprocess.run(["/bin/sh", "-c", script], cwd=root, capture_output=True, timeout=10)
    return done.returncode, done.stdout + done.stderr


_LINE = st.text(st.characters(codec="ascii", exclude_characters="\n\r\0"), max_size=30)


@settings(max_examples=60, deadline=None)
@given(lines=st.lists(_LINE, max_size=6), final_newline=st.booleans())
def test_builtin_cat_reads_a_file_like_dash(tmp_path_factory, lines, final_newline):
    """The probe's fork-free file read (while/read -r/printf with a `<`
    redirection), and a missing file, answer as /bin/sh (dash) does."""
    root = tmp_path_factory.mktemp("files")
    text = "\n".join(lines) + ("\n" if final_newline and lines else "")
    (root / "f").write_text(text)
    for name in ("f", "missing"):
        copy = builtin_cat(str(root / name))
        # the simulator copies the probe's exact loop in one step; the same
        # loop with one more builtin in its body runs line by line
        general = copy.replace('"$l"; done', '"$l"; : ; done')
        assert general != copy
        for loop in (copy, general):
            script = loop + '; echo "@@rc $? [$l]"'
            sim = _run_with_files(script, {str(root / "f"): text})
            real = _dash(script, root)
            assert sim[0] == real[0]
            assert sim[1].replace(b"sh: 1: ", b"") == real[1].replace(b"/bin/sh: 1: ", b""), \
                script


def test_the_fast_probe_parses_the_same_from_dash_and_the_simulator(tmp_path):
    """The whole fast-tier script, run by dash against this machine's /proc
    and by the simulator's shell against a copy of the same files."""
    from sparktui.core.config import NodeConfig
    from sparktui.core.probe import FAST_SECTIONS, parse_probe, probe_script

    node = NodeConfig("n", 0, "h", "u", "127.0.0.1", "switch.n", "test")
    script = probe_script(node, FAST_SECTIONS)
    real = _dash(script, tmp_path)[1].decode()
    files = {}
    for path in ("/proc/meminfo", "/proc/pressure/memory", "/proc/loadavg", "/proc/uptime"):
        with contextlib.suppress(OSError):
            files[path] = Path(path).read_text()
    status, out = _run_with_files(script, files)
    assert status == 0
    mine, theirs = parse_probe(out.decode(), FAST_SECTIONS), parse_probe(real, FAST_SECTIONS)
    assert mine.meminfo is not None and theirs.meminfo is not None
    assert mine.meminfo.total_kib == theirs.meminfo.total_kib
    assert (mine.psi is None) == (theirs.psi is None)
    assert mine.problems == theirs.problems


@settings(max_examples=150, deadline=None)
@example(text="\\700", no_newline=False)  # octal past 0o377: one byte, as dash writes it
@given(text=st.text(st.sampled_from(list("ab01789\\cnt\t ")), max_size=16),
       no_newline=st.booleans())
def test_echo_interprets_backslashes_like_dash(tmp_path_factory, text, no_newline):
    """dash's echo expands XSI escapes (``\\0NNN``, ``\\c``, ``\\n`` ...): a
    line read by the probe's loop and echoed comes out as it would on a node."""
    script = "echo " + ("-n " if no_newline else "") + "'" + text + "'"
    assert _run_with_files(script, {}) == _dash(script, tmp_path_factory.mktemp("echo"))
