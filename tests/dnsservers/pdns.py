"""PowerDNS Authoritative 4 as the RFC 2136 test server: `pdns_server` in the foreground (see base.py).

The zones live in a fresh SQLite database (`gsqlite3` backend, Debian's schema) written with Python's
sqlite3 module before the start: one NATIVE domain per zone, the TSIG key in `tsigkeys`, and per zone the
metadata that makes the key required: TSIG-ALLOW-DNSUPDATE (unsigned UPDATEs are REFUSED) and
TSIG-ALLOW-AXFR with `allow-axfr-ips=` empty (unsigned AXFRs are NOTAUTH). SOA-EDIT-DNSUPDATE=INCREASE
bumps the serial by one per UPDATE as BIND and Knot do (PowerDNS's default would jump to a date serial).
Caches are off, so a query sees every write at once and `reset_zone` can rewrite a zone's rows in SQL while
the server runs. A restart keeps the database. `gsqlite3-pragma-synchronous=0`: no fsync per write, tests
do not need durability across a crash. No security polling (nothing leaves loopback).

By default no webserver and no API. With `api=True` (the pdns provider's tests) the server also serves its
HTTP API on `api_url` (127.0.0.1, a free port chosen with the DNS port, kept across restarts) with the key
`api_key`; `start()` then also waits until the API answers. `dnsupdate=yes` stays on either way: the pdns
provider's fence speaks RFC 2136 to the same server. `patch(zone, rrsets)` sends one PATCH of rrsets, and
`external_dns_rrsets` builds them as external-dns's pdns provider does (its ConvertEndpointsToZones, written
out by hand), to seed a zone "external-dns wrote".
"""

from __future__ import annotations

import contextlib
import glob
import http.client
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any, ClassVar

import dns.name
import dns.rdatatype
import dns.zone

from tests.dnsservers.base import READY_TIMEOUT, DnsTestServer, ServerError, find_binary, free_port

PDNS_CANDIDATES = ("/usr/sbin/pdns_server", "/usr/local/sbin/pdns_server")
BACKEND_GLOBS = ("/usr/lib/*/pdns/libgsqlite3backend.so", "/usr/lib/pdns/libgsqlite3backend.so")
SCHEMA = Path("/usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql")
SQL_TIMEOUT = 10.0
PRIO_TYPES = frozenset({"MX", "SRV"})


def owner_txt(owner: str, resource: str) -> str:
    """The TXT registry's content for a record of `owner` made for `resource` (e.g. service/default/web)."""
    return f'"heritage=external-dns,external-dns/owner={owner},external-dns/resource={resource}"'


