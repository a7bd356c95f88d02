"""Every giant-* command's --help, run as a user runs it, shows no reStructuredText markup.

One process prints every command's --help in turn (its entry point called with ``sys.argv`` as the
console script sets it), so the package is imported once, not once per command.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.warm_start.server import warm_code

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
# the judges are programs the grader runs (JSON on stdin, a verdict on stdout): they take no flags
COMMANDS = sorted(n for n in SCRIPTS if not n.startswith("giant-judge-") or n == "giant-judge-run")
MARKUP = re.compile(r"``|:[a-z]+:`")
# each entry point with --help, its stdout and stderr captured; one JSON object {name: text} at the end
HELP_ALL = """
import contextlib, importlib, io, json, sys
texts = {}
for name, target in json.loads(sys.argv[1]).items():
    module, function = target.split(":")
    out = io.StringIO()
    sys.argv = [name, "--help"]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            getattr(importlib.import_module(module), function)()
        except SystemExit:
            pass
    texts[name] = out.getvalue()
sys.__stdout__.write(json.dumps(texts))
"""


@pytest.fixture(scope="module")
def helps() -> dict[str, str]:
    """Every command's --help text, from one process."""
    scripts = json.dumps({name: SCRIPTS[name] for name in COMMANDS})
    done = subprocess.run(
        [sys.executable, "-c", HELP_ALL, scripts],
        capture_output=True,
        text=True,
        timeout=300,
        env=warm_code(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("name", COMMANDS)
def test_help_has_no_rst_markup(name: str, helps: dict[str, str]) -> None:
    text = helps[name]
    assert "usage:" in text, text[-2000:]
    assert not MARKUP.search(text), text
