"""Text that came from elsewhere (an engine's log, an error body), made safe to
print on a terminal or hand to the systemd journal: no escape sequence, no
control character. vLLM 0.11 colours its process prefix
(``\\x1b[1;36m(APIServer pid=1)\\x1b[0;0m``); a line copied from it into an
alert must not recolour, move the cursor on, or retitle the operator's terminal.
"""

from __future__ import annotations

import re

_SEQUENCES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"           # CSI: colours, cursor moves
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: titles, hyperlinks (BEL or ST ended)
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"    # DCS, SOS, PM, APC
    r"|\x1b[@-Z\\-_]"                      # two-byte escapes
    r"|\x9b[0-?]*[ -/]*[@-~]")             # 8-bit CSI
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_BREAKS = re.compile(r"[\r\n]+")


def strip_controls(text: str) -> str:
    """``text`` without escape sequences and control characters; line breaks
    become one space (one event, one line), tabs stay."""
    if text.isprintable():
        return text
    return _CONTROLS.sub("", _BREAKS.sub(" ", _SEQUENCES.sub("", text)))
