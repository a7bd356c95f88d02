"""giant-fetch-slides against a loopback GDC: faults, resume with Range, a SIGKILL mid-download, md5."""

from __future__ import annotations

import asyncio
import csv
import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from giant_assets.multipathqa.fetch_cli import main
from giant_assets.multipathqa.gdc import FetchPolicy, GdcFetcher
from giant_assets.multipathqa.inventory import check_csv
from giant_assets.multipathqa.sample import sample_csv_path
from giant_assets.slides.synthetic import SlideDesign
from tests.support.gdc_server import GdcServer, ServedFile
from tests.support.slides import write_pyramidal_slide

CLI = Path(sys.executable).with_name("giant-fetch-slides")
SLIDE_UUID = "aa11bb22-cc33-4d44-8e55-ff6677889900"
FAST = ["--backoff", "0.01", "--no-progress"]


def _sample_rows() -> list[dict]:
    with open(sample_csv_path(), newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _tcga_files(tmp_path: Path, size: tuple[int, int] = (1024, 768)) -> list[ServedFile]:
    """One real SVS per distinct TCGA file_id of the sample CSV, named as GDC names slides."""
    files = {}
    for row in _sample_rows():
        if row["benchmark_name"].startswith("tcga") and row["file_id"] not in files:
            stem = row["image_path"].removesuffix(".svs")
            path = write_pyramidal_slide(
                tmp_path / "src" / row["image_path"], SlideDesign(*size), 3, svs=True
            )
            files[row["file_id"]] = ServedFile(row["file_id"], f"{stem}.{SLIDE_UUID}.svs", path.read_bytes())
    return list(files.values())


def _landed(root: Path, served: ServedFile) -> bytes:
    return (root / served.file_id / served.file_name).read_bytes()


def test_cli_fills_the_gdc_layout_through_faults(tmp_path, capsys):
    files = _tcga_files(tmp_path)
    assert len(files) == 6
    corrupt, dropped, busy = files[0], files[1], files[2]
    corrupt.corrupt = 1
    dropped.drop_at = {0: 20_000}
    busy.errors_5xx, busy.metadata_5xx = 3, 2
    root = tmp_path / "wsi"
    root.mkdir()
    argv = ["--csv", str(sample_csv_path()), "--wsi-root", str(root), *FAST, "--concurrency", "3"]
    with GdcServer(files) as gdc:
        assert main([*argv, "--base-url", gdc.url]) == 0
        for served in files:
            assert _landed(root, served) == served.body
        assert not list(root.rglob("*.partial"))
        assert [r.range for r in gdc.data_requests(corrupt.file_id)] == [None, None]  # md5 wrong: again
        first, resumed = gdc.data_requests(dropped.file_id)
        assert (first.range, first.bytes_sent) == (None, 20_000)
        assert (resumed.range, resumed.bytes_sent) == ("bytes=20000-", len(dropped.body) - 20_000)
        assert [r.status for r in gdc.data_requests(busy.file_id)] == [503, 503, 503, 200]
        out = capsys.readouterr().out
        assert "downloaded 6, already complete 0, already under the root 0, failed 0" in out
        assert "md5" in out and "RemoteProtocolError" in out and "HTTP 503" in out
        requests_before = len(gdc.requests)
        assert main([*argv, "--base-url", gdc.url]) == 0  # rerun: everything resolves, nothing is asked
        assert len(gdc.requests) == requests_before
        assert "0 TCGA slide(s) to fetch" in capsys.readouterr().out
    inventory, _ = check_csv(sample_csv_path(), root)
    summary = inventory.summary.set_index("benchmark_name")
    assert summary.loc[["tcga", "tcga_slidebench", "tcga_expert_vqa"], "found"].tolist() == [3, 2, 2]
    assert set(inventory.problems["benchmark_name"]) == {"gtex", "panda"}


def _fetch(root: Path, url: str, files: list[ServedFile], attempts: int = 3):
    fetcher = GdcFetcher(root, url, FetchPolicy(attempts=attempts, backoff_s=0.001))
    return {r.file_id: r for r in fetcher.run([f.file_id for f in files])}


def test_a_body_that_never_matches_its_md5_fails_naming_the_file(tmp_path):
    files = _tcga_files(tmp_path)[:2]
    files[0].corrupt = 99
    with GdcServer(files) as gdc:
        results = _fetch(tmp_path / "wsi", gdc.url, files)
        assert len(gdc.data_requests(files[0].file_id)) == 3
    bad = results[files[0].file_id]
    assert bad.status == "failed" and bad.path is None
    assert files[0].file_name in bad.error and files[0].file_id in bad.error
    assert f"differs from GDC's {hashlib.md5(files[0].body).hexdigest()} after 3 downloads" in bad.error
    assert not (tmp_path / "wsi" / files[0].file_id / files[0].file_name).exists()
    assert not list((tmp_path / "wsi").rglob("*.partial"))
    assert results[files[1].file_id].status == "downloaded"


def test_endless_5xx_and_unknown_files_fail_clearly(tmp_path):
    files = _tcga_files(tmp_path)[:2]
    files[0].errors_5xx = 99
    with GdcServer(files) as gdc:
        fetcher = GdcFetcher(tmp_path / "wsi", gdc.url, FetchPolicy(attempts=3, backoff_s=0.001))
        unknown = "00000000-0000-4000-8000-000000000000"
        results = {r.file_id: r for r in fetcher.run([files[0].file_id, unknown])}
    assert "gave up after 3 failed attempts: HTTP 503" in results[files[0].file_id].error
    assert f"{unknown}: GET {gdc.url}/files/{unknown} answered HTTP 404" == results[unknown].error


def test_a_file_name_that_would_leave_the_folder_is_refused(tmp_path):
    files = _tcga_files(tmp_path)[:1]
    files[0].file_name = "../../escaped.svs"
    with GdcServer(files) as gdc:
        result = _fetch(tmp_path / "wsi", gdc.url, files)[files[0].file_id]
    assert result.status == "failed" and "not a plain file name" in result.error
    assert not list(tmp_path.rglob("escaped.svs"))


def test_resumes_after_the_cli_is_killed_mid_download(tmp_path):
    rows = [r for r in _sample_rows() if (r["benchmark_name"], r["benchmark_id"]) in
            {("tcga", "0"), ("tcga", "1"), ("tcga_slidebench", "1")}]  # fmt: skip
    csv_path = tmp_path / "tcga.csv"
    with open(csv_path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    small = [f for f in _tcga_files(tmp_path) if f.file_id in {r["file_id"] for r in rows}]
    big = _tcga_files(tmp_path / "big", size=(4096, 3072))[0]
    small = [f for f in small if f.file_id != big.file_id]
    big.bytes_per_s = 120_000
    root = tmp_path / "wsi"
    root.mkdir()
    partial = root / big.file_id / (big.file_name + ".partial")
    with GdcServer([*small, big]) as gdc:
        argv = [str(CLI), "--csv", str(csv_path), "--wsi-root", str(root), "--base-url", gdc.url]
        argv += ["--backoff", "0.01"]  # with the progress bar (on stderr)
        stderr = open(tmp_path / "first_run.err", "w")  # noqa: SIM115
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
        deadline = time.monotonic() + 60
        while not (
            all((root / f.file_id / f.file_name).exists() for f in small)
            and partial.exists()
            and partial.stat().st_size > 100_000
        ):
            assert proc.poll() is None and time.monotonic() < deadline, (
                tmp_path / "first_run.err"
            ).read_text()
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        stderr.close()
        kept = partial.stat().st_size
        assert 100_000 < kept < len(big.body) and not (root / big.file_id / big.file_name).exists()
        big.bytes_per_s = None
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "downloaded 1, already complete 0, already under the root 2, failed 0" in done.stdout
        kib = f"{len(big.body) / 1024:.0f}k"
        assert f"100%|██████████| {kib}/{kib}" in done.stderr  # the progress bar, resumed to full
        for served in small:
            assert len(gdc.data_requests(served.file_id)) == 1  # never downloaded again
        resumed = gdc.data_requests(big.file_id)[-1]
        assert resumed.range == f"bytes={kept}-" and resumed.bytes_sent == len(big.body) - kept
    assert _landed(root, big) == big.body and not partial.exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--concurrency", "0"], "must be >= 1"),
        (["--wsi-root", "/nonexistent/wsi"], "is not a directory"),
        (["--csv", "/nonexistent/MultiPathQA.csv"], "MultiPathQA CSV not found"),
    ],
)
def test_usage_errors_exit_2(tmp_path, capsys, argv, message):
    base = {"--csv": str(sample_csv_path()), "--wsi-root": str(tmp_path)}
    base.update(dict(zip(argv[::2], argv[1::2], strict=True)))
    assert main([x for kv in base.items() for x in kv]) == 2
    assert message in capsys.readouterr().err


