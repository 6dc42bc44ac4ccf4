"""The remote shell: the subset of POSIX sh (dash) that production code sends
(docs/CONTRACTS.md, "Remote shell vocabulary"), answering everything else as
dash does (`sh: 1: NAME: not found`, exit 127).

Compound commands: ``while``, ``if``/``elif``/``else``, ``case`` and ``{ ...; }``
groups, each with redirections after it (the lane watcher's per-rank I/O read,
watch/lane.io_command, uses all of them); ``${NAME#PATTERN}`` and its ``##``,
``%``, ``%%`` forms; the ``[``/``test`` builtin for the string and file tests
production writes."""

from __future__ import annotations

import asyncio
import fnmatch
import functools
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .fs import EISDIR, ENOENT, FsError

_VAR_REF = re.compile(r"\0VAR:([^\0]*)\0")
_GLOB_CHAR = re.compile(r"([*?\[])")


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
        self.out_sink.write(text.encode("utf-8", "surrogateescape"))

    def err(self, text: str) -> None:
        self.err_sink.write(text.encode("utf-8", "surrogateescape"))


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
    """``>``, ``>>``, ``>&`` or ``<``."""
    target: Word | None = None


@dataclass
class Simple:
    words: list[Word] = field(default_factory=list)
    redirs: list[Redir] = field(default_factory=list)


@dataclass
class While:
    """``while LIST; do LIST; done [REDIR...]`` (how the probe reads a file
    with builtins only)."""

    cond: list[AndOr]
    body: list[AndOr]
    redirs: list[Redir] = field(default_factory=list)


@dataclass
class If:
    """``if LIST; then LIST; [elif LIST; then LIST;]... [else LIST;] fi [REDIR...]``."""

    branches: list[tuple[list[AndOr], list[AndOr]]]
    otherwise: list[AndOr] | None = None
    redirs: list[Redir] = field(default_factory=list)


@dataclass
class Case:
    """``case WORD in [(]PATTERN[|PATTERN]...) LIST ;; ... esac [REDIR...]``."""

    subject: Word
    items: list[tuple[list[Word], list[AndOr]]]
    redirs: list[Redir] = field(default_factory=list)


@dataclass
class Group:
    """``{ LIST; } [REDIR...]``."""

    body: list[AndOr]
    redirs: list[Redir] = field(default_factory=list)


Compound = While | If | Case | Group


@dataclass
class Pipeline:
    commands: list[Simple | Compound]


@dataclass
class AndOr:
    first: Pipeline
    rest: list[tuple[str, Pipeline]]


