"""Log signatures: one ordered table turning an engine, container or kernel
log line into (kind, severity, boot phase, captured fields).

Split by what it holds: the table and the types it speaks in (``table``),
the classifier that runs it on every line, with its prefix stripping,
prefilter and route memo (``route``), and the values fields hold
(``parse``). Callers import from here.
"""

from sparktui.core.logsig.parse import parse_float, parse_int, parse_mib, parse_timestamp
from sparktui.core.logsig.route import (
    BORING,
    ROUTE_KEY_MAX,
    Shape,
    classify,
    clean,
    message_of,
    split_timestamp,
    strip_prefixes,
)
from sparktui.core.logsig.table import (
    BOOT_ORDER,
    SIGNATURES,
    Kind,
    LogEvent,
    Phase,
    Severity,
    container_exit,
)

__all__ = [
    "BOOT_ORDER", "BORING", "ROUTE_KEY_MAX", "SIGNATURES", "Kind", "LogEvent", "Phase",
    "Severity", "Shape", "classify", "clean", "container_exit", "message_of", "parse_float",
    "parse_int", "parse_mib", "parse_timestamp", "split_timestamp", "strip_prefixes",
]