def _fetch_within(root: Path, url: str, files: list[ServedFile], attempts: int, seconds: float = 30):
    """``_fetch`` that fails the test, instead of hanging, if the downloads do not end in time."""
    fetcher = GdcFetcher(root, url, FetchPolicy(attempts=attempts, backoff_s=0.001))
    results = asyncio.run(asyncio.wait_for(fetcher.fetch_all([f.file_id for f in files]), seconds))
    return {r.file_id: r for r in results}


def test_a_body_longer_than_its_published_size_is_cut_there(tmp_path):
    files = _tcga_files(tmp_path)[:1]
    slide = files[0].body
    files[0].body = slide + os.urandom(8 << 20)  # a server that streams on past the file's end
    files[0].published_size = len(slide)
    with GdcServer(files) as gdc:
        result = _fetch_within(tmp_path / "wsi", gdc.url, files, attempts=3)[files[0].file_id]
        (request,) = gdc.data_requests(files[0].file_id)
    assert result.status == "downloaded" and result.bytes_fetched == len(slide)
    assert _landed(tmp_path / "wsi", files[0]) == slide


@pytest.mark.parametrize("lie", ["size", "range"])
def test_a_lying_server_gets_attempts_requests_then_the_file_fails(tmp_path, lie):
    files = _tcga_files(tmp_path)[:2]
    liar = files[0]
    if lie == "size":  # GDC publishes more bytes than the body ever has
        liar.published_size = len(liar.body) + 1000
    else:  # Range ignored, and every response drops half-way: received bytes are no progress
        liar.ignore_range, liar.drop_every = True, len(liar.body) // 2
    with GdcServer(files) as gdc:
        results = _fetch_within(tmp_path / "wsi", gdc.url, files, attempts=3)
        # the first request grew the empty .partial (progress, not counted), the 3 after it did not
        assert len(gdc.data_requests(liar.file_id)) == 1 + 3
    assert results[liar.file_id].status == "failed"
    assert (
        f"{liar.file_name} ({liar.file_id}): gave up after 3 failed attempts" in results[liar.file_id].error
    )
    assert results[files[1].file_id].status == "downloaded"
    partial = tmp_path / "wsi" / liar.file_id / (liar.file_name + ".partial")
    # kept for a rerun to resume (unless the last answer was a 416 for its range), never past the size
    assert not partial.exists() or partial.stat().st_size <= len(liar.body)


