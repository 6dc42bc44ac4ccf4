"""A node's file tree as far as the remote shell can see it: directories,
symbolic links, and files whose content is computed when read (/proc)."""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Content = str | Callable[[], str]


class FsError(Exception):
    """A path operation failed the way the real call would (ENOENT, EINVAL...)."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


ENOENT = "No such file or directory"
EINVAL = "Invalid argument"
EISDIR = "Is a directory"


@dataclass(frozen=True, slots=True)
class Entry:
    kind: str
    """``dir``, ``file`` or ``link``."""
    content: Content = ""
    target: str = ""
    read_error: str = ""
    """When set, reading the file fails with this reason (sysfs GID types of unused slots)."""


class NodeFs:
    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {"/": Entry("dir")}

    def add_dir(self, path: str) -> None:
        path = posixpath.normpath(path)
        parent = posixpath.dirname(path)
        if parent != path and parent not in self._entries:
            self.add_dir(parent)
        self._entries[path] = Entry("dir")

    def add_file(self, path: str, content: Content = "", *, read_error: str = "") -> None:
        path = posixpath.normpath(path)
        parent = posixpath.dirname(path)
        if (e := self._entries.get(parent)) is None or e.kind != "dir":  # else: as it was
            self.add_dir(parent)
        self._entries[path] = Entry("file", content=content, read_error=read_error)

    def add_table(self, directory: str, files: Sequence[tuple[str, Entry]]) -> None:
        """Many files of one directory at once (a sysfs table: hundreds of slots
        per device). Entries are immutable, so equal slots share one."""
        directory = posixpath.normpath(directory)
        self.add_dir(directory)
        prefix = directory.rstrip("/") + "/"
        self._entries.update((prefix + name, entry) for name, entry in files)

    def add_link(self, path: str, target: str) -> None:
        path = posixpath.normpath(path)
        self.add_dir(posixpath.dirname(path))
        self._entries[path] = Entry("link", target=target)

    def remove(self, path: str) -> None:
        """Remove a path and everything below it."""
        path = posixpath.normpath(path)
        prefix = path.rstrip("/") + "/"
        for p in [p for p in self._entries if p == path or p.startswith(prefix)]:
            del self._entries[p]

    def lentry(self, path: str) -> Entry | None:
        """The entry at `path` without following a final symlink (parents are followed)."""
        path = posixpath.normpath(path)
        parent, base = posixpath.split(path)
        if path == "/":
            return self._entries["/"]
        real_parent = self.resolve(parent)
        if real_parent is None:
            return None
        return self._entries.get(posixpath.join(real_parent, base))

    def resolve(self, path: str, _depth: int = 0) -> str | None:
        """Follow every symlink in `path`; None when a component does not exist."""
        if _depth > 40:
            return None
        path = posixpath.normpath(path)
        parts = [p for p in path.split("/") if p]
        cur = "/"
        for i, part in enumerate(parts):
            nxt = posixpath.join(cur, part)
            entry = self._entries.get(nxt)
            if entry is None:
                return None
            if entry.kind == "link":
                target = posixpath.join(cur, entry.target)
                rest = "/".join(parts[i + 1 :])
                return self.resolve(posixpath.join(target, rest) if rest else target, _depth + 1)
            cur = nxt
        return cur

    def entry(self, path: str) -> Entry | None:
        real = self.resolve(path)
        return None if real is None else self._entries.get(real)

    def exists(self, path: str) -> bool:
        return self.entry(path) is not None

    def is_dir(self, path: str) -> bool:
        e = self.entry(path)
        return e is not None and e.kind == "dir"

    def read(self, path: str) -> str:
        e = self.entry(path)
        if e is None:
            raise FsError(path, ENOENT)
        if e.kind == "dir":
            raise FsError(path, EISDIR)
        if e.read_error:
            raise FsError(path, e.read_error)
        return e.content() if callable(e.content) else e.content

    def listdir(self, path: str) -> list[str]:
        real = self.resolve(path)
        if real is None:
            return []
        prefix = real.rstrip("/") + "/"
        return sorted(
            p[len(prefix) :]
            for p in self._entries
            if p.startswith(prefix) and "/" not in p[len(prefix) :] and p != real
        )

    def glob(self, pattern: str) -> list[str]:
        """Expand a shell glob (`*`, `?`, `[...]`) the way sh does: sorted matches,
        hidden names only for patterns starting with a dot."""
        if not pattern.startswith("/"):
            return []
        parts = [p for p in pattern.split("/") if p]
        paths = ["/"]
        for part in parts:
            nxt: list[str] = []
            for base in paths:
                if not any(c in part for c in "*?["):
                    cand = posixpath.join(base, part)
                    if self.lentry(cand) is not None:
                        nxt.append(cand)
                    continue
                for name in self.listdir(base):
                    if name.startswith(".") and not part.startswith("."):
                        continue
                    if fnmatch.fnmatchcase(name, part):
                        nxt.append(posixpath.join(base, name))
            paths = nxt
        return sorted(paths)
