"""``giant-experiments``: its help describes each subcommand; --file works before or after it."""

from __future__ import annotations

from pathlib import Path

import pytest

from giant_assets.platform.experiments_cli import main
from tests.support.dagster_env import write_experiments


def test_help_describes_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "check validate the experiments file" in text
    assert "list one line per declared experiment" in text
    assert "sync add every declared experiment as a Dagster partition" in text
    assert "estimate cost and time of what experiment NAME has left to run" in text
    assert "batches the provider batches still open" in text


def test_a_subcommand_has_its_own_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["sync", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "usage: giant-experiments sync" in text and "$DAGSTER_HOME" in text and "--file" in text


@pytest.mark.parametrize("order", ["before", "after"])
def test_file_before_or_after_the_command(order: str, tmp_path: Path, capsys) -> None:
    declared = str(
        write_experiments(tmp_path / "e.yaml", {"a": {"agent": "random"}, "b": {"agent": "majority"}})
    )
    argv = ["--file", declared, "list"] if order == "before" else ["list", "--file", declared]
    assert main(argv) == 0
    assert [line.split("\t")[:2] for line in capsys.readouterr().out.splitlines()] == [
        ["a", "random"],
        ["b", "majority"],
    ]
