"""The providers table imports every provider's flags, but a provider's client library only when it is the
one chosen (`build`): a replica of one provider does not load the others' libraries."""

from __future__ import annotations

import subprocess
import sys

import pytest

# What each provider's client pulls in; none may be loaded by importing the table and the replica.
LIBRARIES = {
    "aws": "boto3",
    "azure": "azure.core",  # under azure-identity and azure-mgmt-dns both
    "cloudflare": "cloudflare",
    "fake": "aiohttp",
    "google": "google.cloud.dns",
    "rfc2136": "dns",
}

_PROBE = """
import sys
import shardsync.cli, shardsync.replica.wiring, shardsync.replica.command
from shardsync.providers.table import PROVIDERS
print(",".join(sorted(lib for lib in sys.argv[1:] if lib in sys.modules)))
"""


def _loaded(*libraries: str) -> set[str]:
    # A fresh interpreter: this test process has imported every provider already.
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, *libraries], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    return set(out.split(",")) - {""}


def test_importing_the_replica_loads_no_provider_client_library() -> None:
    assert _loaded(*LIBRARIES.values()) == set()


@pytest.mark.parametrize("name", ["fake", "pdns", "rfc2136"])
def test_building_a_provider_loads_its_library(name: str) -> None:
    # The other side of the laziness: `build` must still find its client (aws, azure and google need
    # credentials to build and are covered by tests/providers/test_aws.py, azure/ and test_google.py).
    from shardsync.providers.table import PROVIDERS

    kind = PROVIDERS[name]
    fields: dict[str, object] = {"zones": ("example.com",)}
    if name == "rfc2136":
        fields["host"] = "127.0.0.1"
    if name == "pdns":  # its zones come from the API; with the fence, it builds the rfc2136 code too
        fields = {"api_key": "k", "rfc2136_fence": "127.0.0.1:53"}
    options = kind.flags.options(**fields)
    provider = kind.create(options, "shardsync-0")
    assert type(provider).__module__.startswith(f"shardsync.providers.{name}")
