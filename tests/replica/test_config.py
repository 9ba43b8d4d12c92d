"""Flags, environment variables and validation of `shardsync run`."""

from __future__ import annotations

import argparse

import pytest

from shardsync.providers import rfc2136
from shardsync.replica.config import (
    FLAGS,
    ConfigError,
    Settings,
    configure,
    settings_fields,
    settings_from_args,
    timings_of,
)
from shardsync.sources.table import SOURCES


def parse(argv: list[str], env: dict[str, str] | None = None) -> Settings:
    env = env if env is not None else {"POD_NAME": "shardsync-0"}
    parser = argparse.ArgumentParser()
    configure(parser, env)
    return settings_from_args(parser.parse_args(argv), env)


FAKE = ["--fake-zone", "example.com"]


def test_every_setting_has_a_flag() -> None:
    assert sorted(f.name for f in FLAGS) == sorted(settings_fields())


def test_defaults_match_external_dns() -> None:
    s = parse(FAKE)
    assert s.interval == 60.0
    assert s.policy == "sync"
    assert s.txt_owner_id == "default"
    assert s.managed_record_types == ("A", "AAAA", "CNAME")
    assert s.metrics_address == ":7979"
    assert s.identity == "shardsync-0"


def test_external_dns_style_flags() -> None:
    s = parse(
        [
            "--source=service",
            "--source=ingress",
            "--provider=fake",
            "--policy=upsert-only",
            "--txt-owner-id=blue",
            "--interval=15s",
            "--events",
            "--domain-filter=a.com",
            "--domain-filter=b.com",
            "--managed-record-types=a",
            "--managed-record-types=TXT",
            "--sharding=off",
            *FAKE,
        ]
    )
    assert s.sources == ("service", "ingress")
    assert s.policy == "upsert-only"
    assert s.interval == 15.0
    assert s.events is True
    assert s.domain_filter == ("a.com", "b.com")
    assert s.managed_record_types == ("A", "TXT")
    assert s.sharding is False


