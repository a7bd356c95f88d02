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


def test_syncs_at_the_same_moment_all_succeed(tmp_path: Path) -> None:
    """`giant-experiments sync` beside another sync (a second shell, the daemon's sensor) on an existing
    instance: Dagster inserts the keys it did not find a moment before, so one process's insert used
    to fail on a key another had just added (UNIQUE constraint); each now adds what is still missing."""
    import os
    import subprocess
    import sys

    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef

    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {**os.environ, "DAGSTER_HOME": str(home), "GIANT_DATA_DIR": str(tmp_path / "data")}
    cli = [str(Path(sys.executable).with_name("giant-experiments")), "sync", "--file"]
    first = write_experiments(tmp_path / "one.yaml", {"seed": {"agent": "random"}})
    subprocess.run([*cli, str(first)], env=env, check=True, capture_output=True)  # the instance exists
    for round_ in range(3):
        declared = write_experiments(
            tmp_path / f"e{round_}.yaml", {f"r{round_}-e{i}": {"agent": "random"} for i in range(40)}
        )
        procs = [
            subprocess.Popen([*cli, str(declared)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            for _ in range(4)
        ]
        outputs = [p.communicate(timeout=120)[0].decode()[-2000:] for p in procs]
        assert [p.returncode for p in procs] == [0] * 4, outputs
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        assert len(instance.get_dynamic_partitions("experiment")) == 1 + 3 * 40
