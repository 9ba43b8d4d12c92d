"""The wire format of external-dns's webhook provider protocol as shardsync speaks it, and of shardsync's
fence extension (README.md, "Webhook fence extension", is the specification a webhook author reads): the
names, values and status codes the client (client.py) and the server (server.py, which the fake provider's
webhook face is built on) share, so each is spelled once.

The extension in one paragraph: a server advertises it by answering `GET /` with the header
`X-Shardsync-Fence: 1`. shardsync then takes a zone's fence with `POST /shardsync/fence` carrying
`X-Shardsync-Fence: <zone> <token>` (a compare-and-set: refused when the zone's stored token is another
one of the same or a newer generation), and sends the same header with every `POST /records` of that zone
(applied only while the stored token is exactly that one). A refusal is 409 or 412; a fenced write the
server applied is answered with `X-Shardsync-Fence: 1` again, which tells the client the fence was checked.
"""

from __future__ import annotations

from collections.abc import Mapping

from shardsync.providers.base import FenceToken
from shardsync.records.endpoint import normalize_name

MEDIA_TYPE = "application/external.dns.webhook+json;version=1"

FENCE_HEADER = "X-Shardsync-Fence"
FENCE_VERSION = "1"  # the extension's version: a server lists the versions it speaks, comma-separated
FENCE_PATH = "/shardsync/fence"
FENCED_STATUSES = frozenset({409, 412})  # what a server answers a stale token with (either)


def same_media_type(value: str) -> bool:
    return value.replace(" ", "").lower() == MEDIA_TYPE


def accepts_media_type(accept: str | None) -> bool:
    """Whether a request's `Accept` admits the protocol's media type: absent, naming it, or a wildcard that
    covers it (`*/*`, `application/*`); a quality parameter is ignored."""
    if not accept or not accept.strip():
        return True
    for item in accept.split(","):
        kept = ";".join(p for p in item.split(";") if not p.strip().lower().startswith("q="))
        if same_media_type(kept) or kept.strip().lower() in ("*/*", "application/*"):
            return True
    return False


def speaks_fence(headers: Mapping[str, str]) -> bool:
    """Whether an answer carries the extension's header naming this version: the `GET /` that advertises
    it, or the answer to a fenced write that says the fence was checked."""
    return FENCE_VERSION in {v.strip() for v in headers.get(FENCE_HEADER, "").split(",")}


def fence_value(zone: str, token: FenceToken) -> str:
    """The request header's value: `<zone> identity=<identity>,generation=<generation>`."""
    return f"{normalize_name(zone)} {token.to_text()}"


def parse_fence_value(value: str) -> tuple[str, FenceToken]:
    """The zone and token of a request header's value (ValueError when it is not one)."""
    zone, _, text = value.strip().partition(" ")
    if not zone or not text.strip():
        raise ValueError(f"{FENCE_HEADER}: want '<zone> identity=<id>,generation=<n>', got {value!r}")
    return normalize_name(zone), FenceToken.from_text(text.strip())
