"""Dagster's migration scripts, parsed once per process instead of at every look.

Dagster's storages ask alembic for its migration folder (``ScriptDirectory.from_config``) each time
they check a database's schema revision or stamp a new one: the runs index, the event index and the
schedules of every instance opened, and the in-memory storages of every ephemeral instance
(``materialize()`` without an instance makes one). Each ask parses the folder's ~90 revision files
anew. ``perf/bench_instance_open.py``, CPU per instance opened: a new home ~0.38 -> ~0.17 s, an
existing one (every run worker, code server and CLI command) ~0.10 -> ~0.03 s, an ephemeral instance
~0.10 -> ~0.03 s.

``parse_once()`` makes ``ScriptDirectory.from_config`` return the folder parsed the first time for the
same script and version locations: the files are part of the installed Dagster and do not change while a
process runs. Importing :mod:`giant_assets.platform` installs it.
"""

from __future__ import annotations

import threading

from alembic.config import Config
from alembic.script import ScriptDirectory

alembic_from_config = ScriptDirectory.__dict__["from_config"].__func__  # alembic's own: (cls, config)
_parsed: dict[tuple[str, tuple[str, ...]], ScriptDirectory] = {}
_lock = threading.Lock()


def parsed_scripts(config: Config) -> ScriptDirectory:
    """The migration folder ``config`` names, parsed on the process's first ask (a config naming none
    is left to alembic, which says so)."""
    location = config.get_alembic_option("script_location")  # where alembic's own from_config looks
    if location is None:
        return alembic_from_config(ScriptDirectory, config)
    key = (location, tuple(config.get_version_locations_list() or ()))
    with _lock:
        found = _parsed.get(key)
        if found is None:
            found = _parsed[key] = alembic_from_config(ScriptDirectory, config)
        return found


def _from_config(cls: type[ScriptDirectory], config: Config) -> ScriptDirectory:
    return parsed_scripts(config)  # alembic's own builds a ScriptDirectory whatever the class asked


def parse_once() -> None:
    """Make alembic's ``ScriptDirectory.from_config`` answer from :func:`parsed_scripts` (idempotent)."""
    ScriptDirectory.from_config = classmethod(_from_config)  # type: ignore[method-assign,assignment]