_REDIR = re.compile(r"(\d?)(>>|>&|>|<)")
_RESERVED = frozenset({"while", "do", "done", "if", "then", "elif", "else", "fi", "case",
                       "esac", "{", "}"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_OPS = ("&&", "||", ";;", ";", "|", "&", "(", ")", "\n")


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
            fd = int(m.group(1)) if m.group(1) else (0 if m.group(2) == "<" else 1)
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
            while j < n and src[j] not in " \t'\"\\$;&|\n<>()":
                j += 1
            if j == i:
                j = i + 1
            word.add(src[i:j], False)
            i = j
    flush()
    return toks


def _double_quoted(src: str, i: int, word: Word) -> int:
    buf: list[str] = []
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


_DOLLAR = re.compile(r"\$(\?|[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*"
                     r"(?:(?:##?|%%?)[^}\0]*)?\})")


def _dollar(src: str, i: int, word: Word, *, quoted: bool) -> int:
    """``$NAME``, ``${NAME}``, ``$?`` and ``${NAME#PATTERN}`` (``##``, ``%``,
    ``%%``: the pattern taken literally apart from ``*``, ``?`` and ``[...]``)."""
    m = _DOLLAR.match(src, i)
    if not m:
        word.add("$", quoted)
        return i + 1
    name = m.group(1).removeprefix("{").removesuffix("}")
    word.add("\0VAR:" + name + "\0", quoted)
    return m.end()


def _literal(tok: object) -> str | None:
    """The text of an unquoted one-piece word (how reserved words are recognised)."""
    if isinstance(tok, Word) and len(tok.parts) == 1 and not tok.parts[0][1]:
        return tok.parts[0][0]
    return None


def parse(src: str) -> tuple[AndOr, ...]:
    """The script's lists. Memoised: a poller sends the same probe script to
    every node every tick, and parsing it was most of the simulator's cost
    (the trees are never changed after parsing, so they can be shared)."""
    return _parse(src)


@functools.lru_cache(maxsize=512)
def _parse(src: str) -> tuple[AndOr, ...]:
    toks = _tokenize(src)
    pos = 0

    def parse_redirs(into: list[Redir]) -> None:
        nonlocal pos
        while pos < len(toks) and isinstance(toks[pos], Redir):
            r = toks[pos]
            assert isinstance(r, Redir)
            pos += 1
            target = toks[pos] if pos < len(toks) else None
            if not isinstance(target, Word):
                raise SyntaxErr("redirection unexpected")
            r.target = target
            into.append(r)
            pos += 1

    def parse_simple() -> Simple:
        nonlocal pos
        cmd = Simple()
        while pos < len(toks):
            t = toks[pos]
            if isinstance(t, Word):
                if not cmd.words and _literal(t) in _RESERVED:
                    break
                cmd.words.append(t)
                pos += 1
            elif isinstance(t, Redir):
                parse_redirs(cmd.redirs)
            else:
                break
        return cmd

    def expect(word: str) -> None:
        nonlocal pos
        if pos >= len(toks) or _literal(toks[pos]) != word:
            found = _literal(toks[pos]) if pos < len(toks) else "end of file"
            raise SyntaxErr(f'"{found}" unexpected (expecting "{word}")')
        pos += 1

    def skip_newlines() -> None:
        nonlocal pos
        while pos < len(toks) and toks[pos] == "\n":
            pos += 1

    def parse_case() -> Case:
        nonlocal pos
        subject = toks[pos] if pos < len(toks) else None
        if not isinstance(subject, Word):
            raise SyntaxErr('"end of file" unexpected (expecting word)' if subject is None
                            else f'"{subject}" unexpected (expecting word)')
        pos += 1
        skip_newlines()
        expect("in")
        items: list[tuple[list[Word], list[AndOr]]] = []
        while True:
            skip_newlines()
            if pos < len(toks) and _literal(toks[pos]) == "esac":
                pos += 1
                return Case(subject, items)
            if pos < len(toks) and toks[pos] == "(":
                pos += 1
            patterns: list[Word] = []
            while True:
                t = toks[pos] if pos < len(toks) else None
                if not isinstance(t, Word):
                    found = "end of file" if t is None else t
                    raise SyntaxErr(f'"{found}" unexpected (expecting ")")')
                patterns.append(t)
                pos += 1
                if pos < len(toks) and toks[pos] == "|":
                    pos += 1
                    continue
                if pos < len(toks) and toks[pos] == ")":
                    pos += 1
                    break
                found = "end of file" if pos >= len(toks) else toks[pos]
                raise SyntaxErr(f'"{found}" unexpected (expecting ")")')
            body = parse_list((";;", "esac"))
            items.append((patterns, body))
            if pos < len(toks) and toks[pos] == ";;":
                pos += 1
            elif pos >= len(toks) or _literal(toks[pos]) != "esac":
                raise SyntaxErr('"end of file" unexpected (expecting ";;")')

    def parse_command() -> Simple | Compound:
        nonlocal pos
        word = _literal(toks[pos]) if pos < len(toks) else None
        cmd: Compound
        if word == "while":
            pos += 1
            cond = parse_list(("do",))
            expect("do")
            body = parse_list(("done",))
            expect("done")
            cmd = While(cond, body)
        elif word == "if":
            pos += 1
            branches = []
            otherwise = None
            while True:
                cond = parse_list(("then",))
                expect("then")
                branches.append((cond, parse_list(("elif", "else", "fi"))))
                if pos < len(toks) and _literal(toks[pos]) == "elif":
                    pos += 1
                    continue
                if pos < len(toks) and _literal(toks[pos]) == "else":
                    pos += 1
                    otherwise = parse_list(("fi",))
                expect("fi")
                break
            cmd = If(branches, otherwise)
        elif word == "case":
            pos += 1
            cmd = parse_case()
        elif word == "{":
            pos += 1
            body = parse_list(("}",))
            expect("}")
            cmd = Group(body)
        else:
            return parse_simple()
        parse_redirs(cmd.redirs)
        return cmd

    def parse_pipeline() -> Pipeline:
        nonlocal pos
        cmds = [parse_command()]
        while pos < len(toks) and toks[pos] == "|":
            pos += 1
            cmds.append(parse_command())
        for c in cmds:
            if isinstance(c, Simple) and not c.words and not c.redirs:
                found = _literal(toks[pos]) if pos < len(toks) else None
                raise SyntaxErr(f'"{found}" unexpected' if found else '"|" unexpected')
        return Pipeline(cmds)

    def parse_list(stop: tuple[str, ...]) -> list[AndOr]:
        nonlocal pos
        lists: list[AndOr] = []
        start = pos
        while pos < len(toks):
            if _literal(toks[pos]) in stop or toks[pos] in stop:
                break
            if toks[pos] in (";", "\n", "&"):
                if toks[pos] != "\n" and (not lists or pos == start):
                    raise SyntaxErr(f'"{toks[pos]}" unexpected')
                pos += 1
                continue
            if toks[pos] in ("&&", "||", "|", ";;", "(", ")"):
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

    return tuple(parse_list(()))


@functools.lru_cache(maxsize=512)
def incomplete(src: str) -> bool:
    """True while a line ends inside quotes or after `&&`/`||`/`|` (sh reads on)."""
    try:
        toks = _tokenize(src)
    except SyntaxErr:
        return True
    while toks and toks[-1] == "\n":
        toks.pop()
    if bool(toks) and toks[-1] in ("&&", "||", "|"):
        return True
    try:
        parse(src)
    except SyntaxErr as e:
        return "end of file" in str(e)  # an open `while` reads on
    return False


# --- execution --------------------------------------------------------------

@dataclass
class ShellEnv:
    commands: dict[str, Command]
    glob: Callable[[str], list[str]]
    home: str
    before_command: Callable[[], Awaitable[None]] | None = None
    """Awaited before every simple command (a thrashing node stalls here)."""
    alive: Callable[[], bool] = lambda: True
    read_file: Callable[[str], str] | None = None
    """The node's files for ``<`` redirections (raises FsError like open(2))."""
    status: int = 0
    lineno: int = 1
    variables: dict[str, str] = field(default_factory=dict)


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
        await self._lists(lists)
        self.env.lineno += src.count("\n") or 1
        return self.env.status

    async def _lists(self, lists: Sequence[AndOr]) -> int:
        for item in lists:
            status = await self._pipeline(item.first)
            for op, pipe in item.rest:
                if (op == "&&") == (status == 0):
                    status = await self._pipeline(pipe)
            self.env.status = status
        return self.env.status

    async def _pipeline(self, pipe: Pipeline) -> int:
        if len(pipe.commands) == 1:
            return await self._command(pipe.commands[0], self.stdin, self.out)
        data: bytes | None = None
        status = 0
        for i, cmd in enumerate(pipe.commands):
            last = i == len(pipe.commands) - 1
            sink: Sink = self.out if last else BufferSink()
            stdin = self.stdin if data is None else _BytesIn(data)
            status = await self._command(cmd, stdin, sink)
            if isinstance(sink, BufferSink):
                data = bytes(sink.data)
        return status

    def _expand(self, word: Word) -> list[str]:
        text, pattern, globbable = "", "", False
        for piece, quoted in word.parts:
            piece = self._vars_in(piece)
            if not quoted and not text and piece.startswith("~") and piece[1:2] in ("", "/"):
                piece = self.env.home + piece[1:]
            text += piece
            if quoted:
                pattern += _GLOB_CHAR.sub(r"[\1]", piece)
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

    def _vars_in(self, piece: str) -> str:
        """``piece`` with its variable references (``\\0VAR:NAME\\0``) expanded."""
        if "\0VAR:" not in piece:
            return piece
        return _VAR_REF.sub(lambda m: self._var(m.group(1)), piece)

    def _var(self, name: str) -> str:
        m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)(##?|%%?)(.*)", name, re.S)
        if m is not None:
            return _trim(self._var(m.group(1)), m.group(2), m.group(3))
        if name == "?":
            return str(self.env.status)
        if name == "HOME":
            return self.env.home
        return self.env.variables.get(name, "")

    def _redirect(self, redirs: list[Redir], stdin: StdinLike | None,
                  out: Sink) -> tuple[StdinLike | None, dict[int, Sink]] | None:
        """Apply redirections left to right; None (error written) when one fails."""
        fds: dict[int, Sink] = {1: out, 2: self.err}
        for r in redirs:
            target = self._expand(r.target) if r.target else []
            tgt = target[0] if target else ""
            if r.op == "<":
                try:
                    text = self.env.read_file(tgt) if self.env.read_file else None
                except FsError as e:
                    text = None
                    reason = "No such file" if e.reason == ENOENT else e.reason
                    fds[2].write(f"sh: {self.env.lineno}: cannot open {tgt}: {reason}\n"
                                 .encode())
                    return None
                if text is None:
                    fds[2].write(f"sh: {self.env.lineno}: cannot open {tgt}: No such file\n"
                                 .encode())
                    return None
                stdin = _BytesIn(text.encode())
            elif r.op == ">&" and tgt.isdigit() and int(tgt) in fds:
                fds[r.fd] = fds[int(tgt)]
            elif tgt == "/dev/null":
                fds[r.fd] = NullSink()
            else:
                fds[2].write(f"sh: {self.env.lineno}: cannot create {tgt}: Permission denied\n"
                             .encode())
                return None
        return stdin, fds

    async def _command(self, cmd: Simple | Compound, stdin: StdinLike | None,
                       out: Sink) -> int:
        if isinstance(cmd, Simple):
            return await self._simple(cmd, stdin, out)
        redirected = self._redirect(cmd.redirs, stdin, out)
        if redirected is None:
            return 2
        inner = Shell(self.env, redirected[1][1], redirected[1][2], redirected[0])
        if isinstance(cmd, Group):
            return await inner._lists(cmd.body) if cmd.body else 0
        if isinstance(cmd, If):
            return await inner._if(cmd)
        if isinstance(cmd, Case):
            return await inner._case(cmd)
        var = _line_copy(cmd)
        if var is not None and isinstance(inner.stdin, _BytesIn):
            return await inner._copy_lines(var)
        status = 0
        while await inner._lists(cmd.cond) == 0:
            status = await inner._lists(cmd.body)
        self.env.status = status
        return status

    async def _if(self, cmd: If) -> int:
        for cond, body in cmd.branches:
            if await self._lists(cond) == 0:
                status = await self._lists(body) if body else 0
                break
        else:
            status = await self._lists(cmd.otherwise) if cmd.otherwise else 0
        self.env.status = status
        return status

    async def _case(self, cmd: Case) -> int:
        subject = "".join(self._expand_plain(cmd.subject))
        status = 0
        for patterns, body in cmd.items:
            if any(fnmatch.fnmatchcase(subject, self._pattern(p)) for p in patterns):
                status = await self._lists(body) if body else 0
                break
        self.env.status = status
        return status

    def _expand_plain(self, word: Word) -> list[str]:
        """A word expanded without globbing (a case subject)."""
        return ["".join(self._vars_in(piece)
                        for piece, _ in word.parts)]

    def _pattern(self, word: Word) -> str:
        """A case pattern for fnmatch: quoted pieces match literally."""
        out = ""
        for piece, quoted in word.parts:
            piece = self._vars_in(piece)
            out += _GLOB_CHAR.sub(r"[\1]", piece) if quoted else piece
        return out

    def _test(self, ctx: Ctx) -> int:
        """``test``/``[``: ``-n``/``-z`` STRING, ``-e``/``-f``/``-d``/``-r`` FILE,
        ``S1 = S2``, ``S1 != S2``, ``! EXPR`` (status 2 and dash's message when
        misused)."""
        args = ctx.argv[1:]
        if ctx.argv[0] == "[":
            if not args or args[-1] != "]":
                ctx.err(f"sh: {ctx.lineno}: [: missing ]\n")
                return 2
            args = args[:-1]
        negate = False
        if len(args) > 1 and args[0] == "!":
            negate, args = True, args[1:]
        if not args:
            result = False
        elif len(args) == 1:
            result = args[0] != ""
        elif len(args) == 2 and args[0] in ("-n", "-z"):
            result = (args[1] != "") == (args[0] == "-n")
        elif len(args) == 2 and args[0] in ("-e", "-f", "-d", "-r"):
            result = self._file_test(args[0], args[1])
        elif len(args) == 3 and args[1] in ("=", "!="):
            result = (args[0] == args[2]) == (args[1] == "=")
        else:
            ctx.err(f"sh: {ctx.lineno}: {ctx.argv[0]}: {args[0]}: unexpected operator\n")
            return 2
        return 0 if result != negate else 1

    def _file_test(self, op: str, path: str) -> bool:
        if self.env.read_file is None:
            return False
        try:
            self.env.read_file(path)
        except FsError as e:
            return e.reason == EISDIR and op in ("-e", "-d", "-r")
        return op != "-d"

    async def _simple(self, cmd: Simple, stdin: StdinLike | None, out: Sink) -> int:
        words = list(cmd.words)
        assignments: dict[str, str] = {}
        while words and (m := _ASSIGNMENT.match(_literal_prefix(words[0]))):
            name = m.group(0)[:-1]
            value = "".join(self._expand(words.pop(0)))[len(name) + 1:]
            assignments[name] = value
        argv = [a for w in words for a in self._expand(w)]
        redirected = self._redirect(cmd.redirs, stdin, out)
        if redirected is None:
            return 2
        stdin, fds = redirected
        if not argv:
            self.env.variables.update(assignments)
            return 0
        if self.env.before_command is not None:
            await self.env.before_command()
        name = argv[0]
        ctx = Ctx(argv, fds[1], fds[2], stdin, self.env.lineno, self.env.alive)
        if name == "exit":
            code = int(argv[1]) if len(argv) > 1 and argv[1].isdigit() else self.env.status
            raise ShellExit(code & 0xFF)
        if name == "read":
            return await self._read(ctx, assignments.get("IFS", " \t\n"))
        if name in ("[", "test"):
            return self._test(ctx)
        builtin = _BUILTINS.get(name)
        if builtin is not None:
            return await builtin(ctx)
        command = self.env.commands.get(name)
        if command is None:
            ctx.err(f"sh: {self.env.lineno}: {name}: not found\n")
            return 127
        return await command(ctx)


    async def _copy_lines(self, var: str) -> int:
        """``while IFS= read -r VAR; do printf '%s\\n' "$VAR"; done`` over a file,
        in one step: the same output, status and ``VAR`` as running the loop
        line by line (test_shell_fuzz checks both against dash), at the cost
        of one command. A thrashing node stalls it once."""
        if self.env.before_command is not None:
            await self.env.before_command()
        assert isinstance(self.stdin, _BytesIn)
        data = await self.stdin.read()
        complete, _, partial = data.rpartition(b"\n")
        if complete or data.startswith(b"\n"):
            self.out.write(complete + b"\n")
        self.env.variables[var] = partial.decode(errors="replace")
        self.env.status = 0
        return 0

    async def _read(self, ctx: Ctx, ifs: str) -> int:
        """``read [-r] NAME...``: one line of stdin into variables (1 at end of file)."""
        args = ctx.argv[1:]
        raw = bool(args) and args[0] == "-r"
        names = args[1:] if raw else args
        if not names:
            ctx.err(f"sh: {ctx.lineno}: read: arg count\n")
            return 2
        readline = getattr(ctx.stdin, "readline", None)
        if readline is None:
            return 1
        line = (await readline()).decode(errors="replace")
        complete = line.endswith("\n")
        line = line.removesuffix("\n")
        if not raw:
            line = re.sub(r"\\(.)", r"\1", line)
        white = "".join(c for c in ifs if c in " \t\n")
        if white:
            line = line.strip(white)
        fields = line.split(None, len(names) - 1) if ifs and white == ifs else [line]
        for i, name in enumerate(names):
            self.env.variables[name] = fields[i] if i < len(fields) else ""
        return 0 if complete else 1


def _trim(value: str, op: str, pattern: str) -> str:
    """``${NAME#P}`` (shortest prefix), ``##`` (longest), ``%`` / ``%%`` (suffix)."""
    cuts = range(len(value) + 1)
    if op in ("#", "##"):
        for i in (reversed(cuts) if op == "##" else cuts):
            if fnmatch.fnmatchcase(value[:i], pattern):
                return value[i:]
    else:
        for i in (cuts if op == "%%" else reversed(cuts)):
            if fnmatch.fnmatchcase(value[i:], pattern):
                return value[:i]
    return value


def _line_copy(loop: While) -> str | None:
    """VAR when ``loop`` is exactly core/probe.COPY_LOOP (its variable may differ)."""
    if len(loop.cond) != 1 or len(loop.body) != 1 or loop.cond[0].rest or loop.body[0].rest:
        return None
    (cond,), (body,) = loop.cond[0].first.commands, loop.body[0].first.commands
    if not isinstance(cond, Simple) or not isinstance(body, Simple) or cond.redirs \
            or body.redirs:
        return None
    words = [_shape(w) for w in cond.words]
    if len(words) != 4 or words[:3] != ["IFS=", "read", "-r"] or not words[3].isidentifier():
        return None
    var = words[3]
    if [_shape(w) for w in body.words] != ["printf", "'%s\\n'", f'"\0VAR:{var}\0"']:
        return None
    return var


def _shape(word: Word) -> str:
    """A word as written: quoted pieces in quotes of their kind (for matching)."""
    out = ""
    for text, quoted in word.parts:
        if not quoted:
            out += text
        elif "\0VAR:" in text or not text:
            out += f'"{text}"' if text else ""
        else:
            out += f"'{text}'"
    return out


def _literal_prefix(word: Word) -> str:
    """The leading unquoted text of a word (where ``NAME=`` of an assignment is)."""
    return word.parts[0][0] if word.parts and not word.parts[0][1] else ""


class _BytesIn:
    def __init__(self, data: bytes) -> None:
        self._data = data

    async def read(self, n: int = -1) -> bytes:
        data, self._data = (self._data, b"") if n < 0 else (self._data[:n], self._data[n:])
        return data

    async def readline(self) -> bytes:
        end = self._data.find(b"\n")
        end = len(self._data) if end < 0 else end + 1
        line, self._data = self._data[:end], self._data[end:]
        return line


async def _true(ctx: Ctx) -> int:
    return 0


async def _false(ctx: Ctx) -> int:
    return 1


_ECHO_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
                 "v": "\v", "\\": "\\"}
_ECHO = re.compile(r"\\(?:(0[0-7]{0,3}|[1-7][0-7]{0,2})|(c)|(.))", re.S)


async def _echo(ctx: Ctx) -> int:
    """dash's ``echo``: ``-n`` only, and XSI backslash escapes (``\\0NNN`` and
    ``\\NNN`` octal, one byte each; ``\\c`` ends the output)."""
    args = ctx.argv[1:]
    newline = True
    if args and args[0] == "-n":
        newline, args = False, args[1:]
    text = " ".join(args)
    out: list[bytes] = []
    pos = 0
    for m in _ECHO.finditer(text):
        out.append(text[pos:m.start()].encode())
        pos = m.end()
        octal, c, other = m.groups()
        if c:
            ctx.out_sink.write(b"".join(out))
            return 0
        if other is not None:
            out.append(_ECHO_ESCAPES.get(other, m.group(0)).encode())
        else:
            out.append(bytes([int(octal, 8) & 0xFF]))
    out.append((text[pos:] + ("\n" if newline else "")).encode())
    ctx.out_sink.write(b"".join(out))
    return 0


_PRINTF_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", "a": "\a", "r": "\r"}
_PRINTF = re.compile(r"%([sd%])|\\(.)")


async def _printf(ctx: Ctx) -> int:
    """``printf FORMAT [ARG...]`` with ``%s``, ``%d``, ``%%`` and backslash
    escapes; the format is reused while arguments remain (POSIX)."""
    if len(ctx.argv) < 2:
        ctx.err("printf: usage: printf format [arg ...]\n")
        return 2
    fmt, args = ctx.argv[1], ctx.argv[2:]
    out: list[str] = []
    while True:
        used = 0
        pos = 0
        for m in _PRINTF.finditer(fmt):
            out.append(fmt[pos:m.start()])
            pos = m.end()
            if m.group(2) is not None:
                out.append(_PRINTF_ESCAPES.get(m.group(2), "\\" + m.group(2)))
            elif m.group(1) == "%":
                out.append("%")
            else:
                value = args[used] if used < len(args) else ""
                used += 1
                if m.group(1) == "d":
                    value = str(int(value)) if value.lstrip("-").isdigit() else "0"
                out.append(value)
        out.append(fmt[pos:])
        args = args[used:]
        if not args or not used:
            break
    ctx.out("".join(out))
    return 0


_BUILTINS: dict[str, Command] = {":": _true, "true": _true, "false": _false, "echo": _echo,
                                 "printf": _printf}


async def drain(sink: object) -> None:
    """Await a writer's drain when it has one (asyncssh channels do)."""
    fn = getattr(sink, "drain", None)
    if fn is not None:
        await fn()
    else:
        await asyncio.sleep(0)
