"""``giant-view`` as a user runs it: prints its URL, serves the folder on loopback, stops on SIGTERM; a
missing folder is one line and exit 2. (Drawing on first visit: tests/report/test_viewer_assets.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

COMMAND = [sys.executable, "-m", "giant_assets.report.viewer.serve"]


def test_giant_view_serves_the_folder_on_loopback_and_stops_on_sigterm(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<p>experiments</p>")
    proc = subprocess.Popen(
        [*COMMAND, "--port", "0", "--dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("trajectory viewer: http://127.0.0.1:"), line
        url = line.split()[2]
        with urllib.request.urlopen(url + "index.html", timeout=10) as response:
            assert response.read() == b"<p>experiments</p>"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0


def test_giant_view_without_its_folder_says_so_in_one_line(tmp_path: Path) -> None:
    out = subprocess.run(
        [*COMMAND, "--dir", str(tmp_path / "nope")], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "nope" in out.stderr
