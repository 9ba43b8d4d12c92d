"""`shardsync shards`: print the assignment and sync state of a deployment, explain a zone, or ask what a
scale would move.

Two sources, one answer. `--url http://HOST:PORT` (or `…/shards`) reads a replica's /shards: the
assignment document it works under (the ConfigMap's: members, weights, slot table, overrides, pins), its
zone list, and the sync state of zones other replicas own from their own /shards where they can be reached
(`shards.gather`; "unknown" where not). Without `--url` the cluster is read directly (`--kubeconfig`,
`--namespace`, `--instance`): the assignment ConfigMap and the member Leases give the same view, minus what
only a replica knows (sync times, records); zones come from `--zones-from-url` (a replica's base URL or its
/shards, or any list), `--fake-provider-url` or `--zones-file` when given.

Either way the view carries the assignment document, and `--explain` and `--what-if-replicas` are computed
from it by the same code (`answer`), so both sources give the same owner and the same count for the same
generation and zones. A replica that serves no assignment (older than the `assignment` key, or running
`--sharding=off` or `--once`) gets a one-line refusal instead of a guess. `--explain` of a name that is not
a managed zone (when the zone list is known) says so, and names the managed zone the name lies in, if any.

Exit status: 0 done, 1 the source could not be read or the input is invalid (a message, never a traceback);
2 for a malformed command line, as argparse does everywhere.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import orjson

from shardsync.flags import count, positive
from shardsync.records.endpoint import name_error, normalize_name
from shardsync.sharding.assignment import Assignment, CorruptAssignment
from shardsync.shards import table
from shardsync.shards.analysis import WhatIfError, explain_zone, what_if_replicas
from shardsync.shards.cluster import ClusterReadError, build_view, read_objects
from shardsync.shards.gather import gather, member_urls
from shardsync.shards.view import InvalidView, ShardsView, parse_view


class ShardsError(Exception):
    """Something the user can fix: printed as `shardsync shards: <message>`, exit status 1."""


def configure(parser: argparse.ArgumentParser) -> None:
    source = parser.add_argument_group("source (a replica's URL, else the cluster)")
    source.add_argument("--url", help="a replica's status address, e.g. http://127.0.0.1:7979 (or …/shards)")
    source.add_argument(
        "--member-url",
        metavar="TEMPLATE",
        help="with --url: another replica's status address, {identity} replaced (e.g. "
        "http://{identity}.shardsync:7979), to read the sync state of its zones; default: the running "
        "`shardsync local`'s replicas",
    )
    source.add_argument(
        "--kubeconfig", default="", help="kubeconfig (default: in-cluster, else ~/.kube/config)"
    )
    source.add_argument("--namespace", default="", help="namespace of the leases (default: the context's)")
    source.add_argument("--instance", default="shardsync", help="instance name (default: shardsync)")
    zones = parser.add_argument_group("zone list for the cluster source")
    zones.add_argument(
        "--zones-from-url",
        help='URL answering {"zones": [...]} (names, or /shards rows) or one zone per line; a replica\'s '
        "base URL reads its /shards",
    )
    zones.add_argument("--fake-provider-url", help="a `shardsync fake-provider` to list zones from")
    zones.add_argument("--zones-file", help="file with one zone per line ('-': standard input)")
    out = parser.add_argument_group("output")
    out.add_argument(
        "-o", "--output", choices=("table", "json"), default="table", help="table (default) or json"
    )
    out.add_argument("--zones", action="store_true", dest="all_zones", help="list every zone, not a summary")
    ask = out.add_mutually_exclusive_group()
    ask.add_argument("--explain", metavar="ZONE", help="why this zone sits where it sits")
    ask.add_argument(
        "--what-if-replicas",
        metavar="N",
        type=count,
        help="how many zones would move if scaled to N replicas",
    )
    out.add_argument("--statefulset", help="StatefulSet name for --what-if-replicas (default: from members)")
    parser.add_argument(
        "--timeout", type=positive, default=5.0, help="seconds to wait for an answer (default 5)"
    )


def main(args: argparse.Namespace) -> int:
    try:
        text = run(args)
    except ShardsError as exc:
        print(f"shardsync shards: {exc}", file=sys.stderr)
        return 1
    print(text)
    return 0


def run(args: argparse.Namespace) -> str:
    """The text to print; ShardsError for anything the user can fix."""
    if args.explain is not None:
        problem = name_error(normalize_name(args.explain))
        if problem is not None:
            raise ShardsError(f"--explain {args.explain!r}: {problem}")
    if args.url:
        view = parse(fetch_json(shards_url(args.url), args.timeout), args.url)
        if args.explain is None and args.what_if_replicas is None:
            urls = member_urls(view, args.url, args.member_url)
            view = gather(view, urls, lambda url: parse(fetch_json(shards_url(url), args.timeout), url))
    else:
        view = from_cluster(args)
    return answer(args, view, args.url or "the cluster")


def answer(args: argparse.Namespace, view: ShardsView, source: str) -> str:
    """The text to print for `view`, whichever source it came from: the view itself, or an explanation or
    a what-if computed from the assignment document it carries over its zone list (None: unknown)."""
    as_json = args.output == "json"
    if args.explain is not None or args.what_if_replicas is not None:
        assignment = assignment_of(view, source)
        zones = [z.zone for z in view.zones] if view.zones_known and view.zones else None
        if args.explain is not None:
            doc = explain_zone(assignment, args.explain)
            managed, note = managed_zone(args.explain, zones, assignment)
            doc["managed"] = managed
            notes = [note] if note else []
            if notes:
                doc["notes"] = notes
            return _dumps(doc) if as_json else _with_notes(table.render_explanation(doc), notes)
        try:
            w = what_if_replicas(assignment, args.what_if_replicas, zones, args.statefulset)
        except WhatIfError as exc:
            raise ShardsError(str(exc)) from None
        if as_json:
            return _dumps(w.to_json())
        survivors = assignment.identities & set(w.members_after)
        return table.render_what_if(w, survivors)
    return _dumps(view.to_json()) if as_json else table.render_view(view, args.all_zones)


def managed_zone(name: str, zones: list[str] | None, assignment: Assignment) -> tuple[bool | None, str]:
    """Whether `name` is a managed zone (None: no zone list to tell), and a note unless it is one."""
    name = normalize_name(name)
    if zones is None:
        return None, (
            f"the zone list is unknown, so whether {name} is a managed zone is not checked "
            "(give --zones-from-url, --fake-provider-url or --zones-file)"
        )
    if name in zones:
        return True, ""
    known = set(zones)
    labels = name.split(".")
    parent = next(
        (".".join(labels[i:]) for i in range(1, len(labels)) if ".".join(labels[i:]) in known), None
    )
    if parent is not None:
        return False, (
            f"{name} is not a managed zone but a name in zone {parent}, which {assignment.owner_of(parent)} "
            "owns; the owner above is where the ring would put a zone of that name"
        )
    return False, (
        f"{name} is not a managed zone (not among the {len(zones)} zones); the owner above is where the "
        "ring would put a zone of that name"
    )


def _dumps(doc: Any) -> str:
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode()


def _with_notes(text: str, notes: list[str]) -> str:
    return text + "".join(f"\nnote: {n}" for n in notes)


# ---- a replica's /shards ---------------------------------------------------------------------------------


def shards_url(url: str) -> str:
    """`http://h:p` or `http://h:p/` → `http://h:p/shards`; a URL already naming a path is kept."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ShardsError(f"{url!r} is not a URL: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ShardsError(f"{url!r} is not an http(s) URL (e.g. http://127.0.0.1:7979)")
    if parsed.path in ("", "/", "/shards/"):
        return str(parsed.copy_with(path="/shards"))
    return url


