"""The service's copies of the recipes, read again when their file changes.

The console's service reads every recipe at its start; serve previews, the
OOM watch's load plan and the canary's ``[readiness] canary`` use those
copies. `sparktui record`, an envelope, a bench and a boot's recorded figures
write a recipe (ops/recipe_record.py swaps a new file in: a new inode), in
this process or another, so a copy is checked against its file (one ``stat``)
each time it is asked for and read again when the file changed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from sparktui.core.config import Config
from sparktui.core.errors import InputError
from sparktui.core.recipe import Recipe
from sparktui.core.recipe_load import load_recipe, recipe_file

log = logging.getLogger(__name__)

FileId = tuple[int, int, int]


class RecipeCopies:
    def __init__(self, config: Config, recipes: Mapping[str, Recipe]) -> None:
        self.config = config
        self.held: dict[str, Recipe] = dict(recipes)
        """Each recipe as last read, by name (updated in place)."""
        self._files = {name: self._file(name) for name in self.held}

    def get(self, name: str) -> Recipe:
        """The recipe as its file says now. A file now invalid or gone keeps the
        copy held (said once in the log); a name never held is loaded (raises
        InputError when there is no such valid recipe)."""
        now = self._file(name)
        held = self.held.get(name)
        if held is not None and now == self._files.get(name):
            return held
        try:
            fresh = load_recipe(self.config, name)
        except InputError as exc:
            if held is None:
                raise
            log.warning("recipe %s changed on disk but does not load (the copy read "
                        "before is used): %s", name, exc)
            self._files[name] = now
            return held
        self.held[name] = fresh
        self._files[name] = now
        return fresh

    def lane(self, name: str) -> Recipe | None:
        """The recipe a lane is named after, as `get`; None when none is."""
        return self.get(name) if name in self.held else None

    def _file(self, name: str) -> FileId | None:
        """(inode, mtime, size) of the recipe's file; None when there is none."""
        try:
            st = recipe_file(self.config.recipes_dir, name).stat()
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size
