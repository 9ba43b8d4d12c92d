"""The TLS settings of the pdns provider's HTTP client, from external-dns's flags: `--tls-ca` (the CA that
signed the API's certificate), `--tls-client-cert` with `--tls-client-cert-key` (two-way TLS) and
`--pdns-skip-tls-verify`. TLS 1.2 at least, as external-dns (tlsutils.NewTLSConfig). Standard library only:
the flags are checked with it before the provider (and httpx) is built."""

from __future__ import annotations

import ssl

from shardsync.flags import ConfigError


def tls_context(ca: str = "", cert: str = "", key: str = "", *, skip_verify: bool = False) -> ssl.SSLContext:
    """The client context these settings describe. A file that cannot be read is an OSError naming its flag;
    a file that is not a certificate or key, or a certificate without its key, a ConfigError."""
    if bool(cert) != bool(key):
        raise ConfigError("--tls-client-cert and --tls-client-cert-key go together: set both or neither")
    # ssl.SSLError is an OSError: caught first, it is a file that is there but is not what it should be.
    try:
        context = ssl.create_default_context(cafile=ca or None)
    except ssl.SSLError as exc:
        raise ConfigError(f"--tls-ca={ca}: not a PEM certificate ({exc.reason or exc})") from None
    except OSError as exc:
        raise OSError(f"--tls-ca={ca}: cannot read it ({exc.strerror or exc})") from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if skip_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert:
        flags = f"--tls-client-cert={cert} / --tls-client-cert-key={key}"
        try:
            context.load_cert_chain(cert, key)
        except ssl.SSLError as exc:
            raise ConfigError(f"{flags}: not a PEM certificate and its key ({exc.reason or exc})") from None
        except OSError as exc:
            raise OSError(f"{flags}: cannot read them ({exc.strerror or exc})") from None
    return context
