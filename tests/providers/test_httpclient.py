"""providers/httpclient.py: transport failures of the HTTP providers become UnreachableError."""

from __future__ import annotations

import ssl

import httpx
import pytest

from shardsync.providers.base import UnreachableError
from shardsync.providers.httpclient import transport_errors


def test_timeout_says_how_long_it_waited() -> None:
    no_answer = pytest.raises(UnreachableError, match=r"^GET /x: no answer within 2\.5s$")
    with no_answer as info, transport_errors("GET /x", 2.5):
        raise httpx.ReadTimeout("timed out")
    assert isinstance(info.value.__cause__, httpx.ReadTimeout)


def test_other_transport_failure_names_its_kind() -> None:
    refused = pytest.raises(UnreachableError, match=r"^GET /x: ConnectError: refused$")
    with refused, transport_errors("GET /x", 2.5):
        raise httpx.ConnectError("refused")


def test_a_tls_error_httpx_lets_through_is_unreachable_too() -> None:
    alert = ssl.SSLError(1, "[SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] tlsv13 alert certificate required")
    with (
        pytest.raises(UnreachableError, match=r"^GET /x: SSLError: .*CERTIFICATE_REQUIRED"),
        transport_errors("GET /x", 2.5),
    ):
        raise alert


def test_anything_else_passes_through() -> None:
    with pytest.raises(httpx.HTTPStatusError), transport_errors("GET /x", 2.5):
        request = httpx.Request("GET", "http://h/x")
        raise httpx.HTTPStatusError("404", request=request, response=httpx.Response(404, request=request))
