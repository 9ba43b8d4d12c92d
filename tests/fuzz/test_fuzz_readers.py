"""Fuzzing the provider readers (tests/fuzz/readers.py lists them): whatever odd records a zone holds (AXFR
names of any bytes, TXT records that almost look like ownership records, webhook answers with wrong types),
reading gives records or a ProviderError for the whole answer, and the TXT registry and the planner take
those records without an exception; a bad record in a webhook answer is skipped, the others read."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardsync.providers.base import ProviderError
from shardsync.records.endpoint import Endpoint
from shardsync.records.plan import plan
from shardsync.records.registry import TxtRegistry
from tests.fuzz.readers import READERS, Reader
from tests.fuzz.support import count, fuzzing

pytestmark = pytest.mark.fuzz

DESIRED = [Endpoint.new("web.ex.com", "A", ["192.0.2.1"], labels={"resource": "service/default/web"})]


@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.name)
def test_every_provider_reader_survives_odd_records(reader: Reader) -> None:
    @fuzzing("readers")
    @given(answer=reader.answers, owner=st.sampled_from(["default", "shard", "x"]))
    def run(answer: Any, owner: str) -> None:
        count(f"reader {reader.name}")
        try:
            records = reader.read(answer)
        except ProviderError:
            return
        registry = TxtRegistry(owner_id=owner)
        view = registry.read(records)
        result = plan(DESIRED, view.current, owner_id=owner, managed_types=registry.managed_types)
        registry.with_ownership(result.changes, view)

    run()


def test_a_bad_record_in_a_webhook_answer_is_skipped_and_the_others_read() -> None:
    reader = next(r for r in READERS if r.name == "webhook records")
    good = {"dnsName": "a.ex.com", "recordType": "A", "targets": ["192.0.2.1"]}
    records = reader.read([good, {"dnsName": 5}, "junk", {**good, "dnsName": "b.ex.com"}])
    assert [r.dns_name for r in records] == ["a.ex.com", "b.ex.com"]
    with pytest.raises(ProviderError):
        reader.read({"not": "a list"})
