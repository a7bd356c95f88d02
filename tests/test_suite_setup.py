"""The suite's own set-up (tests/conftest.py) that keeps it fast: compiled modules are kept."""

from __future__ import annotations

import gc
import subprocess
import sys


def test_the_suite_and_its_subprocesses_write_bytecode() -> None:
    # PYTHONDONTWRITEBYTECODE, where the shell sets it, would make every dagster/giant-* process the tests
    # start compile the package again, and each worker rewrite every test module again
    child = subprocess.run(
        [sys.executable, "-c", "import sys; print(sys.flags.dont_write_bytecode, sys.dont_write_bytecode)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout.split() == ["0", "False"]
    assert sys.dont_write_bytecode is False


def test_what_collection_imported_is_frozen_out_of_the_collector() -> None:
    assert gc.get_freeze_count() > 100_000  # Dagster, pandas and the test modules: far more objects
