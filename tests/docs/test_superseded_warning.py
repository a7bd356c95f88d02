"""`dagster asset materialize` as the docs run it prints no SupersessionWarning: Dagster 1.13 warns on
every call that `dg launch` supersedes the command; the docs' (and the Makefile's) PYTHONWARNINGS
filter silences exactly that warning. Oracle: the same call without the filter prints it."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from giant_assets.core.settings import SUPERSEDED_WARNING_FILTER
from tests.docs.commands import docs_files

REPO = Path(__file__).resolve().parents[2]
DAGSTER = Path(sys.executable).with_name("dagster")


def readme_filter() -> str:
    """The filter the docs export (getting started, Reproduce Table 1, experiments): one and the same."""
    lines = [
        ln
        for page in docs_files(REPO)
        for ln in page.read_text().splitlines()
        if ln.startswith("export PYTHONWARNINGS=")
    ]
    filters = {shlex.split(line.split("=", 1)[1], comments=True)[0] for line in lines}
    assert len(lines) >= 2 and len(filters) == 1, filters
    return filters.pop()


def materialize_stderr(tmp_path: Path, **extra: str) -> str:
    """stderr of a materialize whose code location does not exist (it fails fast, after the warning)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"} | {"DAGSTER_HOME": str(tmp_path)}
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    cmd = [str(DAGSTER), "asset", "materialize", "-m", "no_such_code_location", "--select", "x"]
    return subprocess.run(cmd, env=env | extra, capture_output=True, text=True, timeout=120).stderr


def test_the_readme_filter_silences_exactly_the_supersession_warning(tmp_path: Path) -> None:
    assert "SupersessionWarning: Function `asset_materialize_command` is superseded" in materialize_stderr(
        tmp_path
    )
    filtered = materialize_stderr(tmp_path, PYTHONWARNINGS=readme_filter())
    assert "SupersessionWarning" not in filtered and "no_such_code_location" in filtered
    assert readme_filter() == SUPERSEDED_WARNING_FILTER  # the one the platform's printed commands set
    make = (REPO / "Makefile").read_text()
    assert re.search(r"^export PYTHONWARNINGS := (.*)$", make, re.M).group(1) == readme_filter()
