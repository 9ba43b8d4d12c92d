"""Fixtures of the azure provider's tests: a certificate for 127.0.0.1 they trust, and the Azure DNS contract
fake served over HTTPS with it, one zone in place (helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cloudfakes.azure import AzureFake
from tests.cloudfakes.tls import LoopbackCert, loopback_cert
from tests.providers.azure.helpers import served


@pytest.fixture(scope="session")
def cert(tmp_path_factory: pytest.TempPathFactory) -> LoopbackCert:
    return loopback_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def fake(cert: LoopbackCert) -> Iterator[AzureFake]:
    with served(cert) as server:
        yield server
