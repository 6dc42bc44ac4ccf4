"""The remote shell: the subset of POSIX sh (dash) that production code sends
(docs/CONTRACTS.md, "Remote shell vocabulary"), answering everything else as
dash does (`sh: 1: NAME: not found`, exit 127)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol


class Sink(Protocol):
    def write(self, data: bytes) -> None: ...


class NullSink:
    def write(self, data: bytes) -> None:
        return None


class BufferSink:
    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data.extend(data)


class ShellExit(Exception):
    """`exit N` ends the whole shell."""

    def __init__(self, status: int) -> None:
        self.status = status


class StdinLike(Protocol):
    async def read(self, n: int = -1) -> bytes: ...


@dataclass
class Ctx:
    """What a command sees: its argv, its output sinks after redirection, stdin."""

    argv: list[str]
    out_sink: Sink
    err_sink: Sink
    stdin: StdinLike | None
    lineno: int
    alive: Callable[[], bool] = lambda: True
    """False once the client has gone (a follower stops then)."""

    def out(self, text: str) -> None:
        self.out_sink.write(text.encode())

    def err(self, text: str) -> None:
        self.err_sink.write(text.encode())


Command = Callable[[Ctx], Awaitable[int]]


class SyntaxErr(Exception):
    pass


# --- words and tokens -------------------------------------------------------

@dataclass
class Word:
    parts: list[tuple[str, bool]] = field(default_factory=list)
    """(text, quoted) pieces; only unquoted pieces take part in globbing and `~`."""

    def add(self, text: str, quoted: bool) -> None:
        self.parts.append((text, quoted))


@dataclass
class Redir:
    fd: int
    op: str
    """``>``, ``>>`` or ``>&``."""
    target: Word | None = None


@dataclass
class Simple:
    words: list[Word] = field(default_factory=list)
    redirs: list[Redir] = field(default_factory=list)


@dataclass
class Pipeline:
    commands: list[Simple]


@dataclass
class AndOr:
    first: Pipeline
    rest: list[tuple[str, Pipeline]]


_REDIR = re.compile(r"(\d?)(>>|>&|>)")
_OPS = ("&&", "||", ";", "|", "&", "\n")


def _tokenize(src: str) -> list[object]:
    """Split into Word, Redir and operator strings. `$?` is kept as a marker
    (expanded at run time); comments run to the end of the line."""
    toks: list[object] = []
    i, n = 0, len(src)
    word: Word | None = None

    def flush() -> None:
        nonlocal word
        if word is not None:
            toks.append(word)
            word = None

    while i < n:
        c = src[i]
        if c in " \t":
            flush()
            i += 1
            continue
        if c == "#" and word is None:
            while i < n and src[i] != "\n":
                i += 1
            continue
        op = next((o for o in _OPS if src.startswith(o, i)), None)
        if op is not None:
            flush()
            toks.append(op)
            i += len(op)
            continue
        m = _REDIR.match(src, i)
        if m and (word is None or (m.group(1) and word.parts == [(m.group(1), False)])):
            if word is not None and m.group(1):
                word = None
            else:
                flush()
            fd = int(m.group(1)) if m.group(1) else 1
            toks.append(Redir(fd, m.group(2)))
            i = m.end()
            continue
        if word is None:
            word = Word()
        if c == "'":
            j = src.find("'", i + 1)
            if j < 0:
                raise SyntaxErr("Unterminated quoted string")
            word.add(src[i + 1 : j], True)
            i = j + 1
        elif c == '"':
            i = _double_quoted(src, i + 1, word)
        elif c == "\\" and i + 1 < n:
            if src[i + 1] != "\n":
                word.add(src[i + 1], True)
            i += 2
        elif c == "$":
            i = _dollar(src, i, word, quoted=False)
        else:
            j = i
            while j < n and src[j] not in " \t'\"\\$;&|\n" and src[j] != ">":
                j += 1
            if j == i:
                j = i + 1
            word.add(src[i:j], False)
            i = j
    flush()
    return toks


def _double_quoted(src: str, i: int, word: Word) -> int:
    buf = []
    while i < len(src):
        c = src[i]
        if c == '"':
            word.add("".join(buf), True)
            return i + 1
        if c == "\\" and i + 1 < len(src) and src[i + 1] in '"\\$`\n':
            buf.append(src[i + 1])
            i += 2
            continue
        if c == "$":
            word.add("".join(buf), True)
            buf = []
            i = _dollar(src, i, word, quoted=True)
            continue
        buf.append(c)
        i += 1
    raise SyntaxErr("Unterminated quoted string")


def _dollar(src: str, i: int, word: Word, *, quoted: bool) -> int:
    m = re.compile(r"\$(\?|[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*\})").match(src, i)
    if not m:
        word.add("$", quoted)
        return i + 1
    name = m.group(1).strip("{}")
    word.add("\0VAR:" + name + "\0", quoted)
    return m.end()


def parse(src: str) -> list[AndOr]:
    toks = _tokenize(src)
    lists: list[AndOr] = []
    pos = 0

    def parse_simple() -> Simple:
        nonlocal pos
        cmd = Simple()
        while pos < len(toks):
            t = toks[pos]
            if isinstance(t, Word):
                cmd.words.append(t)
                pos += 1
            elif isinstance(t, Redir):
                pos += 1
                target = toks[pos] if pos < len(toks) else None
                if not isinstance(target, Word):
                    raise SyntaxErr("redirection unexpected")
                t.target = target
                cmd.redirs.append(t)
                pos += 1
            else:
                break
        return cmd

    def parse_pipeline() -> Pipeline:
        nonlocal pos
        cmds = [parse_simple()]
        while pos < len(toks) and toks[pos] == "|":
            pos += 1
            cmds.append(parse_simple())
        for c in cmds:
            if not c.words and not c.redirs:
                raise SyntaxErr('"|" unexpected')
        return Pipeline(cmds)

    while pos < len(toks):
        if toks[pos] in (";", "\n", "&"):
            if toks[pos] != "\n" and (not lists or pos == 0):
                raise SyntaxErr(f'"{toks[pos]}" unexpected')
            pos += 1
            continue
        if toks[pos] in ("&&", "||", "|"):
            raise SyntaxErr(f'"{toks[pos]}" unexpected')
        first = parse_pipeline()
        rest: list[tuple[str, Pipeline]] = []
        while pos < len(toks) and toks[pos] in ("&&", "||"):
            op = str(toks[pos])
            pos += 1
            while pos < len(toks) and toks[pos] == "\n":
                pos += 1
            rest.append((op, parse_pipeline()))
        lists.append(AndOr(first, rest))
    return lists


def incomplete(src: str) -> bool:
    """True while a line ends inside quotes or after `&&`/`||`/`|` (sh reads on)."""
    try:
        toks = _tokenize(src)
    except SyntaxErr:
        return True
    while toks and toks[-1] == "\n":
        toks.pop()
    return bool(toks) and toks[-1] in ("&&", "||", "|")


# --- execution --------------------------------------------------------------

@dataclass
class ShellEnv:
    commands: dict[str, Command]
    glob: Callable[[str], list[str]]
    home: str
    before_command: Callable[[], Awaitable[None]] | None = None
    """Awaited before every simple command (a thrashing node stalls here)."""
    alive: Callable[[], bool] = lambda: True
    status: int = 0
    lineno: int = 1


class Shell:
    def __init__(self, env: ShellEnv, out: Sink, err: Sink, stdin: StdinLike | None) -> None:
        self.env = env
        self.out = out
        self.err = err
        self.stdin = stdin

    async def run(self, src: str) -> int:
        """Run a script (one or more lines); returns `$?`. Raises ShellExit on `exit`."""
        try:
            lists = parse(src)
        except SyntaxErr as e:
            self.err.write(f"sh: {self.env.lineno}: Syntax error: {e}\n".encode())
            self.env.status = 2
            self.env.lineno += src.count("\n") or 1
            return 2
        for item in lists:
            status = await self._pipeline(item.first)
            for op, pipe in item.rest:
                if (op == "&&") == (status == 0):
                    status = await self._pipeline(pipe)
            self.env.status = status
        self.env.lineno += src.count("\n") or 1
        return self.env.status

    async def _pipeline(self, pipe: Pipeline) -> int:
        if len(pipe.commands) == 1:
            return await self._simple(pipe.commands[0], self.stdin, self.out)
        data: bytes | None = None
        status = 0
        for i, cmd in enumerate(pipe.commands):
            last = i == len(pipe.commands) - 1
            sink: Sink = self.out if last else BufferSink()
            stdin = self.stdin if data is None else _BytesIn(data)
            status = await self._simple(cmd, stdin, sink)
            if isinstance(sink, BufferSink):
                data = bytes(sink.data)
        return status

    def _expand(self, word: Word) -> list[str]:
        text, pattern, globbable = "", "", False
        for piece, quoted in word.parts:
            piece = re.sub(r"\0VAR:([^\0]*)\0", lambda m: self._var(m.group(1)), piece)
            if not quoted and not text and piece.startswith("~") and piece[1:2] in ("", "/"):
                piece = self.env.home + piece[1:]
            text += piece
            if quoted:
                pattern += re.sub(r"([*?\[])", r"[\1]", piece)
            else:
                pattern += piece
                globbable = globbable or any(c in piece for c in "*?[")
        if globbable:
            matches = self.env.glob(pattern)
            if matches:
                return matches
        if not text and all(q is False for _, q in word.parts):
            return []
        return [text]

    def _var(self, name: str) -> str:
        if name == "?":
            return str(self.env.status)
        if name == "HOME":
            return self.env.home
        return ""

    async def _simple(self, cmd: Simple, stdin: StdinLike | None, out: Sink) -> int:
        argv = [a for w in cmd.words for a in self._expand(w)]
        fds: dict[int, Sink] = {1: out, 2: self.err}
        for r in cmd.redirs:
            target = self._expand(r.target) if r.target else []
            tgt = target[0] if target else ""
            if r.op == ">&" and tgt.isdigit() and int(tgt) in fds:
                fds[r.fd] = fds[int(tgt)]
            elif tgt == "/dev/null":
                fds[r.fd] = NullSink()
            else:
                self.err.write(f"sh: {self.env.lineno}: cannot create {tgt}: Permission denied\n"
                               .encode())
                return 2
        if not argv:
            return 0
        if self.env.before_command is not None:
            await self.env.before_command()
        name = argv[0]
        ctx = Ctx(argv, fds[1], fds[2], stdin, self.env.lineno, self.env.alive)
        if name == "exit":
            code = int(argv[1]) if len(argv) > 1 and argv[1].isdigit() else self.env.status
            raise ShellExit(code & 0xFF)
        builtin = _BUILTINS.get(name)
        if builtin is not None:
            return await builtin(ctx)
        command = self.env.commands.get(name)
        if command is None:
            ctx.err(f"sh: {self.env.lineno}: {name}: not found\n")
            return 127
        return await command(ctx)


class _BytesIn:
    def __init__(self, data: bytes) -> None:
        self._data = data

    async def read(self, n: int = -1) -> bytes:
        data, self._data = (self._data, b"") if n < 0 else (self._data[:n], self._data[n:])
        return data


async def _true(ctx: Ctx) -> int:
    return 0


async def _false(ctx: Ctx) -> int:
    return 1


async def _echo(ctx: Ctx) -> int:
    args = ctx.argv[1:]
    newline = True
    if args and args[0] == "-n":
        newline, args = False, args[1:]
    ctx.out(" ".join(args) + ("\n" if newline else ""))
    return 0


_BUILTINS: dict[str, Command] = {":": _true, "true": _true, "false": _false, "echo": _echo}


async def drain(sink: object) -> None:
    """Await a writer's drain when it has one (asyncssh channels do)."""
    fn = getattr(sink, "drain", None)
    if fn is not None:
        await fn()
    else:
        await asyncio.sleep(0)
