"""How a part of shardsync declares its command-line flags: `Flag`s filling the fields of an options value.

A `FlagGroup` is one part's flags (the core flags of `shardsync run`, one provider's, one source kind's)
and the frozen dataclass they fill; the group's defaults are that dataclass's field defaults, so each
default is defined once. `shardsync.replica.config` turns every group into argparse arguments with environment
variables (`SHARDSYNC_<FLAG>`, `EXTERNAL_DNS_<FLAG>`) and builds each group's options value; the part
that declared the group receives its own options value and never reads the others'. The value parsers
(`duration`, `boolean`, `count`, `port`, `non_negative`, `positive`) and `ConfigError` live here too, so
a part can validate its own options and every command's flags refuse a bad value in one line.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from shardsync.durations import format_duration, parse_duration

T = TypeVar("T")


class ConfigError(ValueError):
    """A flag value that cannot work; the message names the flag."""


def duration(text: str) -> float:
    """A Go-style duration (`90s`, `1m30s`, `250ms`) or plain seconds, as argparse's `type=`."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def count(text: str) -> int:
    """A whole number, 0 or more, as argparse's `type=`."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def port(text: str) -> int:
    """A TCP port, 0 (any free one) to 65535, as argparse's `type=`."""
    value = count(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, got {value}")
    return value


def non_negative(text: str) -> float:
    """A finite number, 0 or more (a rate where 0 means none), as argparse's `type=`."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number, 0 or more, got {text!r}")
    return value


def positive(text: str) -> float:
    """A finite number above 0 (seconds to wait), as argparse's `type=`."""
    value = non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text!r}")
    return value


def boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


@dataclass(frozen=True, slots=True)
class Flag:
    """One command-line flag filling the options field `name`."""

    name: str  # the field of the group's options value
    help: str
    kind: Callable[[str], Any] = str
    repeat: bool = False  # may be given several times; a tuple of values
    switch: bool = False  # a boolean flag: --x, --x=true/false, --no-x
    choices: Sequence[str] | None = None
    flag: str = ""  # the command-line name (without `--`) when it differs from the field's
    external_dns: str = ""  # the external-dns flag this one mirrors (same meaning), "" if none
    secret: bool = False  # never shown, logged or echoed back

    @property
    def option(self) -> str:
        return "--" + (self.flag or self.name.replace("_", "-"))

    @property
    def env_suffix(self) -> str:
        """`<FLAG>` of the environment variables `SHARDSYNC_<FLAG>` and `EXTERNAL_DNS_<FLAG>`."""
        return (self.flag or self.name).replace("-", "_").upper()

    def show(self, value: Any) -> str:
        """A value as the user writes it on the command line (durations as `1m0s`, lists comma-separated)."""
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, tuple):
            return ",".join(str(v) for v in value)
        if self.kind is duration and isinstance(value, int | float):
            return format_duration(float(value))
        return str(value)


def mirrored(name: str, help: str, **options: Any) -> Flag:
    """A flag with external-dns's own name and meaning: its `external_dns` is its own option."""
    flag = Flag(name, help, **options)
    return dataclasses.replace(flag, external_dns=flag.option)


def _no_check(options: Any) -> None:
    return None


@dataclass(frozen=True, slots=True)
class FlagGroup(Generic[T]):
    """The flags of one part and the frozen dataclass they fill (see the module docstring)."""

    name: str  # unique among the groups; the key of the options value in Settings
    title: str  # the heading of the group in `--help`
    options: type[T]
    flags: tuple[Flag, ...]
    validate: Callable[[T], None] = _no_check  # raises ConfigError naming the flag

    def __post_init__(self) -> None:
        fields = {f.name for f in dataclasses.fields(self.options)}  # type: ignore[arg-type]
        unknown = [flag.name for flag in self.flags if flag.name not in fields]
        if unknown:
            raise TypeError(f"flag group {self.name}: no options field for {', '.join(unknown)}")

    def default(self, flag: Flag) -> Any:
        """The flag's default: the options dataclass's default for its field."""
        return getattr(self.options(), flag.name)

    def build(self, values: dict[str, Any]) -> T:
        """The options value from parsed flag values (fields without a flag keep their defaults)."""
        options = self.options(**values)
        self.validate(options)
        return options
