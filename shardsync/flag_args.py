"""`Flag`s (shardsync.flags) as argparse arguments, each also set by its environment variables: how every
command that takes flag groups declares and reads them (`shardsync run`: shardsync.replica.config; `shardsync
webhook-server`: providers/webhook/command.py).

Every flag can come from the environment: `SHARDSYNC_<FLAG>` (upper case, `-` → `_`), or external-dns's own
`EXTERNAL_DNS_<FLAG>` for a migrating user; a flag on the command line wins. Repeatable flags take a
comma-separated list from the environment. An environment value is parsed like the flag's (type and
choices) but, unlike a flag, an unparsable one is not argparse's to report: it is kept as the flag's
default (`FromEnv`) and reported by `group_values` as a ConfigError naming the variable — only when the
command line does not set the flag itself. `with_origin` names the variable in a later check's message.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shardsync.flags import ConfigError, Flag, FlagGroup, boolean


def all_flags(groups: Sequence[FlagGroup[Any]]) -> list[tuple[FlagGroup[Any], Flag]]:
    """Every flag once, with the first group declaring it: a flag several groups declare alike
    (external-dns's `--zone-id-filter`, which every cloud provider reads) is one command-line flag whose
    value each of those groups receives."""
    first: dict[str, tuple[FlagGroup[Any], Flag]] = {}
    for group in groups:
        for flag in group.flags:
            if flag.option not in first:
                first[flag.option] = (group, flag)
            else:
                _check_shared(first[flag.option], (group, flag))
    return list(first.values())


def _check_shared(a: tuple[FlagGroup[Any], Flag], b: tuple[FlagGroup[Any], Flag]) -> None:
    """Two groups may declare one flag only alike: same kind of value and the same default."""
    (group_a, flag_a), (group_b, flag_b) = a, b
    same = (flag_a.kind, flag_a.repeat, flag_a.switch, flag_a.choices, flag_a.secret) == (
        flag_b.kind,
        flag_b.repeat,
        flag_b.switch,
        flag_b.choices,
        flag_b.secret,
    )
    if not same or group_a.default(flag_a) != group_b.default(flag_b):
        raise TypeError(f"{flag_a.option}: declared differently by {group_a.name} and {group_b.name}")


def env_entry(flag: Flag, env: Mapping[str, str]) -> tuple[str, str] | None:
    """The environment variable that sets `flag` and its value (SHARDSYNC_ first), if any."""
    for key in (f"SHARDSYNC_{flag.env_suffix}", f"EXTERNAL_DNS_{flag.env_suffix}"):
        if key in env:
            return key, env[key]
    return None


def env_value(flag: Flag, env: Mapping[str, str]) -> str | None:
    entry = env_entry(flag, env)
    return entry[1] if entry is not None else None


@dataclass(frozen=True, slots=True)
class FromEnv:
    """A flag's default taken from the environment variable `key`: its parsed `value`, or the `error` that
    parsing it gave. argparse leaves a non-string default as it is, so a flag still holding one after
    parsing was not given on the command line."""

    key: str
    value: Any = None
    error: str = ""


def _kind_error(kind: Callable[[str], Any], exc: Exception) -> str:
    if kind is int:  # int()'s own message names Python, not the user's mistake
        return "expected a whole number"
    if kind is float:
        return "expected a number"
    return str(exc)


def _from_env(flag: Flag, key: str, raw: str, kind: Callable[[str], Any]) -> FromEnv:
    """The environment's value `raw` parsed as the flag's would be (a repeatable flag's: a comma-separated
    list, each item parsed)."""
    items = [v.strip() for v in raw.split(",") if v.strip()] if flag.repeat else [raw]
    shown = f"{key}={raw}" if not flag.secret else key  # a secret is never echoed back
    parsed = []
    for item in items:
        which = f"{item!r}: " if flag.repeat else ""
        try:
            value = kind(item)
        except (argparse.ArgumentTypeError, ValueError, TypeError) as exc:
            return FromEnv(key, error=f"{shown}: {which}{_kind_error(kind, exc)}")
        if flag.choices is not None and value not in flag.choices:
            return FromEnv(key, error=f"{shown}: {which}not one of {', '.join(map(str, flag.choices))}")
        parsed.append(value)
    return FromEnv(key, value=parsed if flag.repeat else parsed[0])


def _help(group: FlagGroup[Any], flag: Flag) -> str:
    """external-dns's help style: the text, the default as it is written on the command line, and the
    environment variables that set the flag."""
    default = group.default(flag)
    notes = []
    if "(default:" not in flag.help and default not in ("", ()) and not flag.secret:
        notes.append(f"default: {flag.show(default)}")
    notes.append(f"env: SHARDSYNC_{flag.env_suffix} or EXTERNAL_DNS_{flag.env_suffix}")
    text = f"{flag.help} ({'; '.join(notes)})"
    return text.replace("%", "%%")  # argparse formats help with %: `%{record_type}` is text


def declare(
    parser: argparse.ArgumentParser,
    groups: Sequence[FlagGroup[Any]],
    env: Mapping[str, str] | None = None,
    top: FlagGroup[Any] | None = None,
) -> None:
    """Declare every flag of `groups` on `parser`, with defaults taken from the environment; `top`'s on the
    parser itself, each other group's under its title. A flag several groups share is declared with the
    first of them (`all_flags`)."""
    env = os.environ if env is None else env
    declared = {(group.name, flag.option) for group, flag in all_flags(groups)}
    for group in groups:
        section = parser if group is top else parser.add_argument_group(group.title)
        for flag in group.flags:
            if (group.name, flag.option) in declared:
                _add(section, group, flag, env, top)


def _dest(group: FlagGroup[Any], flag: Flag, top: FlagGroup[Any] | None) -> str:
    # The command's own flags are kept under their field's name (`args.log_level`); another group's under
    # its option's name, so a flag several groups share has one value.
    return flag.name if group is top else "flag." + flag.option[2:]


def _add(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    group: FlagGroup[Any],
    flag: Flag,
    env: Mapping[str, str],
    top: FlagGroup[Any] | None,
) -> None:
    default = group.default(flag)
    entry = env_entry(flag, env)
    dest, help_text = _dest(group, flag, top), _help(group, flag)
    if flag.switch:
        parser.add_argument(
            flag.option,
            dest=dest,
            nargs="?",
            const=True,
            type=boolean,
            default=_from_env(flag, *entry, boolean) if entry is not None else default,
            help=help_text,
            metavar="true|false",
        )
        parser.add_argument(
            "--no-" + flag.option[2:], dest=dest, action="store_false", help=argparse.SUPPRESS
        )
    elif flag.repeat:
        env_list = _from_env(flag, *entry, flag.kind) if entry is not None else None
        parser.add_argument(
            flag.option,
            dest=dest,
            action="append",
            type=flag.kind,
            choices=flag.choices,
            default=None,
            help=help_text,
            metavar=None if flag.choices else flag.env_suffix.replace("_", "-"),
        )
        parser.set_defaults(**{f"_env_{dest}": env_list})
    else:
        parser.add_argument(
            flag.option,
            dest=dest,
            type=flag.kind,
            choices=flag.choices,
            default=_from_env(flag, *entry, flag.kind) if entry is not None else default,
            help=help_text,
            metavar=None if flag.choices else flag.env_suffix.replace("_", "-"),
        )


def group_values(
    args: argparse.Namespace,
    group: FlagGroup[Any],
    origins: dict[str, str],
    top: FlagGroup[Any] | None = None,
) -> dict[str, Any]:
    """The group's values from the parsed flags; `origins` gets option -> variable for each value that
    came from the environment. ConfigError naming the variable for an environment value that does not
    parse."""
    values: dict[str, Any] = {}
    for flag in group.flags:
        dest = _dest(group, flag, top)
        value = getattr(args, dest)
        if flag.repeat and value is None:
            value = getattr(args, f"_env_{dest}", None)
        if isinstance(value, FromEnv):
            if value.error:
                raise ConfigError(value.error)
            origins[flag.option] = value.key
            value = value.value
        if flag.repeat:
            value = tuple(value) if value is not None else group.default(flag)
            if flag.kind is str.upper:
                value = tuple(v.upper() for v in value)
        values[flag.name] = value
    return values


def with_origin(message: str, origins: Mapping[str, str]) -> str:
    """`message` naming the environment variable its flag's value came from, if it did."""
    for option, key in origins.items():
        if message.startswith((f"{option} ", f"{option}:", f"{option}=")):
            return f"{message} (from {key})"
    return message
