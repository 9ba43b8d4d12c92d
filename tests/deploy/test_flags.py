"""The README's flags table and `shardsync run --help` agree with config.FLAGS."""

from __future__ import annotations

from pathlib import Path

import pytest

from shardsync import config
from shardsync.cli import main
from tests.deploy import flags_table

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_flag_says_which_external_dns_flag_it_mirrors() -> None:
    assert set(flags_table.EXTERNAL_DNS) == {flag.name for flag in config.FLAGS}


@pytest.mark.parametrize("flag", config.FLAGS, ids=lambda f: f.option)
def test_the_environment_column_names_the_variable_config_reads(flag: config.Flag) -> None:
    assert config._env_value(flag, {flags_table.env_name(flag): "value"}) == "value"


def test_readme_table_is_generated_from_flags() -> None:
    text = README.read_text(encoding="utf-8")
    assert flags_table.section(text) == flags_table.table(), (
        "README.md's flags table is stale: python3 -m tests.deploy.flags_table --write README.md"
    )


def test_table_has_one_row_per_flag() -> None:
    rows = [line for line in flags_table.table().splitlines() if line.startswith("| `--")]
    assert [row.split("`")[1] for row in rows] == [flag.option for flag in config.FLAGS]


def test_run_help_lists_every_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for flag in config.FLAGS:
        assert flag.option in out
    assert "%{record_type}" in out  # help text with a literal % is printed, not formatted