def fetch_json(url: str, timeout: float) -> Any:
    try:
        resp = httpx.get(url, timeout=timeout)
    except httpx.InvalidURL as exc:
        raise ShardsError(f"{url}: {exc}") from None
    except httpx.HTTPError as exc:
        raise ShardsError(f"cannot reach {url}: {type(exc).__name__}: {exc}") from None
    if resp.status_code != 200:
        raise ShardsError(f"{url} answered {resp.status_code}: {resp.text.strip()[:200]}")
    try:
        return orjson.loads(resp.content)
    except orjson.JSONDecodeError:
        raise ShardsError(f"{url} did not answer JSON") from None


def parse(doc: Any, source: str) -> ShardsView:
    try:
        return parse_view(doc)
    except InvalidView as exc:
        raise ShardsError(f"{source} is not a shardsync /shards answer: {exc}") from None


def assignment_of(view: ShardsView, source: str) -> Assignment:
    """The assignment `view` carries; ShardsError when there is none or it cannot be read, rather than a
    guess (see the module docstring)."""
    if view.assignment is None:
        if view.generation < 1:
            raise ShardsError("no assignment published yet: nothing to explain")
        raise ShardsError(
            f"{source} serves no assignment document (a replica older than this command, or one running "
            "--sharding=off or --once): read the cluster instead (--kubeconfig, --namespace)"
        )
    try:
        return Assignment.from_document(view.assignment)
    except CorruptAssignment as exc:
        raise ShardsError(f"the assignment from {source} cannot be read: {exc}") from None


