"""The Textual console: the app, its screens and widgets.

Textual reads its frame rate once, when it is first imported (``TEXTUAL_FPS``,
``textual.constants.MAX_FPS``). The console and the demo import this package
before textual (cli/console_cmd.py, cli/demo_cmd.py), so the console's rate is
set here, unless the operator set one."""

import os

FRAMES_PER_S = 120
"""Textual paces a screen's frames with a timer that, after a frame which ran
past the next tick, waits for the tick after next (``Timer._run`` with
``skip``): at 60 a second a key pressed during a flood waited 17-33 ms for its
frame behind a long one. At 120 that wait halves. Frames are drawn only when
something changed, so an idle console draws no more; in an incident at 80x24
key-to-paint p99 went 53-65 -> 39-44 ms (bench/bench_tui.py --incident)."""

os.environ.setdefault("TEXTUAL_FPS", str(FRAMES_PER_S))
