"""The RFC 2136 provider: lists a zone by AXFR and writes it by DNS UPDATE, both over TCP and TSIG-signed.

Works with any server that speaks RFC 2136 (tested against BIND 9). Behaviour follows external-dns's
rfc2136 provider where a user could tell the difference:

- Listing: one Endpoint per (name, type) RRset of A, AAAA, CNAME, TXT, SRV, MX, NS, PTR, with all targets
  and the RRset's TTL. SOA is never listed or written. The apex NS RRset is listed, as external-dns lists
  it; it is only ever changed if a desired endpoint (and the TXT registry's ownership) says so, and the
  server itself refuses to delete the last apex NS record.
- TTL written: the endpoint's TTL, else `default_ttl`; raised to `min_ttl` (`--rfc2136-min-ttl`).
  external-dns writes `--rfc2136-min-ttl` (default 0 s) for an endpoint without a TTL, so `default_ttl`
  defaults to 0 to match; it is not 300 as in the AWS or Google providers.
- Writes: `batch_change_size` changes per UPDATE message (`--rfc2136-batch-change-size`, default 50);
  deletes remove exactly the listed records, an update removes the old records and adds the new ones.
  Unlike external-dns, batches never use UDP, and a change that cannot be written (name outside the zone,
  bad target) is skipped while the rest applies, then reported by `RecordsRejectedError`.

Fencing (design §2 rule 8): the fence is the TXT RRset `<fence_prefix>.<zone>` holding one
`FenceToken.to_text()`. `acquire_fence` replaces it by a compare-and-set UPDATE (prerequisite: the RRset is
exactly what was read, or absent), and with a token every `apply` message carries the prerequisite "the
fence is exactly this token", so a stale owner's write is refused by the server (NXRRSET → FencedError).

Blocking dnspython calls run in worker threads, each bounded by `timeout` (a zone transfer by
`transfer_lifetime` overall). Cancelling a write waits for the message in flight (at most `timeout`), so
its outcome is settled before the caller moves on; cancelling a read returns at once. The TSIG secret is
never logged or put in an error message.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable

import dns.exception
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdataclass
import dns.rdataset
import dns.rdatatype
import dns.rrset
import dns.tsig
import dns.xfr

from shardsync.logs import get_logger
from shardsync.providers.base import (
    FENCE_LABEL,
    FencedError,
    FenceToken,
    ProviderError,
    RecordsRejectedError,
    UnreachableError,
)
from shardsync.providers.fence_record import FENCE_TTL, FenceMoved, acquire_by_swap, refused_by_fence
from shardsync.providers.request_metrics import request_metrics
from shardsync.providers.rfc2136.messages import (
    UpdateBatch,
    UpdateBuilder,
    absolute,
    endpoints_from_rrsets,
    fence_rdata,
    fence_update,
    make_tsig_key,
    newest_token,
    update_message,
)
from shardsync.providers.worker_threads import WorkerThreads
from shardsync.records.endpoint import Changes, Endpoint, normalize_name

# The package's name, the one it logged under as a single module: log lines keep their logger=.
log = get_logger("shardsync.providers.rfc2136")

REQUESTS, REQUEST_SECONDS = request_metrics(
    "rfc2136",
    "DNS messages exchanged with the RFC 2136 server, by operation (update, axfr, query) and result",
    "Duration of one exchange with the RFC 2136 server (a whole transfer for axfr)",
)

# Prerequisite failures: with a fence in the message, they mean the fence is no longer ours.
_PREREQ_FAILURES = {dns.rcode.NXRRSET, dns.rcode.YXRRSET, dns.rcode.NXDOMAIN, dns.rcode.YXDOMAIN}


class Rfc2136Provider:
    """Zones on one RFC 2136 server, read by AXFR and written by UPDATE (see the module docstring)."""

    name = "rfc2136"

    def __init__(
        self,
        host: str,
        port: int = 53,
        zones: Iterable[str] = (),
        *,
        tsig_keyname: str = "",
        tsig_secret: str = "",
        tsig_algorithm: str = "hmac-sha256",
        min_ttl: float = 0,
        default_ttl: int = 0,
        batch_change_size: int = 50,
        timeout: float = 10.0,
        transfer_lifetime: float = 300.0,
        fence_prefix: str = FENCE_LABEL,
        fence_ttl: int = FENCE_TTL,
        max_in_flight: int = 16,
    ) -> None:
        if batch_change_size < 1:
            raise ValueError("batch_change_size must be at least 1")
        if timeout <= 0 or transfer_lifetime <= 0:
            raise ValueError("timeouts must be positive")
        self.host = host
        self.port = int(port)
        self._zones = sorted({normalize_name(z) for z in zones})
        # No key name means unsigned messages (external-dns's --rfc2136-insecure); servers usually refuse.
        self._key = make_tsig_key(tsig_keyname, tsig_secret, tsig_algorithm) if tsig_keyname else None
        self.min_ttl = math.ceil(min_ttl)
        self.default_ttl = int(default_ttl)
        self.batch_change_size = int(batch_change_size)
        self.timeout = float(timeout)
        self.transfer_lifetime = float(transfer_lifetime)
        self.fence_prefix = normalize_name(fence_prefix)
        self.fence_ttl = int(fence_ttl)
        self._threads = WorkerThreads(max_in_flight)
        if self._key is None:
            log.warning("rfc2136 without TSIG: messages are unsigned", server=self._server)

    # -- the Provider protocol ----------------------------------------------------------------------------

    async def zones(self) -> list[str]:
        return list(self._zones)

    async def records(self, zone: str) -> list[Endpoint]:
        zone = self._zone(zone)
        rrsets = await self._threads.run(lambda: self._transfer(zone), abandon_on_cancel=True)
        return endpoints_from_rrsets(zone, rrsets, skip=[self.fence_name(zone)])

    async def apply(self, zone: str, changes: Changes, fence: FenceToken | None = None) -> None:
        zone = self._zone(zone)
        builder = UpdateBuilder(
            zone,
            key=self._key,
            ttl_of=self.ttl_of,
            batch_size=self.batch_change_size,
            reserved=[self.fence_name(zone)],
        )
        try:
            batches, rejected = builder.build(changes, (self.fence_name(zone), fence) if fence else None)
        except ValueError as exc:
            raise ProviderError(f"zone {zone}: {exc}") from exc
        for rej in rejected:
            log.warning("rfc2136 change skipped", zone=zone, record=rej.endpoint.dns_name, reason=rej.reason)
        started = time.monotonic()
        for i, batch in enumerate(batches):
            await self._send_batch(zone, batch, fence, i, len(batches))
        if batches:
            log.debug(
                "rfc2136 changes applied",
                zone=zone,
                changes=sum(b.changes for b in batches),
                messages=len(batches),
                seconds=round(time.monotonic() - started, 3),
            )
        if rejected:
            raise RecordsRejectedError(zone, rejected)

    async def acquire_fence(self, zone: str, token: FenceToken) -> None:
        zone = self._zone(zone)

        async def read() -> tuple[dns.rdataset.Rdataset | None, FenceToken | None, bool]:
            current = await self._read_fence_rdataset(zone)
            return current, newest_token(current), current is not None and len(current) == 1

        async def swap(current: dns.rdataset.Rdataset | None) -> None:
            await self._compare_and_set(zone, current, token)

        await acquire_by_swap(log, "rfc2136", zone, token, read, swap)

    async def close(self) -> None:
        """Nothing to release: every exchange opens and closes its own connection."""

    # -- fence helpers (public for callers and tests) -----------------------------------------------------

    def fence_name(self, zone: str) -> str:
        return f"{self.fence_prefix}.{normalize_name(zone)}"

    async def read_fence(self, zone: str) -> FenceToken | None:
        """The newest token the zone's fence holds, or None when there is none."""
        return newest_token(await self._read_fence_rdataset(self._zone(zone)))

    async def compare_and_set_fence(self, zone: str, expected: FenceToken | None, token: FenceToken) -> None:
        """Replace the fence with `token` only if it holds exactly `expected` (None: no fence at all).

        The primitive under `acquire_fence`, without its re-reads: of several callers passing the same
        `expected`, exactly one succeeds and the others get FencedError.
        """
        zone = self._zone(zone)
        rdataset = None if expected is None else dns.rdataset.from_rdata_list(0, [fence_rdata(expected)])
        try:
            await self._compare_and_set(zone, rdataset, token)
        except FenceMoved as exc:
            was = expected.to_text() if expected else "absent"
            raise FencedError(f"zone {zone}: the fence is no longer {was}") from exc

    async def check_fence(self, zone: str, token: FenceToken) -> None:
        """FencedError unless the zone's fence holds exactly `token`: one UPDATE carrying only that
        prerequisite, which the server checks and then applies nothing (for a writer whose own writes do not
        go through this server's UPDATEs, such as the pdns provider's HTTP API)."""
        zone = self._zone(zone)
        message = update_message(absolute(zone), self._key, (self.fence_name(zone), token))
        await self._send_batch(zone, UpdateBatch(message, ["fence check"]), token, 0, 1)

    def ttl_of(self, endpoint: Endpoint) -> int:
        """The TTL written for an endpoint: its own, else the default, never below the minimum."""
        return max(endpoint.ttl if endpoint.ttl > 0 else self.default_ttl, self.min_ttl)

    # -- internals ------------------------------------------------------------------------------------------

    @property
    def _server(self) -> str:
        return f"{self.host}:{self.port}"

    def _zone(self, zone: str) -> str:
        canonical = normalize_name(zone)
        if self._zones and canonical not in self._zones:
            raise ProviderError(f"zone {canonical!r} is not configured for rfc2136 ({self._server})")
        return canonical

    async def _send_batch(
        self, zone: str, batch: UpdateBatch, fence: FenceToken | None, index: int, total: int
    ) -> None:
        response = await self._threads.run(lambda: self._exchange("update", zone, batch.message))
        rcode = response.rcode()
        if rcode == dns.rcode.NOERROR:
            REQUESTS.labels("update", "ok").inc()
            return
        if fence is not None and rcode in _PREREQ_FAILURES:
            REQUESTS.labels("update", "fenced").inc()
            answer = dns.rcode.to_text(rcode)
            raise refused_by_fence(
                log, "rfc2136", zone, fence, index, total, answer=answer, unit="message(s)"
            )
        REQUESTS.labels("update", "refused" if rcode == dns.rcode.REFUSED else "error").inc()
        if rcode == dns.rcode.NOTZONE:
            raise ProviderError(
                f"zone {zone}: server answered NOTZONE: a name is outside the zone in: {batch.describe()}"
            )
        raise self._rcode_error("UPDATE", zone, rcode)

    async def _read_fence_rdataset(self, zone: str) -> dns.rdataset.Rdataset | None:
        name = absolute(self.fence_name(zone))
        query = dns.message.make_query(name, dns.rdatatype.TXT)
        if self._key is not None:
            query.use_tsig(self._key)
        response = await self._threads.run(
            lambda: self._exchange("query", zone, query), abandon_on_cancel=True
        )
        rcode = response.rcode()
        if rcode not in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN):
            REQUESTS.labels("query", "error").inc()
            raise self._rcode_error("fence query", zone, rcode)
        REQUESTS.labels("query", "ok").inc()
        try:
            return response.find_rrset(response.answer, name, dns.rdataclass.IN, dns.rdatatype.TXT)
        except KeyError:
            return None

    async def _compare_and_set(
        self, zone: str, expected: dns.rdataset.Rdataset | None, token: FenceToken
    ) -> None:
        message = fence_update(
            zone, self.fence_name(zone), expected, token, key=self._key, ttl=self.fence_ttl
        )
        response = await self._threads.run(lambda: self._exchange("update", zone, message))
        rcode = response.rcode()
        if rcode == dns.rcode.NOERROR:
            REQUESTS.labels("update", "ok").inc()
            return
        if rcode in _PREREQ_FAILURES:
            REQUESTS.labels("update", "fenced").inc()
            raise FenceMoved(dns.rcode.to_text(rcode))
        REQUESTS.labels("update", "error").inc()
        raise self._rcode_error("fence UPDATE", zone, rcode)

    def _rcode_error(self, what: str, zone: str, rcode: dns.rcode.Rcode) -> ProviderError:
        text = dns.rcode.to_text(rcode)
        key = f"key {self._key.name.to_text(omit_final_dot=True)!r}" if self._key else "no TSIG key"
        if rcode == dns.rcode.REFUSED:
            hint = f"the server does not allow it with {key} (allow-update / allow-transfer)"
        elif rcode == dns.rcode.NOTAUTH:
            hint = f"the server is not authoritative for the zone, or rejected {key}"
        elif rcode == dns.rcode.SERVFAIL:
            hint = "server failure; it may pass"
        else:
            hint = "unexpected answer"
        return ProviderError(f"{what} of zone {zone} at {self._server}: {text}: {hint}")

    # The two functions below run in worker threads: blocking I/O and CPU-heavy parsing stay off the loop.

    def _exchange(self, operation: str, zone: str, message: dns.message.Message) -> dns.message.Message:
        """Send one message over TCP and return the (verified) answer; errors mapped to ProviderErrors."""
        started = time.monotonic()
        try:
            return dns.query.tcp(message, self.host, timeout=self.timeout, port=self.port)
        except Exception as exc:
            raise self._map_error(operation, zone, exc) from exc
        finally:
            REQUEST_SECONDS.labels(operation).observe(time.monotonic() - started)

    def _transfer(self, zone: str) -> list[dns.rrset.RRset]:
        started = time.monotonic()
        keyring = {self._key.name: self._key} if self._key is not None else None
        out: list[dns.rrset.RRset] = []
        try:
            for message in dns.query.xfr(
                self.host,
                absolute(zone),
                port=self.port,
                timeout=self.timeout,
                lifetime=self.transfer_lifetime,
                keyring=keyring,
                keyname=self._key.name if self._key is not None else None,
                keyalgorithm=self._key.algorithm if self._key is not None else dns.tsig.default_algorithm,
                relativize=False,
            ):
                out.extend(message.answer)
        except dns.xfr.TransferError as exc:
            REQUESTS.labels("axfr", "refused" if exc.rcode == dns.rcode.REFUSED else "error").inc()
            raise self._rcode_error("AXFR", zone, exc.rcode) from exc
        except Exception as exc:
            raise self._map_error("axfr", zone, exc) from exc
        finally:
            REQUEST_SECONDS.labels("axfr").observe(time.monotonic() - started)
        REQUESTS.labels("axfr", "ok").inc()
        return out

    def _map_error(self, operation: str, zone: str, exc: Exception) -> Exception:
        where = f"{operation} of zone {zone} at {self._server}"
        key = repr(self._key.name.to_text(omit_final_dot=True)) if self._key else "(none)"
        mapped: ProviderError
        if isinstance(exc, dns.exception.Timeout):
            mapped = UnreachableError(f"{where}: no answer within {self.timeout:g}s")
        elif isinstance(exc, (OSError, EOFError)):
            # Connection refused or reset, no route, or the server closed the connection mid-answer.
            mapped = UnreachableError(f"{where}: {type(exc).__name__}: {exc}")
        elif isinstance(exc, dns.tsig.PeerBadKey):
            mapped = ProviderError(f"{where}: the server does not know TSIG key {key} (BADKEY)")
        elif isinstance(exc, dns.tsig.PeerBadSignature):
            mapped = ProviderError(
                f"{where}: the server rejected the signature of TSIG key {key}: "
                "wrong secret or algorithm (BADSIG)"
            )
        elif isinstance(exc, dns.tsig.PeerBadTime):
            mapped = ProviderError(
                f"{where}: the server rejected the TSIG time: clocks too far apart (BADTIME)"
            )
        elif isinstance(exc, (dns.tsig.PeerError, dns.tsig.BadSignature, dns.message.UnknownTSIGKey)):
            mapped = ProviderError(f"{where}: TSIG failure with key {key}: {type(exc).__name__}")
        elif isinstance(exc, dns.exception.TooBig):
            mapped = ProviderError(f"{where}: message too big; lower --rfc2136-batch-change-size")
        elif isinstance(exc, dns.exception.DNSException):
            mapped = ProviderError(f"{where}: {type(exc).__name__}: {exc}")
        else:
            return exc  # a programming error: not ours to translate, re-raised as it is
        result = "unreachable" if isinstance(mapped, UnreachableError) else "error"
        REQUESTS.labels(operation, result).inc()
        return mapped
