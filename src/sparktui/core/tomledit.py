"""Write a value back into a TOML document keeping its comments and layout
(tomlkit round-trip), e.g. to record a measured figure in a recipe."""

from __future__ import annotations

import tomlkit
from tomlkit.items import Table


def set_value(text: str, path: tuple[str, ...], value: str | int | float | bool) -> str:
    """Return `text` with the key at `path` set to `value`, creating tables as needed."""
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
    if key in table:
        item = table[key]
        comment = item.trivia.comment if hasattr(item, "trivia") else ""
        table[key] = value
        if comment:
            table[key].comment(comment.lstrip("# ").rstrip())
    else:
        table[key] = value
    return tomlkit.dumps(doc)
