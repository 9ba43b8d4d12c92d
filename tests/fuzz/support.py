"""Fuzzing support: how many examples a run tries, the count of examples each area ran, and the strategies
of hostile input every area draws from (garbage JSON, wrong types, huge, unicode and punycode values).

`pytest -m fuzz` is the full run: `FULL_EXAMPLES` per test (tests/conftest.py sets `full` when the marker
expression selects `fuzz`, and prints `counts` at the end). Every other run (CI's plain `pytest`, `-m fast`)
tries `CI_EXAMPLES`, derandomized, so the default run stays fast and deterministic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

FULL_EXAMPLES = 10_000
CI_EXAMPLES = 100

full = False  # set by tests/conftest.py at configure time, before the fuzz modules are imported
counts: Counter[str] = Counter()  # examples run, by area

F = TypeVar("F", bound=Callable[..., Any])


def fuzzing(area: str) -> Callable[[F], F]:
    """The Hypothesis settings of a fuzz test of `area` (apply under `@given`)."""
    return settings(
        max_examples=FULL_EXAMPLES if full else CI_EXAMPLES,
        deadline=None,
        derandomize=not full,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


def count(area: str) -> None:
    counts[area] += 1


# -- hostile values ----------------------------------------------------------------------------------------

# Big values: 70 kB is over every annotation limit; 10 MB (a ConfigMap's whole budget, ten times over) is
# rare, as it costs time in every layer it passes.
big = st.sampled_from([1_000, 70_000]).map(lambda n: "a" * n)
huge = st.one_of(big, big, big, st.just(10 * 1024 * 1024).map(lambda n: "a" * n))
label = st.from_regex(r"\A[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?\Z", fullmatch=True)
punycode = st.from_regex(r"\Axn--[a-z0-9-]{1,30}\Z", fullmatch=True)
odd_label = st.one_of(
    label,
    punycode,
    st.just("*"),
    st.text(min_size=1, max_size=70),  # unicode, dots, spaces, control characters
    st.just("a" * 64),
)
domain = st.lists(odd_label, min_size=1, max_size=5).map(".".join) | st.sampled_from(
    ["", ".", "ex.com.", "*.ex.com", "..ex.com", "ex..com", "EX.COM", "bücher.ex.com", "xn--bcher-kva.ex.com"]
)
ip = st.one_of(
    st.ip_addresses().map(str),
    st.sampled_from(["", "256.1.1.1", "1.2.3", "::ffff:1.2.3.4", "fe80::1%eth0", "0.0.0.0", "::"]),
)
target = st.one_of(ip, domain, st.text(max_size=50))
scalar_junk = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=30), big
)
junk: st.SearchStrategy[Any] = st.recursive(
    scalar_junk,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
text = st.one_of(
    st.text(max_size=60), domain, huge, st.binary(max_size=40).map(lambda b: b.decode("latin-1"))
)


def many_targets(n: int) -> list[str]:
    return [f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}" for i in range(n)]


few_targets = st.lists(target, max_size=6)
# 10,000 targets now and then (one draw in ten): the limits' case, too slow to be common.
targets = st.one_of(*[few_targets] * 8, junk, st.just(10_000).map(many_targets))


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The value, or (one time in a few) garbage of any type in its place."""
    return st.one_of(strategy, strategy, strategy, junk)
