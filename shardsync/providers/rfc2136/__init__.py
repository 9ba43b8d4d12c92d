"""The RFC 2136 provider, `--provider=rfc2136`: this module holds its flags and its construction.

The provider itself (AXFR listing, batched UPDATEs, the fence compare-and-set) is provider.py; the pure
message building and parsing under it is messages.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from shardsync.flags import ConfigError, Flag, FlagGroup, duration, mirrored
from shardsync.providers.rfc2136.tsig import TsigFlags, tsig_flags

if TYPE_CHECKING:
    from shardsync.providers.rfc2136.provider import Rfc2136Provider


@dataclass(frozen=True, slots=True)
class Rfc2136Options:
    """The `--rfc2136-*` flags."""

    host: str = ""
    port: int = 53
    zones: tuple[str, ...] = ()
    tsig_keyname: str = ""
    tsig_secret: str = field(default="", repr=False)
    tsig_secret_file: str = ""
    tsig_secret_alg: str = "hmac-sha256"
    min_ttl: float = 0.0
    batch_change_size: int = 50
    timeout: float = 10.0
    # external-dns lists zones by AXFR only with one of these (both default false there); shardsync always
    # does (README, "Differences"): true is what it does, false is refused
    axfr: bool = True
    tsig_axfr: bool = True

    def tsig(self) -> TsigFlags:
        return TsigFlags.of(self, "tsig", "rfc2136-tsig")

    def secret(self) -> str:
        """The TSIG secret from the flag/environment, else read from the file (never logged)."""
        return self.tsig().read_secret()


def _validate(o: Rfc2136Options) -> None:
    if not (o.host and o.zones):
        raise ConfigError("--provider=rfc2136 needs --rfc2136-host and at least one --rfc2136-zone")
    if o.batch_change_size < 1:
        raise ConfigError("--rfc2136-batch-change-size must be at least 1")
    if not 0 < o.port <= 65535:
        raise ConfigError(f"--rfc2136-port={o.port}: not a port (1 to 65535)")
    for name, on in (("--rfc2136-axfr", o.axfr), ("--rfc2136-tsig-axfr", o.tsig_axfr)):
        if not on:
            raise ConfigError(
                f"{name}=false: shardsync cannot run without listing zones by AXFR "
                "(it plans and fences from what is there); drop the flag"
            )
    o.tsig().validate()


FLAGS = FlagGroup(
    "rfc2136",
    "rfc2136 provider (--provider=rfc2136)",
    Rfc2136Options,
    (
        mirrored("host", "DNS server receiving UPDATEs and answering AXFR", flag="rfc2136-host"),
        mirrored("port", "its port", kind=int, flag="rfc2136-port"),
        mirrored("zones", "zone managed on that server (repeatable)", repeat=True, flag="rfc2136-zone"),
        *tsig_flags("tsig", "rfc2136-tsig", "TSIG key name", external_dns=True),
        mirrored(
            "min_ttl", "lowest TTL written (lower ones are raised)", kind=duration, flag="rfc2136-min-ttl"
        ),
        mirrored(
            "batch_change_size", "changes per UPDATE message", kind=int, flag="rfc2136-batch-change-size"
        ),
        Flag("timeout", "timeout of one DNS exchange", kind=duration, flag="rfc2136-timeout"),
        mirrored(
            "axfr",
            "list zones by AXFR, TSIG-signed when a key is set (always on: false is refused)",
            switch=True,
            flag="rfc2136-axfr",
        ),
        mirrored(
            "tsig_axfr",
            "external-dns's older name of --rfc2136-axfr (always on: false is refused)",
            switch=True,
            flag="rfc2136-tsig-axfr",
        ),
    ),
    _validate,
)


def build(options: Rfc2136Options, identity: str) -> Rfc2136Provider:
    """The provider `--provider=rfc2136` and its `--rfc2136-*` flags describe."""
    from shardsync.providers.rfc2136.provider import Rfc2136Provider  # dnspython: only when used

    return Rfc2136Provider(
        options.host,
        options.port,
        options.zones,
        tsig_keyname=options.tsig_keyname,
        tsig_secret=options.secret(),
        tsig_algorithm=options.tsig_secret_alg,
        min_ttl=options.min_ttl,
        batch_change_size=options.batch_change_size,
        timeout=options.timeout,
    )
