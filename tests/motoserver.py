"""moto's Route53 on loopback for the aws provider's wire tests: a `ThreadedMotoServer` in this process.

`MotoRoute53.start()` serves moto's API on 127.0.0.1 (a free port); `environment()` is what boto3 needs to
reach it (`AWS_ENDPOINT_URL`, dummy credentials, a region, no shared config files), for this process or a
replica process; `reset()` empties it between tests; `client()` is a boto3 Route53 client for seeding and
reading back. moto speaks Route53's wire format (hosted zones, tags, change batches, paged listings) but not
its semantics: a stale DELETE succeeds, a CREATE over an existing RRset leaves two, a refused batch is
partly applied (shared/field-notes.md). The fake provider's `route53` profile tests those
(tests/providers/test_fake_route53.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import boto3
import httpx
from moto.server import ThreadedMotoServer


class MotoRoute53:
    def __init__(self) -> None:
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.url = ""

    def start(self) -> None:
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.url = f"http://{host}:{port}"

    def stop(self) -> None:
        self._server.stop()

    def environment(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }

    def reset(self) -> None:
        httpx.post(f"{self.url}/moto-api/reset", timeout=10).raise_for_status()

    def client(self) -> Any:
        env = self.environment()
        return boto3.client(
            "route53",
            endpoint_url=self.url,
            region_name=env["AWS_DEFAULT_REGION"],
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        )

    def create_zone(self, name: str, *, private: bool = False, tags: Mapping[str, str] | None = None) -> str:
        """A hosted zone; its id without the /hostedzone/ prefix."""
        client = self.client()
        kwargs: dict[str, Any] = {"Name": name, "CallerReference": f"{name}-{private}-{os.urandom(4).hex()}"}
        if private:
            kwargs["HostedZoneConfig"] = {"PrivateZone": True}
            kwargs["VPC"] = {"VPCRegion": "us-east-1", "VPCId": "vpc-12345678"}
        zone_id = str(client.create_hosted_zone(**kwargs)["HostedZone"]["Id"]).removeprefix("/hostedzone/")
        if tags:
            client.change_tags_for_resource(
                ResourceType="hostedzone",
                ResourceId=zone_id,
                AddTags=[{"Key": k, "Value": v} for k, v in tags.items()],
            )
        return zone_id

    def rrsets(self, zone_id: str) -> list[dict[str, Any]]:
        """Every RRset of the zone, read with boto3's own paginator."""
        pages = self.client().get_paginator("list_resource_record_sets").paginate(HostedZoneId=zone_id)
        return [r for page in pages for r in page["ResourceRecordSets"]]

    def change(self, zone_id: str, *changes: dict[str, Any]) -> None:
        self.client().change_resource_record_sets(
            HostedZoneId=zone_id, ChangeBatch={"Changes": list(changes)}
        )


@contextmanager
def moto_route53() -> Iterator[MotoRoute53]:
    server = MotoRoute53()
    server.start()
    server.reset()  # moto's state lives in this process, shared by every server it starts
    try:
        yield server
    finally:
        server.stop()
