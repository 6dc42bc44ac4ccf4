"""Text that came from elsewhere (an engine's log, an error body), made safe to
print on a terminal or hand to the systemd journal: no escape sequence, no
control character. vLLM 0.11 colours its process prefix
(``\\x1b[1;36m(APIServer pid=1)\\x1b[0;0m``); a line copied from it into an
alert must not recolour, move the cursor on, or retitle the operator's terminal.
"""

from __future__ import annotations

import re

_SEQUENCES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"                 # CSI: colours, cursor moves
    r"|\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC: titles, hyperlinks (BEL or ST ended)
    r"|\x1b[PX^_][^\x1b\x9c]*(?:\x1b\\|\x9c)?"   # DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]"                        # the other escapes: ESC ( B, ESC 7, ESC c...
    r"|\x9b[0-?]*[ -/]*[@-~]"                   # 8-bit CSI
    r"|\x9d[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # 8-bit OSC
    r"|[\x90\x98\x9e\x9f][^\x1b\x9c]*(?:\x1b\\|\x9c)?")  # 8-bit DCS, SOS, PM, APC
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f"
                       "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 and C1 controls but tab, and the bidirectional controls that reorder what
a line shows (a "Trojan Source" line reads otherwise than it is)."""
_BREAKS = re.compile(r"[\r\n\x0b\x0c\x85\u2028\u2029]+")
"""Line breaks to a terminal, a journal or a reader of either (one event, one line)."""


def strip_controls(text: str) -> str:
    """``text`` without escape sequences and control characters; line breaks
    become one space (one event, one line), tabs stay."""
    if text.isprintable():
        return text
    return _CONTROLS.sub("", _BREAKS.sub(" ", _SEQUENCES.sub("", text)))
