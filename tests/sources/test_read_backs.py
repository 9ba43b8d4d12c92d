"""ReadBacks: an object waits until every read back asked for it is in, then is queued again once; a
forgotten object's old read backs do not release it when it is asked for again."""

from __future__ import annotations

from collections.abc import Callable

from shardsync.kube.objects import Resource
from shardsync.sources.read_backs import ReadBacks
from shardsync.sources.service import ENDPOINT_SLICES, PODS

Then = Callable[[], None]


class _Asked:
    def __init__(self, left_out: bool = True) -> None:
        self.left_out = left_out
        self.thens: list[tuple[Resource, str, str, Then]] = []
        self.queued: list[str] = []

    def read_back(self, resource: Resource, namespace: str, selector: str, then: Then) -> bool:
        if self.left_out:
            self.thens.append((resource, namespace, selector, then))
        return self.left_out


def test_an_object_waits_for_every_read_back_asked_for_it_then_is_queued_once() -> None:
    asked = _Asked()
    backs = ReadBacks(asked.read_back, asked.queued.extend)
    backs.ask("default/db", [(PODS, "default", "app=db"), (ENDPOINT_SLICES, "default", "svc=db")])
    assert backs.waits("default/db")
    assert [(r, n, s) for r, n, s, _ in asked.thens] == [
        (PODS, "default", "app=db"),
        (ENDPOINT_SLICES, "default", "svc=db"),
    ]
    asked.thens[0][3]()
    assert backs.waits("default/db") and asked.queued == []
    backs.ask("default/db", [(PODS, "default", "app=db2")])  # a new selector meanwhile: waits for it too
    asked.thens[1][3]()
    assert backs.waits("default/db") and asked.queued == []
    asked.thens[2][3]()
    assert not backs.waits("default/db") and asked.queued == ["default/db"]


def test_nothing_left_out_means_no_wait_and_a_cancelled_wait_is_not_released_by_old_read_backs() -> None:
    backs = ReadBacks(_Asked(left_out=False).read_back, lambda keys: None)
    backs.ask("default/db", [(PODS, "default", "app=db")])
    assert not backs.waits("default/db")

    asked = _Asked()
    backs = ReadBacks(asked.read_back, asked.queued.extend)
    backs.ask("default/db", [(PODS, "default", "app=db")])
    backs.cancel("default/db")  # forgotten
    assert not backs.waits("default/db")
    backs.ask("default/db", [(PODS, "default", "app=db")])  # read back again later
    asked.thens[0][3]()  # the first read back finishing does not release the second wait
    assert backs.waits("default/db") and asked.queued == []
    asked.thens[1][3]()
    assert not backs.waits("default/db") and asked.queued == ["default/db"]
