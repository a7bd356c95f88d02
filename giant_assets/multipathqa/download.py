"""Fetch ``MultiPathQA.csv`` from the HuggingFace Hub (cached; token and endpoint from config/env)."""

from __future__ import annotations

from pathlib import Path

MULTIPATHQA_REPO = "tbuckley/MultiPathQA"
MULTIPATHQA_FILENAME = "MultiPathQA.csv"


class DownloadError(RuntimeError):
    """The CSV could not be fetched; the message says from where and why."""


def download_multipathqa(
    cache_dir: Path,
    repo_id: str = MULTIPATHQA_REPO,
    filename: str = MULTIPATHQA_FILENAME,
    revision: str | None = None,
    endpoint: str | None = None,
    local_files_only: bool = False,
) -> Path:
    """Download (or reuse the cached copy of) the CSV; ``HF_TOKEN`` is read by huggingface_hub itself."""
    # imported here, not at module level: the Dagster definitions import this module, few runs download
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        path = hf_hub_download(
            repo_id=repo_id,
            filename=filename,
            repo_type="dataset",
            revision=revision,
            cache_dir=str(cache_dir),
            endpoint=endpoint or None,
            local_files_only=local_files_only,
        )
    except LocalEntryNotFoundError as exc:
        raise DownloadError(
            f"{repo_id}/{filename} is not in the cache at {cache_dir} and the Hub could not be reached: {exc}"
        ) from exc
    except HfHubHTTPError as exc:
        raise DownloadError(f"downloading {repo_id}/{filename} failed: {exc}") from exc
    return Path(path)