def test_unusable_file_names_and_empty_files_fail_alone_with_the_summary(tmp_path, capsys):
    files = _tcga_files(tmp_path)
    long_name, empty = files[0], files[1]
    long_name.file_name = "x" * 296 + ".svs"  # 300 bytes: the file system refuses it (File name too long)
    empty.published_size = 0
    root = tmp_path / "wsi"
    root.mkdir()
    with GdcServer(files) as gdc:
        code = main(["--csv", str(sample_csv_path()), "--wsi-root", str(root), *FAST, "--base-url", gdc.url])
    out = capsys.readouterr().out
    assert code == 1
    assert "downloaded 4, already complete 0, already under the root 0, failed 2" in out
    assert f"FAILED {long_name.file_id}: {long_name.file_id}: GDC file_name is 300 bytes, too long" in out
    assert f"FAILED {empty.file_id}: {empty.file_id}: GDC lists {empty.file_name} with file_size 0" in out
    for served in files[2:]:
        assert _landed(root, served) == served.body


def test_metadata_beyond_a_megabyte_fails_that_file(tmp_path):
    files = _tcga_files(tmp_path)[:2]
    files[0].metadata_padding = 2 << 20  # GDC's reply is a few hundred bytes; this one never ends soon
    with GdcServer(files) as gdc:
        results = _fetch_within(tmp_path / "wsi", gdc.url, files, attempts=3)
        assert gdc.data_requests(files[0].file_id) == []
    assert "answered more than 1048576 bytes of metadata" in results[files[0].file_id].error
    assert results[files[1].file_id].status == "downloaded"


def test_resumes_that_bring_bytes_are_not_failed_attempts(tmp_path):
    """Every response sends a sixth of the body and drops; Range honoured: each resume makes progress,
    so 2 --attempts suffice for the 6 requests (once: 'gave up after 2 failed attempts')."""
    files = _tcga_files(tmp_path)[:1]
    files[0].drop_every = len(files[0].body) // 6 + 1
    with GdcServer(files) as gdc:
        (result,) = _fetch_within(tmp_path / "wsi", gdc.url, files, attempts=2).values()
        requests = gdc.data_requests(files[0].file_id)
    assert result.status == "downloaded" and result.bytes_fetched == len(files[0].body)
    assert len(requests) == 6 and [r.range is None for r in requests] == [True] + [False] * 5
    assert _landed(tmp_path / "wsi", files[0]) == files[0].body


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_host_ends_the_run_at_once(tmp_path, capsys):
    """Offline (here: nothing listens on the port): one connection failure ends the run, with no retry
    (nothing logged: a retry logs its backoff), the other files failed as not tried."""
    root = tmp_path / "wsi"
    root.mkdir()
    url = f"http://127.0.0.1:{_closed_port()}"
    logged = []
    ids = [f.file_id for f in _tcga_files(tmp_path)]
    policy = FetchPolicy(attempts=5, backoff_s=0.001, concurrency=1)
    fetcher = GdcFetcher(root, url, policy, log=logged.append)
    results = fetcher.run(ids)
    assert fetcher.unreachable.startswith(f"cannot reach {url} (ConnectError: ")
    assert [r.status for r in results] == ["failed"] * len(ids) and not logged
    assert sum(r.error.startswith("not tried: cannot reach") for r in results) == len(ids) - 1
    argv = ["--csv", str(sample_csv_path()), "--wsi-root", str(root), *FAST]
    assert main([*argv, "--base-url", url]) == 1
    out = capsys.readouterr()
    assert out.err.count("\n") == 1 and "Traceback" not in out.err
    assert out.err.startswith(f"giant-fetch-slides: cannot reach {url} (ConnectError: ")
    assert f"nothing fetched ({len(ids)} slide(s) left); check the network connection" in out.err
