"""The Route53 API through boto3: the few calls the provider makes, blocking, with errors mapped to base.py's.

Credentials come from boto3's default chain (environment, shared files and profiles, web identity as IRSA
and EKS pod identity set it up, the instance or container role); `--aws-assume-role` assumes a role on top
(refreshed before it expires). The endpoint is boto3's own: `AWS_ENDPOINT_URL` or `AWS_ENDPOINT_URL_ROUTE53`
point it elsewhere (the tests' moto server). Throttling answers (Throttling, PriorRequestNotComplete,
HTTP 429) are retried by botocore's standard retry mode, at most `--aws-api-retries` times with its
jittered backoff; past that they raise `AwsThrottledError` with the server's Retry-After (None when it
sent none), which the provider budget and the worker take as back-off. Every call is counted in
`shardsync_aws_api_calls_total{operation,result}` (`retried` counts the attempts botocore repeated).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import boto3
import botocore.config
import botocore.exceptions
from botocore.credentials import RefreshableCredentials
from botocore.session import get_session
from prometheus_client import Counter

from shardsync.providers.aws.errors import AwsThrottledError, InvalidChangeBatchError, Start
from shardsync.providers.aws.zones import HostedZone
from shardsync.providers.base import ProviderError, UnreachableError

CALLS = Counter(
    "shardsync_aws_api_calls_total",
    "Route53 API calls by operation and result (ok, throttled, error; retried: attempts botocore repeated)",
    ["operation", "result"],
)

THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "PriorRequestNotComplete",
        "TooManyRequestsException",
        "RequestLimitExceeded",
    }
)
TAGS_PER_CALL = 10  # ListTagsForResources takes at most 10 ids
ZONES_PER_PAGE = "100"


class Route53Api:
    """The calls the provider makes, each blocking (run them in worker threads)."""

    def __init__(
        self, *, retries: int = 3, assume_role: str = "", external_id: str = "", timeout: float = 30.0
    ) -> None:
        config = botocore.config.Config(
            retries={"total_max_attempts": max(0, retries) + 1, "mode": "standard"},
            connect_timeout=min(timeout, 10.0),
            read_timeout=timeout,
            max_pool_connections=32,
        )
        session = boto3.session.Session()
        if assume_role:
            session = _assumed(session, assume_role, external_id)
        # Route53 is global; a region only picks the partition, so the default one does when none is set.
        region = session.region_name or "us-east-1"
        self._client: Any = session.client("route53", config=config, region_name=region)

    def hosted_zones(self) -> list[HostedZone]:
        zones: list[HostedZone] = []
        marker: str | None = None
        while True:
            kwargs = {"MaxItems": ZONES_PER_PAGE, **({"Marker": marker} if marker else {})}
            page = self._call("ListHostedZones", self._client.list_hosted_zones, **kwargs)
            zones.extend(HostedZone.from_api(z) for z in page.get("HostedZones", ()))
            marker = page.get("NextMarker") if page.get("IsTruncated") else None
            if not marker:
                return zones

    def tags(self, zone_ids: Iterable[str]) -> dict[str, dict[str, str]]:
        """Tags of each hosted zone (ids without the /hostedzone/ prefix)."""
        ids = list(zone_ids)
        out: dict[str, dict[str, str]] = {i: {} for i in ids}
        for at in range(0, len(ids), TAGS_PER_CALL):
            batch = ids[at : at + TAGS_PER_CALL]
            answer = self._call(
                "ListTagsForResources",
                self._client.list_tags_for_resources,
                ResourceType="hostedzone",
                ResourceIds=batch,
            )
            for item in answer.get("ResourceTagSets", ()):
                out[str(item["ResourceId"])] = {
                    str(t["Key"]): str(t.get("Value", "")) for t in item.get("Tags", ())
                }
        return out

    def rrsets(
        self, zone_id: str, start: Start | None, max_items: int
    ) -> tuple[list[dict[str, Any]], Start | None]:
        """One ListResourceRecordSets page from `start`; and where the next page starts (None: last)."""
        kwargs: dict[str, Any] = {"HostedZoneId": zone_id, "MaxItems": str(max_items)}
        if start is not None:
            kwargs["StartRecordName"], kwargs["StartRecordType"] = start[0], start[1]
            if start[2]:
                kwargs["StartRecordIdentifier"] = start[2]
        page = self._call("ListResourceRecordSets", self._client.list_resource_record_sets, **kwargs)
        nxt = None
        if page.get("IsTruncated"):
            nxt = (
                str(page["NextRecordName"]),
                str(page["NextRecordType"]),
                str(page.get("NextRecordIdentifier") or ""),
            )
        return list(page.get("ResourceRecordSets", ())), nxt

    def change(self, zone_id: str, changes: list[dict[str, Any]], comment: str = "") -> None:
        batch: dict[str, Any] = {"Changes": changes}
        if comment:
            batch["Comment"] = comment
        self._call(
            "ChangeResourceRecordSets",
            self._client.change_resource_record_sets,
            HostedZoneId=zone_id,
            ChangeBatch=batch,
        )

    def _call(self, operation: str, fn: Callable[..., Mapping[str, Any]], **kwargs: Any) -> Mapping[str, Any]:
        try:
            answer = fn(**kwargs)
        except botocore.exceptions.ClientError as exc:
            _count_retries(operation, exc.response)
            raise _mapped(operation, exc) from None
        except (botocore.exceptions.EndpointConnectionError, botocore.exceptions.ConnectionError) as exc:
            CALLS.labels(operation, "error").inc()
            raise UnreachableError(f"Route53 {operation}: {exc}") from None
        except botocore.exceptions.NoCredentialsError:
            CALLS.labels(operation, "error").inc()
            raise ProviderError(
                f"Route53 {operation}: no AWS credentials found (environment, profile, web identity or "
                "instance role); see the README's aws section"
            ) from None
        except botocore.exceptions.BotoCoreError as exc:
            CALLS.labels(operation, "error").inc()
            raise ProviderError(f"Route53 {operation}: {type(exc).__name__}: {exc}") from None
        _count_retries(operation, answer)
        CALLS.labels(operation, "ok").inc()
        return answer


def _count_retries(operation: str, response: Mapping[str, Any]) -> None:
    retried = int(response.get("ResponseMetadata", {}).get("RetryAttempts") or 0)
    if retried:
        CALLS.labels(operation, "retried").inc(retried)


def _mapped(operation: str, exc: botocore.exceptions.ClientError) -> ProviderError:
    error = exc.response.get("Error", {})
    code = str(error.get("Code", ""))
    message = str(error.get("Message", "")) or str(exc)
    meta = exc.response.get("ResponseMetadata", {})
    status = int(meta.get("HTTPStatusCode") or 0)
    text = f"Route53 {operation}: {code or status}: {message}"
    if code in THROTTLING_CODES or status == 429:
        CALLS.labels(operation, "throttled").inc()
        return AwsThrottledError(text, retry_after=_retry_after(meta.get("HTTPHeaders", {})))
    CALLS.labels(operation, "error").inc()
    if code in ("InvalidChangeBatch", "InvalidInput"):
        return InvalidChangeBatchError(text)
    return ProviderError(text)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """The Retry-After Route53 sent (seconds), None when it sent none."""
    try:
        return max(0.0, float(headers["retry-after"]))
    except (KeyError, ValueError):
        return None


def _assumed(session: Any, role: str, external_id: str) -> Any:
    """A session whose credentials are `role`'s, assumed through `session`'s and refreshed before expiry."""
    sts = session.client("sts")

    def fetch() -> dict[str, str]:
        kwargs = {"RoleArn": role, "RoleSessionName": "shardsync"}
        if external_id:
            kwargs["ExternalId"] = external_id
        creds = sts.assume_role(**kwargs)["Credentials"]
        return {
            "access_key": creds["AccessKeyId"],
            "secret_key": creds["SecretAccessKey"],
            "token": creds["SessionToken"],
            "expiry_time": creds["Expiration"].isoformat(),
        }

    core = get_session()
    # botocore has no public setter for a session's credentials; this is how its own assume-role
    # provider hands refreshable credentials to a session
    core._credentials = RefreshableCredentials.create_from_metadata(fetch(), fetch, "assume-role")
    return boto3.session.Session(botocore_session=core, region_name=session.region_name)
