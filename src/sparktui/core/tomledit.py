"""Write a value back into a TOML document keeping its comments and layout
(tomlkit round-trip), e.g. to record a measured figure in a recipe."""

from __future__ import annotations

import tomlkit
from tomlkit.items import Table


def set_value(text: str, path: tuple[str, ...], value: str | int | float | bool,
              comment: str = "") -> str:
    """Return `text` with the key at `path` set to `value`, creating tables as
    needed; the key's comment is kept, or replaced by `comment` when given."""
    if not path:
        raise ValueError("empty key path")
    doc = tomlkit.parse(text)
    table: tomlkit.TOMLDocument | Table = doc
    for part in path[:-1]:
        if part not in table:
            table[part] = tomlkit.table()
        nxt = table[part]
        if not isinstance(nxt, Table):
            raise ValueError(f"{'.'.join(path)}: {part} is not a table")
        table = nxt
    key = path[-1]
    old = table.get(key)
    kept = old.trivia.comment if old is not None and hasattr(old, "trivia") else ""
    item = tomlkit.item(value)
    note = comment or kept.lstrip("# ").rstrip()
    if note:
        item.comment(note)
    table[key] = item
    return tomlkit.dumps(doc)
