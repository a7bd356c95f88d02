"""The HuggingFace download path, against a loopback server speaking the Hub's resolve protocol."""

from __future__ import annotations

import pytest

from giant_assets.multipathqa.download import DownloadError, download_multipathqa
from giant_assets.multipathqa.sample import sample_csv_path
from tests.support.hf_server import HubServer

REPO = ("tbuckley/MultiPathQA", "MultiPathQA.csv")


def test_downloads_once_then_serves_from_cache(tmp_path):
    body = sample_csv_path().read_bytes()
    with HubServer({REPO: body}) as (endpoint, hub):
        first = download_multipathqa(tmp_path, endpoint=endpoint)
        second = download_multipathqa(tmp_path, endpoint=endpoint)
        assert first == second and first.read_bytes() == body
        assert len(hub.gets) == 1  # the second call revalidated with HEAD and reused the cache
        assert hub.gets[0] == "/datasets/tbuckley/MultiPathQA/resolve/main/MultiPathQA.csv"
    offline = download_multipathqa(tmp_path, endpoint=endpoint, local_files_only=True)
    assert offline.read_bytes() == body


def test_token_from_env_is_sent(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_test_token_123")
    with HubServer({REPO: b"a,b\n1,2\n"}) as (endpoint, hub):
        download_multipathqa(tmp_path, endpoint=endpoint)
    assert "Bearer hf_test_token_123" in hub.auth_headers


def test_missing_file_and_empty_cache_are_clear_errors(tmp_path):
    with (
        HubServer({}) as (endpoint, _),
        pytest.raises(DownloadError, match="tbuckley/MultiPathQA/MultiPathQA.csv"),
    ):
        download_multipathqa(tmp_path, endpoint=endpoint)
    with pytest.raises(DownloadError, match="not in the cache"):
        download_multipathqa(tmp_path / "empty", local_files_only=True)
