"""``giant-view`` as a user runs it: prints its URL, serves the folder on loopback, stops on SIGTERM; a
missing folder is one line and exit 2. (Drawing on first visit: tests/report/test_viewer_assets.py.)"""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from giant_assets.report.viewer.serve import make_server, serve_in_thread

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


def test_paths_no_file_can_have_get_400_or_404_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "index.html").write_text("<p>experiments</p>")
    server, thread = serve_in_thread(tmp_path)
    host, port = server.server_address[:2]
    try:
        for method, path, status in [
            ("GET", "/index.html%00.png", 400),
            ("HEAD", "/%00", 400),
            ("GET", "/" + "a/" * 10_000 + "index.html", 404),
            ("HEAD", "/" + "b" * 5_000, 404),
            ("GET", "/index.html", 200),  # and the server still serves
        ]:
            conn = http.client.HTTPConnection(host, port, timeout=10)
            conn.request(method, path)
            assert conn.getresponse().status == status, path[:40]
            conn.close()
    finally:
        server.shutdown()
        thread.join(10)
    assert "Traceback" not in capsys.readouterr().err


def test_a_request_naming_another_host_is_refused_dns_rebinding(tmp_path: Path) -> None:
    """A page on evil.example that rebinds its name to 127.0.0.1 sends ``Host: evil.example:PORT``: the
    trajectories and the slides' tiles are not its to read; loopback names and --name ones are served."""
    (tmp_path / "index.html").write_text("<p>experiments</p>")
    server = make_server(tmp_path, 0, names=["viewer.lab.internal"])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    try:
        for method, named, status in [
            ("GET", f"evil.example:{port}", 403),
            ("HEAD", f"evil.example:{port}", 403),
            ("GET", "", 403),
            ("GET", f"127.0.0.1:{port + 1}", 403),  # another port is another origin
            ("GET", f"localhost:{port}", 200),
            ("GET", f"LOCALHOST:{port}", 200),
            ("GET", f"[::1]:{port}", 200),
            ("GET", f"viewer.lab.internal:{port}", 200),
        ]:
            conn = http.client.HTTPConnection(host, port, timeout=10)
            conn.putrequest(method, "/index.html", skip_host=True)
            if named:
                conn.putheader("Host", named)
            conn.endheaders()
            answer = conn.getresponse()
            body = answer.read()
            assert answer.status == status, named
            assert (b"experiments" in body) == (status == 200 and method == "GET"), named
            conn.close()
    finally:
        server.shutdown()
        thread.join(10)
