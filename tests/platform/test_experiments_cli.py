"""``giant-experiments``: its help describes each subcommand; --file works before or after it."""

from __future__ import annotations

from pathlib import Path

import pytest

from giant_assets.platform.experiments_cli import main
from tests.support.dagster_env import write_experiments
from tests.support.warm_start.server import warm_code


def test_help_describes_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "check validate the experiments file" in text
    assert "list one line per declared experiment" in text
    assert "sync add every declared experiment, and every benchmark" in text
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
    assert [line.split("\t")[:2] for line in capsys.readouterr().out.splitlines()[1:]] == [
        ["a", "random"],
        ["b", "majority"],
    ]


def test_list_has_a_header_and_tells_providers_and_endpoints_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two Azure experiments and an OpenAI one of the same model read apart: provider and endpoint."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    gpt = {"agent": "giant", "model": "gpt-5"}
    declared = write_experiments(
        tmp_path / "e.yaml",
        {
            "oa": gpt,
            "az-east": gpt | {"provider": "azure", "azure_endpoint": "https://east.openai.azure.com/"},
            "az-west": gpt
            | {"provider": "azure", "azure_endpoint": "https://west.openai.azure.com", "deployment": "g5"},
            "rand": {"agent": "random"},
        },
    )
    assert main(["list", "--file", str(declared)]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert rows[0] == ["NAME", "AGENT", "PROVIDER", "MODEL", "ENDPOINT", "RUNS", "CONFIG_HASH"]
    assert [row[:6] for row in rows[1:]] == [
        ["az-east", "giant", "azure", "gpt-5", "https://east.openai.azure.com", "1"],
        ["az-west", "giant", "azure", "gpt-5 (deployment g5)", "https://west.openai.azure.com", "1"],
        ["oa", "giant", "openai", "gpt-5", "https://api.openai.com/v1", "1"],
        ["rand", "random", "-", "-", "-", "1"],
    ]
    assert len({row[6] for row in rows[1:]}) == 4  # four distinct config hashes


# Holds the write lock of the instance's event-log index (where Dagster keeps dynamic partitions) until
# a line comes on stdin, then inserts the partitions named in argv[2:] itself and commits: every sync that
# read the table before now inserts keys that exist, as when another process wins the race.
WINNER = r"""
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], timeout=30, isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
db.executemany(
    "INSERT INTO dynamic_partitions (partitions_def_name, partition, create_timestamp) VALUES (?, ?, ?)",
    [("experiment", key, time.time()) for key in sys.argv[2:]],
)
db.execute("COMMIT")
"""


# `giant-experiments sync` that, at its first INSERT of partitions (after Dagster has looked for the
# keys), says "inserting" and waits for a line on stdin: the test lets the winner commit while both syncs
# wait there, so their inserts always meet keys that exist by then (no sleep, no lock wait, no chance
# that the race is missed).
SYNC = r"""
import sys
from sqlalchemy import event
from sqlalchemy.engine import Engine
paused = []

@event.listens_for(Engine, "before_cursor_execute")
def pause(conn, cursor, statement, parameters, context, executemany):
    insert = " ".join(statement.split()).upper().startswith("INSERT INTO DYNAMIC_PARTITIONS")
    if insert and not paused:
        paused.append(1)
        print("inserting", flush=True)
        sys.stdin.readline()

from giant_assets.platform.experiments_cli import main
sys.exit(main(sys.argv[1:]))
"""


def _until_inserting(sync) -> list[str]:
    """The sync's output lines up to its first "inserting" (the line it prints before its INSERT)."""
    lines = []
    for line in sync.stdout:
        if line == "inserting\n":
            return lines
        lines.append(line)
    raise AssertionError(f"the sync ended before inserting: {''.join(lines)[-2000:]}")


def test_a_sync_that_loses_the_race_to_another_adds_what_is_still_missing(tmp_path: Path) -> None:
    """`giant-experiments sync` beside another writer of the same partitions (a second shell, the
    daemon's sensor): Dagster inserts the keys it did not find a moment before, so the loser's insert
    used to fail on a UNIQUE constraint; it now reads again and adds only what is still missing."""
    import os
    import subprocess
    import sys

    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef

    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        instance.add_dynamic_partitions("experiment", ["seed"])  # the instance and its tables exist
    index = home / "history" / "runs" / "index.db"
    names = [f"e{i}" for i in range(10)]
    declared = write_experiments(tmp_path / "e.yaml", {n: {"agent": "random"} for n in ["seed", *names]})
    winner = subprocess.Popen(
        [sys.executable, "-c", WINNER, str(index), *names[:6]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert winner.stdout.readline() == "locked\n"
    env = warm_code({**os.environ, "DAGSTER_HOME": str(home), "GIANT_DATA_DIR": str(tmp_path / "data")})
    cli = [sys.executable, "-c", SYNC, "sync", "--file", str(declared)]
    syncs = [
        subprocess.Popen(
            cli, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for _ in range(2)
    ]
    for sync in syncs:  # both have looked for the keys and are about to insert the ones they missed
        _until_inserting(sync)
    winner.stdin.write("go\n")
    winner.stdin.close()
    assert winner.wait(30) == 0  # the winner's keys are committed
    outputs = [p.communicate("go\n", timeout=60)[0][-2000:] for p in syncs]
    assert [p.returncode for p in syncs] == [0, 0], outputs
    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        assert sorted(instance.get_dynamic_partitions("experiment")) == sorted(["seed", *names])