def test_environment_fills_flags_and_command_line_wins() -> None:
    env = {
        "POD_NAME": "shardsync-2",
        "POD_NAMESPACE": "dns",
        "SHARDSYNC_INTERVAL": "2m",
        "EXTERNAL_DNS_TXT_OWNER_ID": "green",
        "SHARDSYNC_SOURCE": "service,crd",
        "SHARDSYNC_DRY_RUN": "true",
    }
    s = parse(FAKE, env)
    assert (s.identity, s.lease_namespace) == ("shardsync-2", "dns")
    assert s.interval == 120.0
    assert s.txt_owner_id == "green"
    assert s.sources == ("service", "crd")
    assert s.dry_run is True
    assert parse(["--interval=5s", "--source=ingress", "--no-dry-run", *FAKE], env).interval == 5.0
    assert parse(["--source=ingress", *FAKE], env).sources == ("ingress",)
    assert parse(["--no-dry-run", *FAKE], env).dry_run is False


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"SHARDSYNC_INTERVAL": "bogus"},
            "SHARDSYNC_INTERVAL=bogus: invalid duration 'bogus' (use e.g. 30s, 1m, 500ms, 1h30m)",
        ),
        ({"SHARDSYNC_CONCURRENCY": "x"}, "SHARDSYNC_CONCURRENCY=x: expected a whole number"),
        ({"SHARDSYNC_PROVIDER_RATE_LIMIT": "fast"}, "SHARDSYNC_PROVIDER_RATE_LIMIT=fast: expected a number"),
        ({"EXTERNAL_DNS_DRY_RUN": "maybe"}, "EXTERNAL_DNS_DRY_RUN=maybe: expected true/false, got 'maybe'"),
        (
            {"SHARDSYNC_SOURCE": "service,pods"},
            f"SHARDSYNC_SOURCE=service,pods: 'pods': not one of {', '.join(SOURCES)}",
        ),
        ({"SHARDSYNC_LOG_LEVEL": "loud"}, "SHARDSYNC_LOG_LEVEL=loud: not one of debug, info, warning, error"),
        ({"EXTERNAL_DNS_INTERVAL": "0s"}, "--interval must be positive (from EXTERNAL_DNS_INTERVAL)"),
        (
            {"SHARDSYNC_INSTANCE": "Bad_Name"},
            "--instance=Bad_Name: not usable in object names (at most 40 lower-case letters, digits and '-', "
            "starting and ending with a letter or digit) (from SHARDSYNC_INSTANCE)",
        ),
    ],
)
def test_a_bad_environment_value_is_one_message_naming_the_variable(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(FAKE, {"POD_NAME": "shardsync-0", **env})
    assert str(caught.value) == message


def test_the_command_line_wins_over_a_bad_environment_value() -> None:
    env = {"POD_NAME": "shardsync-0", "SHARDSYNC_INTERVAL": "bogus", "SHARDSYNC_DRY_RUN": "maybe"}
    s = parse(["--interval=5s", "--dry-run", *FAKE], env)
    assert (s.interval, s.dry_run) == (5.0, True)
    env = {"POD_NAME": "shardsync-0", "SHARDSYNC_SOURCE": "pods", "SHARDSYNC_CONCURRENCY": "0"}
    assert parse(["--source=crd", "--concurrency=2", *FAKE], env).sources == ("crd",)


def test_timing_defaults_follow_whether_the_provider_fences() -> None:
    fenced = timings_of(parse(FAKE), fenced=True)
    assert (fenced.lease_duration, fenced.renew_interval, fenced.settle) == (3, 1.0, 0.5)
    webhook = parse(["--provider=webhook"])
    assert (webhook.lease_duration, webhook.renew_interval) == (None, None)  # unset: the provider decides
    unfenced = timings_of(webhook, fenced=False)
    assert (unfenced.lease_duration, unfenced.renew_interval, unfenced.settle) == (15, 5.0, 2.0)
    assert timings_of(webhook, fenced=True) == fenced  # a webhook server with the fence extension
    assert timings_of(parse(["--lease-duration=10s", *FAKE]), fenced=True).lease_duration == 10


def test_a_renew_interval_set_alone_must_suit_both_kinds_of_provider() -> None:
    # The webhook's fencing is learned at start: the flags must make sense with the short lease too.
    with pytest.raises(ConfigError, match="3s where the provider fences"):
        parse(["--provider=webhook", "--renew-interval=5s"])
    assert parse(["--provider=webhook", "--renew-interval=5s", "--lease-duration=20s"]).renew_interval == 5.0


def test_webhook_allow_unfenced_is_still_accepted() -> None:
    s = parse(["--provider=webhook", "--webhook-allow-unfenced"])
    assert s.provider == "webhook"


@pytest.mark.parametrize(
    "argv",
    [
        ["--txt-prefix=a-", "--txt-suffix=-b", *FAKE],
        ["--provider=rfc2136"],
        ["--provider=fake"],
        ["--renew-interval=20s", *FAKE],
        ["--renew-interval=5s", "--lease-duration=5s", *FAKE],
        ["--concurrency=0", *FAKE],
    ],
)
def test_invalid_combinations_are_refused(argv: list[str]) -> None:
    with pytest.raises(ConfigError):
        parse(argv)


@pytest.mark.parametrize("argv", [["--interval=soon"], ["--policy=all"], ["--source=pods"]])
def test_invalid_values_are_refused_by_the_parser(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        parse(argv)


def test_secret_is_not_in_repr_and_reads_from_file(tmp_path: pytest.TempPathFactory) -> None:
    secret_file = tmp_path / "secret"  # type: ignore[operator]
    secret_file.write_text("c2VjcmV0\n")
    s = parse(
        [
            "--provider=rfc2136",
            "--rfc2136-host=127.0.0.1",
            "--rfc2136-zone=ex.com",
            f"--rfc2136-tsig-secret-file={secret_file}",
        ]
    )
    assert s.options(rfc2136.FLAGS).secret() == "c2VjcmV0"
    s2 = parse(
        [
            "--provider=rfc2136",
            "--rfc2136-host=127.0.0.1",
            "--rfc2136-zone=ex.com",
            "--rfc2136-tsig-secret=hidden",
        ]
    )
    assert "hidden" not in repr(s2)


RFC2136 = ["--provider=rfc2136", "--rfc2136-host=127.0.0.1", "--rfc2136-zone=ex.com"]


def test_rfc2136_axfr_flags_are_always_on_and_false_is_refused() -> None:
    """external-dns lists zones only with --rfc2136-axfr/--rfc2136-tsig-axfr (default false); shardsync
    always does (README, "Differences"), so true is accepted and false refused with the reason."""
    options = parse(RFC2136).options(rfc2136.FLAGS)
    assert (options.axfr, options.tsig_axfr) == (True, True)
    for flag in ("--rfc2136-tsig-axfr", "--rfc2136-tsig-axfr=true", "--rfc2136-axfr"):
        assert parse([*RFC2136, flag]).options(rfc2136.FLAGS).tsig_axfr is True
    for argv, env in (
        (["--rfc2136-tsig-axfr=false"], {}),
        (["--no-rfc2136-axfr"], {}),
        ([], {"EXTERNAL_DNS_RFC2136_TSIG_AXFR": "false"}),
    ):
        with pytest.raises(ConfigError, match="cannot run without listing zones by AXFR"):
            parse([*RFC2136, *argv], {"POD_NAME": "shardsync-0", **env})


def test_a_flag_several_providers_declare_is_one_argument_that_each_receives() -> None:
    from shardsync.providers import aws, google

    s = parse(["--provider=google", "--zone-id-filter=z1", "--zone-id-filter=z2"])
    assert s.options(google.FLAGS).zone_id_filter == ("z1", "z2")
    assert s.options(aws.FLAGS).zone_id_filter == ("z1", "z2")
    from_env = parse(["--provider=google"], {"POD_NAME": "x", "EXTERNAL_DNS_ZONE_ID_FILTER": "a,b"})
    assert from_env.options(google.FLAGS).zone_id_filter == ("a", "b")
    assert parse(["--provider=google"]).options(google.FLAGS).zone_id_filter == ()
