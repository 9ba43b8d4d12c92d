"""The README's flags table and `shardsync run --help` agree with the flag groups (config.all_flags)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shardsync import flag_args
from shardsync.cli import main
from shardsync.replica import config
from tests.deploy import flags_table

README = Path(__file__).resolve().parents[2] / "README.md"


def test_external_dns_names_are_flags_and_each_option_is_declared_once() -> None:
    options = [flag.option for _, flag in config.all_flags()]
    assert len(options) == len(set(options))
    mirrored = [flag.external_dns for _, flag in config.all_flags() if flag.external_dns]
    assert all(m.startswith("--") for m in mirrored) and len(mirrored) == len(set(mirrored))


@pytest.mark.parametrize("flag", [f for _, f in config.all_flags()], ids=lambda f: f.option)
def test_the_environment_column_names_the_variable_config_reads(flag: config.Flag) -> None:
    assert flag_args.env_value(flag, {flags_table.env_name(flag): "value"}) == "value"


def test_readme_table_is_generated_from_flags() -> None:
    text = README.read_text(encoding="utf-8")
    assert flags_table.section(text) == flags_table.table(), (
        "README.md's flags table is stale: python3 -m tests.deploy.flags_table --write README.md"
    )


def test_table_has_one_row_per_flag() -> None:
    rows = [line for line in flags_table.table().splitlines() if line.startswith("| `--")]
    assert [row.split("`")[1] for row in rows] == [flag.option for _, flag in config.all_flags()]


def test_run_help_lists_every_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for _, flag in config.all_flags():
        assert flag.option in out
    assert "%{record_type}" in out  # help text with a literal % is printed, not formatted


def test_run_help_is_plain_and_names_the_environment(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "(default: service;" in out and "(default: 1m;" in out  # as written on a command line
    assert "('" not in out and "default: '" not in out  # no Python reprs
    assert "(default: $POD_NAMESPACE, else default) (env:" in out and "NAMESPACE) (default:" not in out
    for _, flag in config.all_flags():
        assert f"SHARDSYNC_{flag.env_suffix} or EXTERNAL_DNS_{flag.env_suffix}" in out, flag.option
    assert "FAKE.PROVIDER_URL" not in out  # metavars are the flag's name, not internal field paths
