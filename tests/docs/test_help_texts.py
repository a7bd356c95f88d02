"""Every giant-* command's --help, run as a user runs it, shows no reStructuredText markup."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
# the judges are programs the grader runs (JSON on stdin, a verdict on stdout): they take no flags
COMMANDS = sorted(n for n in SCRIPTS if not n.startswith("giant-judge-") or n == "giant-judge-run")
MARKUP = re.compile(r"``|:[a-z]+:`")


@pytest.mark.parametrize("name", COMMANDS)
def test_help_has_no_rst_markup(name: str) -> None:
    module, function = SCRIPTS[name].split(":")
    code = f"import sys; sys.argv = [{name!r}, '--help']; from {module} import {function}; {function}()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    text = done.stdout + done.stderr
    assert "usage:" in text, text[-2000:]
    assert not MARKUP.search(text), text
