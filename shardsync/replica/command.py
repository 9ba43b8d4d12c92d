"""`shardsync run`: the flags read, the replica built and run, one line on stderr for a startup error, and the
process's exit.

Startup goes in two steps. Before the event loop (`_build`): the kubeconfig is loaded, the provider built
and the metrics port bound, so any of those failing is one line before anything starts. Then, on the event
loop (`_start`): the provider is asked whether it fences its writes (providers.base.fences_writes; a webhook
server answers on negotiation), bounded by `FENCING_ASK_BOUND`, since the sharding timings follow from the
answer (shardsync.sharding.timings: short leases where every write is fenced, the conservative ones where
not, or where the provider did not answer in time: always safe); one line says which. The ownership layer
and the replica are built with those timings (shardsync.replica.wiring) and run.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, NoReturn

import anyio

from shardsync import logs
from shardsync.durations import format_duration
from shardsync.kube.client import Kube, KubeconfigError
from shardsync.kube.limits import ClientLimits
from shardsync.logs import get_logger
from shardsync.pacing.backoff import Backoff
from shardsync.providers.base import Provider, ProviderError, fences_writes
from shardsync.providers.table import PROVIDERS
from shardsync.replica import allocator, collector, config
from shardsync.replica.server import StatusEndpoints, StatusServer
from shardsync.replica.wiring import Replica, ownership_for, provider_for
from shardsync.sharding.timings import Timings

log = get_logger(__name__)

# How long the teardown after the graceful stop may take before the process exits anyway.
EXIT_GRACE = 0.5
# How long a replica waits at start for the provider to say whether it fences its writes before it takes
# the conservative timings (a webhook server still starting, or unreachable).
FENCING_ASK_BOUND = 5.0

USAGE, ENVIRONMENT = 2, 1


def configure(parser: argparse.ArgumentParser) -> None:
    config.configure(parser)
    # A bad flag value is one line naming it (argparse would print the whole usage first), exit code 2.
    setattr(parser, "error", _usage_error)  # noqa: B010 - replaces this parser's method only


def _usage_error(message: str) -> NoReturn:
    _fail(f"{message}; see shardsync run --help", USAGE)
    raise SystemExit(USAGE)


def _fail(message: str, code: int) -> int:
    """A startup error: one line on stderr naming the flag or file and what to do."""
    print(f"shardsync run: {message}", file=sys.stderr, flush=True)
    return code


def main(args: argparse.Namespace) -> int:
    try:
        settings = config.settings_from_args(args)
    except OSError as exc:  # a file a flag names could not be read
        return _fail(str(exc), ENVIRONMENT)
    except (config.ConfigError, ValueError) as exc:
        return _fail(str(exc), USAGE)
    logs.setup(settings.identity, settings.log_level, settings.log_format)
    allocator.tune()  # before any worker thread allocates
    collector.tune()
    debug = settings.log_level == "debug"
    try:
        parts = _build(settings)
    except (KubeconfigError, OSError, ValueError) as exc:
        if debug:
            traceback.print_exc()
        return _fail(str(exc), ENVIRONMENT)
    try:
        code = anyio.run(_start, settings, parts)
    except Exception as exc:  # a crash: one line; the whole trace with --log-level=debug
        if debug:
            traceback.print_exc()
        cause: BaseException = exc
        while isinstance(cause, BaseExceptionGroup) and len(cause.exceptions) == 1:
            cause = cause.exceptions[0]
        return _fail(f"stopped: {type(cause).__name__}: {cause}", ENVIRONMENT)
    finally:
        parts.server.stop()
    # Stopped by a signal, or --once done: every write was awaited. What is left are worker threads an idle
    # one notices in up to 2 s, and reads abandoned on cancel (a watch stream, until the server ends it: up
    # to a minute, which held a --once run's exit): not waited for.
    _exit_now(code)


@dataclass(frozen=True, slots=True)
class _Parts:
    """What is built before the event loop; the status endpoints are pointed at the replica once it is."""

    kube: Kube
    provider: Provider
    server: StatusServer
    endpoints: StatusEndpoints


def _build(settings: config.Settings) -> _Parts:
    """The replica's parts that need no event loop: the kubeconfig is loaded, the provider built and the
    metrics port bound now, so any of them failing is one line before anything starts."""
    s = settings
    limits = ClientLimits(s.kube_api_qps, s.kube_api_burst, s.request_timeout, s.kube_api_status_qps)
    kube = Kube.connect(settings.kubeconfig, settings.identity, limits)
    kind = PROVIDERS[settings.provider]
    provider = kind.create(settings.options(kind.flags), settings.identity)
    endpoints = StatusEndpoints(lambda: (False, "starting"), dict)
    try:
        server = StatusServer(settings.metrics_address, endpoints)
    except OSError as exc:
        raise OSError(
            f"--metrics-address={settings.metrics_address}: cannot listen there ({exc.strerror or exc}); "
            "choose a free port, e.g. --metrics-address=:7979"
        ) from None
    return _Parts(kube, provider, server, endpoints)


async def _start(settings: config.Settings, parts: _Parts) -> int:
    """Learn the timings, build the ownership layer and the replica, and run it."""
    if settings.once:
        timings = config.timings_of(settings, fenced=False)  # no lease is taken: only for the stop bounds
    else:
        timings = await timings_at_start(settings, parts.provider)
    ownership = ownership_for(settings, parts.kube, timings)
    provider, budget = provider_for(settings, parts.provider)
    replica = Replica(settings, parts.kube, provider, ownership, timings, budget)
    parts.endpoints.ready, parts.endpoints.shards = replica.ready, replica.shards
    parts.endpoints.notes = replica.sources.waiting  # a kind waiting for its CRD: said, holding nothing up
    threading.Thread(target=_exit_after_teardown, args=(replica,), name="exit", daemon=True).start()
    return await replica.run(parts.server)


async def timings_at_start(
    settings: config.Settings, provider: Provider, bound: float = FENCING_ASK_BOUND
) -> Timings:
    """The sharding timings for what the provider says of its fencing, asked with backoff for at most
    `bound` seconds (then the conservative ones: a provider that answers later may still fence its writes,
    on the longer timing); says which in one line."""
    fenced: bool | None = None
    error = ""
    backoff = Backoff(initial=0.2, maximum=1.0)
    with anyio.move_on_after(bound):
        while fenced is None:
            try:
                fenced = await fences_writes(provider)
            except ProviderError as exc:
                error = str(exc)
                await anyio.sleep(backoff.next())
    timings = config.timings_of(settings, fenced=bool(fenced))
    figures: dict[str, Any] = {
        "provider": settings.provider,
        "lease": format_duration(timings.lease_duration),
        "crash_handoff_after": format_duration(round(timings.crash_handoff, 1)),
    }
    if fenced:
        log.info("writes fenced: the provider refuses a stale owner's write", **figures)
    elif fenced is False:
        log.info(
            "writes are lease-timed, not fenced: the provider cannot refuse a stale owner's late write, so "
            "a zone changes hands only after the leases say so",
            **figures,
        )
    else:
        log.warning(
            f"the provider did not say within {format_duration(bound)} whether it fences its writes: "
            "lease-timed, not fenced, on the conservative timing (its writes are fenced once it says it can)",
            error=error[:300],
            **figures,
        )
    return timings


def _exit_after_teardown(replica: Replica) -> None:
    """Exit at most EXIT_GRACE after the graceful stop, whatever is left: a call blocked on an API server
    that does not answer would otherwise hold the teardown (and the interpreter's exit) until its timeout."""
    replica.stop_done.wait()
    time.sleep(EXIT_GRACE)
    log.warning("calls still in flight after the stop; exiting without them")
    _exit_now(0)


def _exit_now(code: int) -> NoReturn:
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
