"""Every member Lease, read when someone asks: the members /shards shows on a replica that follows only a
few of them (design §3; peer_view.py says who follows what).

A list of the instance's member Leases by label, tried at most once per renew interval however often
/shards is asked, never waiting more than LIST_WITHIN for it (a /shards answer must not hang on a busy
client or API), and not while the replica starts or waits to acquire zones (`busy`: its own reads of the
Leases rule 4 needs share the client's budget for coordination calls with this one); judged with a
LivenessTracker of its own (never the one rule 4 reads): a member counts as just renewed the first time it
is listed, as client-go counts a lease a new observer finds, so a replica asked once shows a crashed
member as ready until it has been listed again a lease duration later. Meanwhile, or when the list fails,
the last one is shown.
"""

from __future__ import annotations

import anyio

from shardsync.kube.client import KubeError
from shardsync.kube.objects import LEASES
from shardsync.logs import get_logger
from shardsync.sharding.membership import (
    LivenessTracker,
    MalformedLease,
    MemberLease,
    MemberStatus,
    label_selector,
)
from shardsync.sharding.site import Site

log = get_logger(__name__)

LIST_WITHIN = 0.5  # seconds: a token of the client's budget and the answer


class Roster:
    def __init__(self, site: Site) -> None:
        self.site = site
        self.tracker = LivenessTracker()
        self._tried_at: float | None = None
        self._lock = anyio.Lock()

    async def statuses(self, busy: bool = False) -> dict[str, MemberStatus]:
        """Every member as last listed (listed again when that was tried a renew interval ago or more,
        unless `busy`)."""
        site = self.site
        async with self._lock:
            sent = site.clock.monotonic()
            due = self._tried_at is None or sent - self._tried_at >= site.timings.renew_interval
            if due and not busy:
                self._tried_at = sent
                try:
                    body = await site.kube.list(
                        LEASES,
                        namespace=site.namespace,
                        label_selector=label_selector(site.instance),
                        request_timeout=min(LIST_WITHIN, site.timings.request_timeout),
                    )
                except KubeError as exc:
                    log.debug("listing the member leases for /shards failed", error=str(exc))
                else:
                    leases = []
                    for item in body.get("items") or []:
                        try:
                            leases.append(MemberLease.from_object(item, site.instance))
                        except MalformedLease:
                            continue  # the coordinator Lease shares the labels
                    self.tracker.resync(leases, sent)
        return self.tracker.statuses(site.clock.monotonic())
