"""Go-style duration flags."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardsync.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("60", 60.0), ("1m", 60.0), ("15s", 15.0), ("500ms", 0.5), ("1h30m", 5400.0), ("1.5s", 1.5), ("0", 0.0)],
)
def test_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "abc", "1x", "m", "5s3", "-1s", "-5", "1m 2s", "nan", "inf", "-inf"])
def test_parse_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@given(st.integers(min_value=0, max_value=10**6))
def test_format_round_trips(seconds: int) -> None:
    assert parse_duration(format_duration(seconds)) == seconds