def external_dns_rrsets(zone: str, records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rrsets external-dns's pdns provider PATCHes to create `records`, each `{"name": relative name or
    "@", "type", "contents": [...], "ttl": (optional, 300 when unset)}`: absolute names, REPLACE, contents
    as given (write host names with their trailing dot, TXT in quotes, as external-dns sends them)."""
    return [
        {
            "name": f"{zone}." if r["name"] == "@" else f"{r['name']}.{zone}.",
            "type": r["type"],
            "ttl": r.get("ttl", 300),
            "changetype": "REPLACE",
            "records": [{"content": c, "disabled": False} for c in r["contents"]],
        }
        for r in records
    ]


def find_pdns() -> str | None:
    return find_binary("pdns_server", PDNS_CANDIDATES)


def find_backend() -> str | None:
    """The gsqlite3 backend module (package pdns-backend-sqlite3), or None."""
    return next((path for pattern in BACKEND_GLOBS for path in sorted(glob.glob(pattern))), None)


class PowerDnsServer(DnsTestServer):
    """One pdns_server process over one SQLite database; see the module docstring."""

    kind: ClassVar[str] = "pdns"
    title: ClassVar[str] = "PowerDNS Authoritative (pdns_server + gsqlite3)"
    packages: ClassVar[tuple[str, ...]] = ("pdns-server", "pdns-backend-sqlite3")

    def __init__(
        self, zones: Iterable[str], *, records: Mapping[str, Iterable[str]] | None = None, api: bool = False
    ) -> None:
        super().__init__(zones, records=records)
        self.api = api
        self.api_key = os.urandom(12).hex()
        self.api_port = 0
        self._api_for_port = 0

    @property
    def api_url(self) -> str:
        """The base URL of the HTTP API (what `--pdns-server` takes)."""
        return f"http://{self.host}:{self.api_port}"

    @classmethod
    def missing(cls) -> list[str]:
        wanted = (
            ("pdns_server", find_pdns()),
            ("the gsqlite3 backend", find_backend()),
            (str(SCHEMA), SCHEMA.is_file()),
        )
        return [name for name, found in wanted if not found]

    @property
    def database(self) -> Path:
        return self.workdir / "pdns.sqlite3"

    def _write_data(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{self.database}{suffix}").unlink(missing_ok=True)
        with closing(sqlite3.connect(self.database, timeout=SQL_TIMEOUT)) as db, db:
            db.executescript(SCHEMA.read_text())
            db.execute(
                "INSERT INTO tsigkeys (name, algorithm, secret) VALUES (?, ?, ?)",
                (self.key_name, self.algorithm, self.secret),
            )
            for zone in self.zones:
                domain_id = db.execute(
                    "INSERT INTO domains (name, type) VALUES (?, 'NATIVE')", (zone,)
                ).lastrowid
                assert domain_id is not None
                db.executemany(
                    "INSERT INTO domainmetadata (domain_id, kind, content) VALUES (?, ?, ?)",
                    [
                        (domain_id, "TSIG-ALLOW-DNSUPDATE", self.key_name),
                        (domain_id, "TSIG-ALLOW-AXFR", self.key_name),
                        (domain_id, "SOA-EDIT-DNSUPDATE", "INCREASE"),
                    ],
                )
                self._insert_records(db, zone, domain_id)

    def _reset_zone(self, zone: str) -> None:
        with closing(sqlite3.connect(self.database, timeout=SQL_TIMEOUT)) as db, db:
            (domain_id,) = db.execute("SELECT id FROM domains WHERE name = ?", (zone,)).fetchone()
            db.execute("DELETE FROM records WHERE domain_id = ?", (domain_id,))
            self._insert_records(db, zone, domain_id)

    def _insert_records(self, db: sqlite3.Connection, zone: str, domain_id: int) -> None:
        """The zone's initial records as rows: names without the final dot, content in PowerDNS's
        presentation form (names without the final dot too). Seeds must not hold delegations: nothing
        here rectifies `auth` below a zone cut."""
        parsed = dns.zone.from_text(self.zone_text(zone), origin=zone + ".", relativize=False)
        rows = []
        for name, node in parsed.nodes.items():
            owner = name.to_text(omit_final_dot=True).lower()
            for rdataset in node.rdatasets:
                rtype = dns.rdatatype.to_text(rdataset.rdtype)
                for rdata in rdataset:
                    content = rdata.to_text(origin=dns.name.root, relativize=True)
                    prio = 0
                    if rtype in PRIO_TYPES:  # the priority has a column of its own
                        first, content = content.split(" ", 1)
                        prio = int(first)
                    rows.append((domain_id, owner, rtype, content, rdataset.ttl, prio))
        db.executemany(
            "INSERT INTO records (domain_id, name, type, content, ttl, prio, disabled, auth) "
            "VALUES (?, ?, ?, ?, ?, ?, 0, 1)",
            rows,
        )

    def patch(self, zone: str, rrsets: Sequence[Mapping[str, Any]]) -> None:
        """One `PATCH .../zones/<zone>` of `rrsets` through the API (AssertionError unless 204)."""
        conn = http.client.HTTPConnection(self.host, self.api_port, timeout=10)
        try:
            conn.request(
                "PATCH",
                f"/api/v1/servers/localhost/zones/{zone}.",
                body=json.dumps({"rrsets": list(rrsets)}),
                headers={"X-API-Key": self.api_key, "Content-Type": "application/json"},
            )
            resp = conn.getresponse()
            assert resp.status == 204, f"PATCH {zone}: {resp.status} {resp.read()[:300]!r}"
        finally:
            conn.close()

    def _spawn_and_wait(self) -> None:
        super()._spawn_and_wait()
        if self.api:
            self._wait_for_api()

    def _wait_for_api(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            with contextlib.suppress(OSError, http.client.HTTPException):
                conn = http.client.HTTPConnection(self.host, self.api_port, timeout=0.5)
                try:
                    conn.request("GET", "/api/v1/servers/localhost", headers={"X-API-Key": self.api_key})
                    if conn.getresponse().status == 200:
                        return
                finally:
                    conn.close()
            if time.monotonic() > deadline:
                raise ServerError(f"pdns API did not answer within {READY_TIMEOUT}s:\n{self.log_tail()}")
            time.sleep(0.02)

    def _command(self) -> list[str]:
        return [find_pdns() or "pdns_server", f"--config-dir={self.workdir}"]

    def _write_conf(self) -> None:
        # A new DNS port (a first start, or a retry after a port clash) takes a new API port; a restart on
        # the same DNS port keeps its API port, so a provider under test finds the API where it was.
        if self.api and self._api_for_port != self.port:
            self.api_port, self._api_for_port = free_port(), self.port
        conf = f"""
launch=gsqlite3
gsqlite3-database={self.database}
gsqlite3-pragma-synchronous=0
local-address=127.0.0.1
local-port={self.port}
socket-dir={self.workdir}
daemon=no
guardian=no
disable-syslog=yes
write-pid=no
security-poll-suffix=
{self._api_conf()}
dnsupdate=yes
allow-dnsupdate-from=127.0.0.0/8
allow-axfr-ips=
cache-ttl=0
query-cache-ttl=0
negquery-cache-ttl=0
"""
        (self.workdir / "pdns.conf").write_text(conf)

    def _api_conf(self) -> str:
        if not self.api:
            return "webserver=no\napi=no"
        return "\n".join(
            (
                "webserver=yes",
                "api=yes",
                f"api-key={self.api_key}",
                "webserver-address=127.0.0.1",
                f"webserver-port={self.api_port}",
                "webserver-allow-from=127.0.0.0/8",
                "webserver-loglevel=none",
            )
        )
