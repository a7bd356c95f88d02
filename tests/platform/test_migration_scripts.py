"""Dagster's migration scripts parsed once per process (platform/migration_scripts.py): the same folder
answers every later look, with the revisions alembic's own parse finds; another folder is parsed on its
own; a new instance is still stamped at the head revision and an existing one still checked against it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from dagster import DagsterInstance
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.event_log.sqlite import sqlite_event_log
from dagster._core.storage.runs.sqlite import sqlite_run_storage
from dagster._core.storage.sql import get_alembic_config

import giant_assets.platform  # noqa: F401  (installs parse_once)
from giant_assets.platform import migration_scripts

REPO = Path(__file__).resolve().parents[2]


def alembic_parse(config: Config) -> ScriptDirectory:
    return migration_scripts.alembic_from_config(ScriptDirectory, config)


def one_revision_folder(folder: Path, revision: str) -> Config:
    (folder / "versions").mkdir(parents=True)
    (folder / "script.py.mako").write_text("")
    (folder / "versions" / f"{revision}_first.py").write_text(
        f'revision = "{revision}"\ndown_revision = None\nbranch_labels = None\ndepends_on = None\n'
    )
    config = Config()
    config.set_main_option("script_location", str(folder))
    return config


def test_dagsters_folder_is_parsed_once_with_alembics_revisions() -> None:
    runs = get_alembic_config(sqlite_run_storage.__file__)
    events = get_alembic_config(sqlite_event_log.__file__)
    first = ScriptDirectory.from_config(runs)
    assert ScriptDirectory.from_config(runs) is first
    assert ScriptDirectory.from_config(events) is first  # both name the same folder
    own = alembic_parse(runs)
    assert own is not first
    assert first.get_heads() == own.get_heads()
    assert {r.revision for r in first.walk_revisions()} == {r.revision for r in own.walk_revisions()}


def test_another_folder_is_parsed_on_its_own(tmp_path: Path) -> None:
    a = ScriptDirectory.from_config(one_revision_folder(tmp_path / "a", "aaa111"))
    b = ScriptDirectory.from_config(one_revision_folder(tmp_path / "b", "bbb222"))
    assert (a.get_heads(), b.get_heads()) == (["aaa111"], ["bbb222"])
    assert ScriptDirectory.from_config(one_revision_folder(tmp_path / "c", "aaa111")) is not a


def test_instances_are_stamped_and_checked_at_the_head(tmp_path: Path) -> None:
    head = alembic_parse(get_alembic_config(sqlite_run_storage.__file__)).get_current_head()
    shutil.copyfile(REPO / "dagster_home" / "dagster.yaml", tmp_path / "dagster.yaml")
    for _ in range(2):  # a new home, then the same home opened again
        instance = DagsterInstance.from_ref(InstanceRef.from_dir(str(tmp_path)))
        try:
            assert instance.run_storage.alembic_version() == (head, head)
            assert instance.event_log_storage.alembic_version() == (head, head)
        finally:
            instance.dispose()
    with DagsterInstance.ephemeral() as ephemeral:
        assert ephemeral.run_storage.has_instance  # created and stamped in memory


def test_a_config_naming_no_folder_is_left_to_alembic() -> None:
    with pytest.raises(CommandError, match="script_location"):
        ScriptDirectory.from_config(Config())
