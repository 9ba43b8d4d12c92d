"""The PowerDNS provider, `--provider=pdns`: PowerDNS Authoritative's HTTP API, as external-dns's pdns
provider. This module holds its flags (external-dns's names and defaults, and shardsync's own for the
timeout and the fence) and its construction.

- api.py: the three API calls over httpx, each bounded by `--pdns-timeout`;
- rrsets.py: rrsets ↔ endpoints and a plan as one PATCH, byte for byte as external-dns writes them;
- fencing.py: the fence, by RFC 2136 compare-and-swap at the same server or lease-timed;
- tls.py: `--tls-ca`, `--tls-client-cert`, `--tls-client-cert-key`, `--pdns-skip-tls-verify`;
- provider.py: `PdnsProvider`, the Provider protocol over them.
httpx and dnspython are imported by `build` only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from shardsync.flags import ConfigError, Flag, FlagGroup, duration, mirrored
from shardsync.logs import get_logger
from shardsync.providers.pdns.tls import tls_context
from shardsync.providers.rfc2136.tsig import TsigFlags, tsig_flags

if TYPE_CHECKING:
    from shardsync.providers.pdns.provider import PdnsProvider

log = get_logger("shardsync.providers.pdns")


@dataclass(frozen=True, slots=True)
class PdnsOptions:
    """The `--pdns-*` and `--tls-*` flags; external-dns's defaults."""

    server: str = "http://localhost:8081"
    server_id: str = "localhost"
    api_key: str = field(default="", repr=False)
    skip_tls_verify: bool = False
    tls_ca: str = ""
    tls_client_cert: str = ""
    tls_client_cert_key: str = ""
    timeout: float = 10.0
    rfc2136_fence: str = ""  # HOST:PORT of the same server's RFC 2136 (DNS) port; "" = lease-timed
    fence_tsig_keyname: str = ""
    fence_tsig_secret: str = field(default="", repr=False)
    fence_tsig_secret_file: str = ""
    fence_tsig_secret_alg: str = "hmac-sha256"

    def fence_tsig(self) -> TsigFlags:
        return TsigFlags.of(self, "fence_tsig", "pdns-fence-tsig")


def fence_address(value: str) -> tuple[str, int]:
    """`HOST:PORT` (`[v6]:PORT` for an IPv6 address) of `--pdns-rfc2136-fence`; ConfigError otherwise."""
    host, sep, port = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not (sep and host and port.isdigit() and 0 < int(port) <= 65535):
        raise ConfigError(
            f"--pdns-rfc2136-fence={value}: want HOST:PORT, the same server's RFC 2136 (DNS) address, "
            "e.g. 127.0.0.1:53"
        )
    return host, int(port)


def _validate(o: PdnsOptions) -> None:
    if not o.api_key:
        raise ConfigError(
            "--provider=pdns needs the API key: set --pdns-api-key (or SHARDSYNC_PDNS_API_KEY / "
            "EXTERNAL_DNS_PDNS_API_KEY)"
        )
    url = urlsplit(o.server)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ConfigError(f"--pdns-server={o.server}: want the API's URL, e.g. http://127.0.0.1:8081")
    if not o.server_id:
        raise ConfigError("--pdns-server-id must not be empty (PowerDNS's is localhost)")
    if o.timeout <= 0:
        raise ConfigError("--pdns-timeout must be positive")
    if url.scheme == "https":
        tls_context(o.tls_ca, o.tls_client_cert, o.tls_client_cert_key, skip_verify=o.skip_tls_verify)
    if o.rfc2136_fence:
        fence_address(o.rfc2136_fence)
        o.fence_tsig().validate()
    elif o.fence_tsig_keyname:
        raise ConfigError("--pdns-fence-tsig-keyname is for the fence: it needs --pdns-rfc2136-fence")


FLAGS = FlagGroup(
    "pdns",
    "pdns provider (--provider=pdns)",
    PdnsOptions,
    (
        mirrored("server", "URL of the PowerDNS API (its webserver)", flag="pdns-server"),
        mirrored("server_id", "the server id in the API's paths", flag="pdns-server-id"),
        mirrored("api_key", "the API key (prefer the environment)", flag="pdns-api-key", secret=True),
        mirrored(
            "skip_tls_verify",
            "do not verify the API's TLS certificate",
            switch=True,
            flag="pdns-skip-tls-verify",
        ),
        mirrored("tls_ca", "CA file verifying the API's certificate", flag="tls-ca"),
        mirrored("tls_client_cert", "client certificate file for two-way TLS", flag="tls-client-cert"),
        mirrored("tls_client_cert_key", "its key file", flag="tls-client-cert-key"),
        Flag(
            "timeout",
            "bound of one API call (connect to last byte) and of one fence exchange",
            kind=duration,
            flag="pdns-timeout",
        ),
        Flag(
            "rfc2136_fence",
            "HOST:PORT of the same server's RFC 2136 port: each write is fenced there first (default: "
            "none, writes are lease-timed)",
            flag="pdns-rfc2136-fence",
        ),
        *tsig_flags(
            "fence_tsig", "pdns-fence-tsig", "TSIG key name for the fence's UPDATEs", external_dns=False
        ),
    ),
    _validate,
)


def build(options: PdnsOptions, identity: str) -> PdnsProvider:
    """The provider `--provider=pdns` and its flags describe."""
    # httpx and dnspython are imported only when pdns is the provider
    from shardsync.providers.pdns.api import PdnsApi
    from shardsync.providers.pdns.fencing import Fence, LeaseTimed, ServerFence
    from shardsync.providers.pdns.provider import PdnsProvider

    tls = None
    if urlsplit(options.server).scheme == "https":
        tls = tls_context(
            options.tls_ca,
            options.tls_client_cert,
            options.tls_client_cert_key,
            skip_verify=options.skip_tls_verify,
        )
    api = PdnsApi(
        options.server,
        options.server_id,
        options.api_key,
        timeout=options.timeout,
        tls=tls,
        identity=identity,
    )
    fence: Fence = LeaseTimed()
    if options.rfc2136_fence:
        from shardsync.providers.rfc2136.provider import Rfc2136Provider

        host, port = fence_address(options.rfc2136_fence)
        tsig = options.fence_tsig()
        keeper = Rfc2136Provider(
            host,
            port,
            tsig_keyname=tsig.keyname,
            tsig_secret=tsig.read_secret(),
            tsig_algorithm=tsig.algorithm,
            timeout=options.timeout,
        )
        fence = ServerFence(keeper)
    log.info("pdns provider", server=api.base, fence=fence.describe)
    return PdnsProvider(api, fence)
