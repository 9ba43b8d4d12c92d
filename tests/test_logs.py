"""`--log-format`: logfmt lines (text, the default, as in external-dns) or one JSON object per line."""

from __future__ import annotations

import json
import logging

import pytest

from shardsync import logs
from tests.replica.test_config import FAKE, parse


def _record(**kv: object) -> logging.LogRecord:
    record = logging.LogRecord(
        "shardsync.reconcile.worker", logging.INFO, __file__, 1, "zone synced", None, None
    )
    record.kv = kv
    return record


def test_json_has_the_keys_of_logfmt_one_object_per_line() -> None:
    record = _record(zone="ex.com", changes=3, dry=False, note='a "b"\nc', ratio=float("nan"))
    text = logs.LogfmtFormatter().format(record)
    line = logs.JsonFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert text.startswith("ts=") and " zone=ex.com changes=3 dry=False " in text
    keys = ["ts", "level", "logger", "replica", "event", "zone", "changes", "dry", "note", "ratio"]
    assert list(parsed) == keys
    assert parsed["event"] == "zone synced" and parsed["level"] == "info"
    assert parsed["changes"] == 3 and parsed["dry"] is False and parsed["note"] == 'a "b"\nc'
    assert parsed["ratio"] == "nan"


def test_setup_picks_the_formatter(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    try:
        logs.setup("r-0", "info", "json")
        logs.get_logger("shardsync.test").info("hello", zone="ex.com")
        line = capsys.readouterr().err.strip()
        assert json.loads(line)["replica"] == "r-0" and json.loads(line)["zone"] == "ex.com"
        logs.setup("r-0", "info")
        logs.get_logger("shardsync.test").info("hello")
        assert capsys.readouterr().err.startswith("ts=")
    finally:
        root.handlers[:], root.level = saved, level


def test_flag_default_and_choices() -> None:
    assert parse(FAKE).log_format == "text"
    assert parse(["--log-format=json", *FAKE]).log_format == "json"
    assert parse(FAKE, {"EXTERNAL_DNS_LOG_FORMAT": "json"}).log_format == "json"
    with pytest.raises(SystemExit):
        parse(["--log-format=yaml", *FAKE])