# ---- the cluster --------------------------------------------------------------------------------------


def from_cluster(args: argparse.Namespace) -> ShardsView:
    from shardsync.kube.client import BlockingKube, kubeconfig_namespace

    try:
        kube = BlockingKube.connect(args.kubeconfig)
    except Exception as exc:  # kubernetes.config raises several types for a missing or broken kubeconfig
        raise ShardsError(f"cannot load the kubeconfig: {exc}") from None
    namespace = args.namespace or os.environ.get("POD_NAMESPACE") or kubeconfig_namespace(args.kubeconfig)
    zones = zone_list(args)
    try:
        objects = read_objects(kube, namespace, args.instance)
        view = build_view(objects, args.instance, datetime.now(UTC), zones)
    except ClusterReadError as exc:
        raise ShardsError(str(exc)) from None
    except CorruptAssignment as exc:
        raise ShardsError(f"the assignment ConfigMap cannot be read: {exc}") from None
    finally:
        kube.close()
    return view


def zone_list(args: argparse.Namespace) -> list[str] | None:
    if args.zones_file:
        return _zones_from_text(_read_file(args.zones_file), args.zones_file)
    url = args.zones_from_url
    if url:
        url = shards_url(url)  # a replica's base URL means its /shards
    if args.fake_provider_url:
        url = args.fake_provider_url.rstrip("/") + "/v1/zones"
    if not url:
        return None
    try:
        resp = httpx.get(url, timeout=args.timeout)
    except httpx.HTTPError as exc:
        raise ShardsError(f"cannot read zones from {url}: {type(exc).__name__}: {exc}") from None
    if resp.status_code != 200:
        raise ShardsError(f"{url} answered {resp.status_code}: {resp.text.strip()[:200]}")
    try:
        doc = orjson.loads(resp.content)
    except orjson.JSONDecodeError:
        return _zones_from_text(resp.text, url)
    return _zones_from_json(doc, url)


def _read_file(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ShardsError(f"cannot read {path}: {exc.strerror or exc}") from None


def _zones_from_json(doc: Any, source: str) -> list[str]:
    entries = doc.get("zones") if isinstance(doc, dict) else doc
    if not isinstance(entries, list):
        raise ShardsError(f'{source}: expected {{"zones": [...]}} or a list')
    names = [e.get("zone") if isinstance(e, dict) else e for e in entries]
    return _checked([n for n in names if n is not None], source)


def _zones_from_text(text: str, source: str) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return _checked([line for line in lines if line], source)


def _checked(names: list[Any], source: str) -> list[str]:
    zones = []
    for name in names:
        if not isinstance(name, str) or name_error(normalize_name(name)) is not None:
            raise ShardsError(f"{source}: {name!r} is not a zone name")
        zones.append(normalize_name(name))
    return zones
