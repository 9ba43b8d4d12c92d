"""A TSIG key as flags give it (key name, secret or the file holding it, algorithm), checked before anything
starts. The rfc2136 provider's `--rfc2136-tsig-*` flags and the pdns provider's fence flags
(`--pdns-fence-tsig-*`) both describe one: `tsig_flags` declares the four flags of a key, `TsigFlags.of`
reads them from the options, and the checks and messages are these, whichever flags gave it.

dnspython is imported only inside `validate`: a replica of another provider never loads it.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field

from shardsync.flags import ConfigError, Flag, mirrored

_PARTS = ("keyname", "secret", "secret_file", "secret_alg")  # each key's fields: `<field>_<part>`


def tsig_flags(field: str, prefix: str, keyname_help: str, *, external_dns: bool) -> tuple[Flag, ...]:
    """The flags `--<prefix>-keyname`, `-secret`, `-secret-file`, `-secret-alg` filling the options fields
    `<field>_keyname` … `<field>_secret_alg`; with `external_dns`, all but the file are external-dns's own."""
    make = mirrored if external_dns else Flag
    return (
        make(f"{field}_keyname", keyname_help, flag=f"{prefix}-keyname"),
        make(
            f"{field}_secret",
            "its secret, base64 (prefer the file or the environment)",
            flag=f"{prefix}-secret",
            secret=True,
        ),
        Flag(f"{field}_secret_file", "file holding that secret", flag=f"{prefix}-secret-file"),
        make(f"{field}_secret_alg", "its TSIG algorithm", flag=f"{prefix}-secret-alg"),
    )


@dataclass(frozen=True, slots=True)
class TsigFlags:
    """The key from flags `--<prefix>-keyname`, `-secret`, `-secret-file`, `-secret-alg`."""

    prefix: str  # e.g. "rfc2136-tsig": the flags' common name, also their environment variables'
    keyname: str = ""
    secret: str = field(default="", repr=False)
    secret_file: str = ""
    algorithm: str = "hmac-sha256"

    @classmethod
    def of(cls, options: object, field: str, prefix: str) -> TsigFlags:
        """The key in the options fields `tsig_flags(field, prefix, …)` fills."""
        keyname, secret, secret_file, algorithm = (str(getattr(options, f"{field}_{p}")) for p in _PARTS)
        return cls(prefix, keyname, secret, secret_file, algorithm)

    def read_secret(self) -> str:
        """The secret from the flag/environment, else read from the file (never logged)."""
        if self.secret:
            return self.secret
        if self.secret_file:
            with open(self.secret_file, encoding="utf-8") as fh:
                return fh.read().strip()
        return ""

    def validate(self) -> None:
        """A bad value is a usage error (ConfigError); a secret file that cannot be read is the
        environment's (OSError, naming the file). No message ever shows the secret itself."""
        from shardsync.providers.rfc2136.messages import TSIG_ALGORITHMS  # dnspython: only when used

        flag = f"--{self.prefix}"
        if self.algorithm.lower().rstrip(".") not in TSIG_ALGORITHMS:
            raise ConfigError(
                f"{flag}-secret-alg={self.algorithm}: not supported; use one of {', '.join(TSIG_ALGORITHMS)}"
            )
        if self.secret and self.secret_file:
            raise ConfigError(f"{flag}-secret and {flag}-secret-file are mutually exclusive")
        if not self.keyname:
            return  # no TSIG: a secret alone is not used (as before and as external-dns)
        if not (self.secret or self.secret_file):
            env = "SHARDSYNC_" + self.prefix.replace("-", "_").upper() + "_SECRET"
            raise ConfigError(
                f"{flag}-keyname={self.keyname} needs its secret: set {flag}-secret "
                f"(or {env}) or {flag}-secret-file"
            )
        try:
            secret = self.read_secret()
        except OSError as exc:
            raise OSError(
                f"{flag}-secret-file={self.secret_file}: cannot read it ({exc.strerror or exc}); "
                "mount the secret there or fix the path"
            ) from None
        try:
            raw = base64.b64decode(secret, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if not raw:
            where = f"-file={self.secret_file}: its" if self.secret_file else ": the"
            raise ConfigError(
                f"{flag}-secret{where} secret is empty or not base64: use the key's secret as "
                'tsig-keygen or dnssec-keygen prints it (e.g. in named.conf\'s `secret "...";`)'
            )
