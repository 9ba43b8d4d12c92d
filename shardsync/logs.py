"""Structured logging: one line per event, `key=value` pairs, with the replica identity on every line.

Call `setup(identity=..., level=..., fmt=...)` once at start-up, then log through `get_logger(__name__)`:
`log.info("zone synced", zone=z, generation=g, changes=3)`. Values with spaces or quotes are quoted so a
line stays machine-parseable (logfmt, `--log-format=text`). `--log-format=json` (external-dns's flag)
writes the same keys as one JSON object per line; numbers and booleans stay JSON numbers and booleans.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from typing import Any

_identity = "-"


def _quote(value: object) -> str:
    text = str(value)
    if text == "" or any(c in text for c in ' ="\n\t'):
        text = '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return text


LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("debug", "info", "warning", "error")  # every command's --log-level


def _fields(formatter: logging.Formatter, record: logging.LogRecord) -> dict[str, Any]:
    """A record's keys, in order: ts, level, logger, replica, event, the call's fields, error."""
    ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    fields: dict[str, Any] = {
        "ts": f"{ts}.{int(record.msecs):03d}Z",
        "level": record.levelname.lower(),
        "logger": record.name,
        "replica": _identity,
        "event": record.getMessage(),
    }
    fields.update(getattr(record, "kv", {}))
    if record.exc_info:
        fields["error"] = formatter.formatException(record.exc_info).splitlines()[-1]
    return fields


class LogfmtFormatter(logging.Formatter):
    """Renders a record as `ts=… level=… logger=… replica=… event="…" k=v …`."""

    def format(self, record: logging.LogRecord) -> str:
        return " ".join(f"{k}={_quote(v)}" for k, v in _fields(self, record).items())


def _json_value(value: object) -> object:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    return str(value)


class JsonFormatter(logging.Formatter):
    """Renders a record as one JSON object with the keys LogfmtFormatter writes."""

    def format(self, record: logging.LogRecord) -> str:
        fields = {k: _json_value(v) for k, v in _fields(self, record).items()}
        return json.dumps(fields, ensure_ascii=False, allow_nan=False, default=str)


class KVLogger:
    """A thin wrapper over `logging.Logger` that takes fields as keyword arguments."""

    __slots__ = ("_log",)

    def __init__(self, name: str) -> None:
        self._log = logging.getLogger(name)

    @property
    def name(self) -> str:
        return self._log.name

    def debug_enabled(self) -> bool:
        """Whether debug lines are written: a caller skips building the fields of lines nobody reads."""
        return self._log.isEnabledFor(logging.DEBUG)

    def _emit(self, level: int, event: str, exc_info: bool, fields: dict[str, Any]) -> None:
        if self._log.isEnabledFor(level):
            self._log.log(level, event, extra={"kv": fields}, exc_info=exc_info, stacklevel=3)

    def debug(self, event: str, **fields: Any) -> None:
        self._emit(logging.DEBUG, event, False, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._emit(logging.INFO, event, False, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._emit(logging.WARNING, event, False, fields)

    def error(self, event: str, exc_info: bool = False, **fields: Any) -> None:
        self._emit(logging.ERROR, event, exc_info, fields)


def get_logger(name: str) -> KVLogger:
    return KVLogger(name)


def setup(identity: str = "-", level: str = "info", fmt: str = "text") -> None:
    """Send shardsync's logs to stderr, as logfmt (`text`) or `json`; quieten the kubernetes client."""
    global _identity
    _identity = identity
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # the Azure SDK logs every request and response, headers and all, at INFO
    for noisy in ("kubernetes", "httpx", "httpcore", "azure"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # urllib3 warns of each retry and each discarded connection; the callers log their failures once.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
