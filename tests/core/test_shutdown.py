"""A process that loaded the definitions skips the final collection at exit, and still flushes its files."""

import subprocess
import sys
from pathlib import Path

LOAD = "import giant_assets.platform.definitions\n"


def python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_loading_the_definitions_freezes_the_heap_at_exit() -> None:
    probe = "import atexit, gc\natexit._run_exitfuncs()\nprint(gc.get_freeze_count())\n"
    loaded, plain = python(LOAD + probe), python(probe)
    assert loaded.returncode == 0, loaded.stderr
    assert int(loaded.stdout) > 100_000  # the loaded code location's objects, frozen by the hook
    assert int(plain.stdout) == 0


def test_files_left_open_are_still_flushed_and_closed(tmp_path: Path) -> None:
    out, closed = tmp_path / "left-open.txt", tmp_path / "closed-in-with.txt"
    code = (
        LOAD
        + f"fh = open({str(out)!r}, 'w')\nfh.write('x' * 100_000)\n"  # never closed by the program
        + f"with open({str(closed)!r}, 'w') as g:\n    g.write('done')\n"
    )
    done = python(code)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "x" * 100_000 and closed.read_text() == "done"
