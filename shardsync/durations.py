"""Durations as external-dns writes them on its command line: Go-style (`1m`, `15s`, `500ms`, `1h30m`).

A bare number means seconds, so `--interval 60` and `--interval 1m` are the same.
"""

from __future__ import annotations

import math
import re

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds in `text`; raises ValueError saying what is wrong (negative values are refused)."""
    s = text.strip()
    if not s:
        raise ValueError("empty duration")
    try:
        value = float(s)
    except ValueError:
        pos = 0
        value = 0.0
        for match in _PART.finditer(s):
            if match.start() != pos:
                break
            value += float(match.group(1)) * _UNITS[match.group(2)]
            pos = match.end()
        if pos != len(s) or pos == 0:
            raise ValueError(f"invalid duration {text!r} (use e.g. 30s, 1m, 500ms, 1h30m)") from None
    if not math.isfinite(value):  # float() reads "nan" and "inf"
        raise ValueError(f"invalid duration {text!r} (use e.g. 30s, 1m, 500ms, 1h30m)")
    if value < 0:
        raise ValueError(f"negative duration {text!r}")
    return value


def format_duration(seconds: float) -> str:
    """The short Go-style form of `seconds` (for help texts and logs)."""
    if seconds and seconds < 1:
        return f"{round(seconds * 1000)}ms"
    whole = int(seconds)
    if whole != seconds:
        return f"{seconds:g}s"
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    out = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")
    return out or "0s"
