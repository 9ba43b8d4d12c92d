"""`--fqdn-template`: DNS names made from a source object by a Go text/template, as external-dns makes them.

external-dns v0.22.0 (source/template) joins the flag's values with `,`, executes the template on the
Kubernetes object and splits the output at `,`: each piece, trimmed of blanks and of one trailing dot, is a
name (empty pieces dropped, duplicates removed, sorted). shardsync implements the part of Go's template
language such templates use, and refuses the rest at start-up with a one-line error naming what is not
supported (never a template silently rendered differently):

- text outside actions, and actions `{{ ... }}` with Go's `{{-` / `-}}` blank trimming;
- field chains on the object with Go's field names: `.Name`, `.Namespace`, `.Labels.app`,
  `.ObjectMeta.Annotations`, `.Spec.Type`, `.Kind` (ObjectMeta is embedded, as in Go; a field name maps to
  the JSON name: `ClusterIP` → `clusterIP`; a missing map key prints `<no value>` as in Go, a field the
  object does not have prints nothing where Go would stop with an error);
- string literals (`"..."` with Go escapes, or `` `raw` ``);
- Go's `index` (`{{ index .Annotations "team.example/zone" }}`) and external-dns's string functions
  `trimPrefix`, `trimSuffix`, `trim`, `toLower`, `replace`, called with arguments and in pipelines, where
  the piped value is the last argument (`{{ .Name | toLower }}`; `trimPrefix .Name "the-"` is Go's
  strings.TrimPrefix(name, "the-")).

Not supported (refused): `if`/`range`/`with`/`define`/`template`/`block`, variables, parentheses, the other
built-ins (`eq`, `printf`, ...), and external-dns's `contains`, `isIPv4`, `isIPv6`, `isSource`, `hasKey`,
`fromJson`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from shardsync.flags import ConfigError

# Go map fields: after these, a name is a key as written; elsewhere it is a struct field (JSON name).
_MAPS = frozenset({"labels", "annotations", "selector", "nodeSelector"})
_META_FIELDS = frozenset(
    {
        "name",
        "namespace",
        "labels",
        "annotations",
        "uid",
        "generation",
        "resourceVersion",
        "creationTimestamp",
        "deletionTimestamp",
        "generateName",
        "ownerReferences",
        "finalizers",
    }
)
_NO_VALUE = "<no value>"


class _Missing:
    """A map key that is not there (Go prints `<no value>`)."""


MISSING = _Missing()


def _index(container: Any, *keys: Any) -> Any:
    for key in keys:
        if not isinstance(container, Mapping):
            return MISSING
        container = container.get(_show(key), MISSING)
    return container


def _strings(function: Callable[..., str]) -> Callable[..., str]:
    return lambda *args: function(*(_show(a) for a in args))


# name → (number of arguments, function); None: any number from 2 (index).
_FUNCTIONS: dict[str, tuple[int | None, Callable[..., Any]]] = {
    "index": (None, _index),
    "trimPrefix": (2, _strings(lambda s, prefix: s.removeprefix(prefix))),
    "trimSuffix": (2, _strings(lambda s, suffix: s.removesuffix(suffix))),
    "trim": (1, _strings(lambda s: s.strip())),
    "toLower": (1, _strings(lambda s: s.lower())),
    "replace": (3, _strings(lambda old, new, target: target.replace(old, new))),
}
_REFUSED_FUNCTIONS = ("contains", "isIPv4", "isIPv6", "isSource", "hasKey", "fromJson")
_SUPPORTED = "field chains (.Name), string literals, index, trimPrefix, trimSuffix, trim, toLower, replace"

_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.DOTALL)
_TOKEN = re.compile(
    r'\s*(?:(\|)|("(?:[^"\\]|\\.)*")|(`[^`]*`)|((?:\.[A-Za-z_][A-Za-z0-9_]*)+)|([A-Za-z_][\w]*)|(\S))'
)


def _json_name(go_name: str) -> str:
    """A Go field name as its JSON name: the leading capitals lowered (`ClusterIP` → `clusterIP`,
    `UID` → `uid`, `APIVersion` → `apiVersion`)."""
    run = len(go_name) - len(go_name.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    if run == len(go_name):
        return go_name.lower()
    if run > 1:
        run -= 1
    return go_name[:run].lower() + go_name[run:]


def _show(value: Any) -> str:
    """A value as Go's template prints it (fmt's %v, closely enough for names)."""
    if value is None:
        return ""
    if isinstance(value, _Missing):
        return _NO_VALUE
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + " ".join(_show(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "map[" + " ".join(f"{k}:{_show(value[k])}" for k in sorted(value)) + "]"
    return str(value)


@dataclass(frozen=True, slots=True)
class _Field:
    path: tuple[str, ...]  # Go names

    def value(self, obj: Mapping[str, Any], kind: str) -> Any:
        path = list(self.path)
        current: Any = obj
        if path[0] == "ObjectMeta":
            current, path = obj.get("metadata"), path[1:]
        elif path[0] == "Kind":
            current, path = obj.get("kind") or kind, path[1:]
        elif _json_name(path[0]) in _META_FIELDS:
            current = obj.get("metadata")
        in_map = False
        for name in path:
            if not isinstance(current, Mapping):
                return MISSING if in_map else None
            if in_map:
                current, in_map = current.get(name, MISSING), False
            else:
                key = _json_name(name)
                current, in_map = current.get(key), key in _MAPS
        return current


@dataclass(frozen=True, slots=True)
class _Call:
    name: str  # "" for a single operand
    args: tuple[_Field | str, ...]


def _operand(arg: _Field | str, obj: Mapping[str, Any], kind: str) -> Any:
    return arg.value(obj, kind) if isinstance(arg, _Field) else arg


@dataclass(frozen=True, slots=True)
class _Action:
    pipeline: tuple[_Call, ...]

    def render(self, obj: Mapping[str, Any], kind: str) -> str:
        value: Any = None
        for i, call in enumerate(self.pipeline):
            args = [_operand(a, obj, kind) for a in call.args]
            if i:
                args.append(value)
            value = _FUNCTIONS[call.name][1](*args) if call.name else args[0]
        return _show(value)


def _literal(token: str) -> str:
    if token.startswith("`"):
        return token[1:-1]
    try:
        text = json.loads(token)
    except json.JSONDecodeError:
        raise ValueError(f"bad string literal {token}") from None
    return str(text)


def _parse_action(text: str) -> _Action:
    commands: list[list[_Field | str | tuple[str]]] = [[]]
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            break
        pos = m.end()
        pipe, dquoted, raw, field, ident, other = m.groups()
        if pipe:
            commands.append([])
        elif dquoted or raw:
            commands[-1].append(_literal(dquoted or raw))
        elif field:
            commands[-1].append(_Field(tuple(field[1:].split("."))))
        elif ident:
            if ident in _REFUSED_FUNCTIONS:
                raise ValueError(f"function {ident!r} is not supported")
            if ident not in _FUNCTIONS:
                raise ValueError(f"{ident!r} is not supported")
            commands[-1].append((ident,))
        elif other:
            what = {"$": "variables", "(": "parentheses", ".": "'.' alone"}.get(other, repr(other))
            raise ValueError(f"{what} not supported")
    pipeline: list[_Call] = []
    for i, command in enumerate(commands):
        if not command:
            raise ValueError("empty command")
        head = command[0]
        if isinstance(head, tuple):
            name = head[0]
            args = command[1:]
            if any(isinstance(a, tuple) for a in args):
                raise ValueError("a function as an argument is not supported")
            arity = _FUNCTIONS[name][0]
            given = len(args) + (1 if i else 0)
            if (arity is None and given < 2) or (arity is not None and given != arity):
                raise ValueError(f"{name} takes {arity or 'at least 2'} arguments")
            pipeline.append(_Call(name, tuple(a for a in args if not isinstance(a, tuple))))
        else:
            if len(command) != 1 or i:
                raise ValueError("only a function can take arguments or follow '|'")
            pipeline.append(_Call("", (head,)))
    return _Action(tuple(pipeline))


@dataclass(frozen=True, slots=True)
class FqdnTemplate:
    """A parsed `--fqdn-template` (see the module docstring)."""

    parts: tuple[str | _Action, ...]

    @classmethod
    def parse(cls, templates: Sequence[str]) -> FqdnTemplate | None:
        """The flag's values joined with `,` as external-dns joins them; None when blank.

        Raises ConfigError naming what shardsync does not support."""
        joined = ",".join(templates)
        if not joined.strip():
            return None
        return _parse(joined)

    def names(self, obj: Mapping[str, Any], kind: str) -> list[str]:
        """The names the template gives for `obj` (a `kind` object: `.Kind` when the object has none)."""
        out: list[str] = []
        for part in self.parts:
            out.append(part if isinstance(part, str) else part.render(obj, kind))
        names = {n.strip().removesuffix(".") for n in "".join(out).split(",")}
        return sorted(n for n in names if n)


@lru_cache(maxsize=16)
def _parse(joined: str) -> FqdnTemplate:
    parts: list[str | _Action] = []
    pos = 0
    for m in _ACTION.finditer(joined):
        text = joined[pos : m.start()]
        if m.group(1):
            text = text.rstrip()
        parts.append(text)
        body = m.group(2).strip()
        if body.startswith("/*"):
            raise ConfigError(f"--fqdn-template {joined!r}: comments are not supported ({_SUPPORTED})")
        keyword = body.split(None, 1)[0] if body else ""
        if keyword in ("if", "else", "end", "range", "with", "define", "template", "block", "break"):
            raise ConfigError(f"--fqdn-template {joined!r}: '{keyword}' is not supported ({_SUPPORTED})")
        try:
            parts.append(_parse_action(body))
        except ValueError as exc:
            raise ConfigError(f"--fqdn-template {joined!r}: {exc} ({_SUPPORTED})") from None
        pos = m.end()
        if m.group(3):
            rest = joined[pos:]
            pos += len(rest) - len(rest.lstrip())
    tail = joined[pos:]
    if "{{" in tail:
        raise ConfigError(f"--fqdn-template {joined!r}: unclosed action")
    parts.append(tail)
    return FqdnTemplate(tuple(p for p in parts if p != ""))
