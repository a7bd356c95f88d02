"""Download TCGA slides from the GDC data API into the gdc-client layout ``root/<file_id>/<file_name>``.

For each file: ``GET {base}/files/<file_id>`` gives ``file_name``, ``md5sum`` and ``file_size``; the body
comes from ``GET {base}/data/<file_id>`` into ``<file_name>.partial``, resumed with an HTTP Range request
after a dropped connection or a killed process, checked against the published size and md5, and only
then renamed to its final name. 5xx replies and transport errors are retried with exponential backoff;
a body whose md5 differs is downloaded again. Everything is bounded: a body is cut at the published
size, and a file gets at most ``attempts`` body requests that made no progress (retries that brought
the ``.partial`` no further, and md5 re-downloads; a resume that grew it is free, and the published size
bounds those; a rerun resumes its ``.partial``); a file still wrong then, or one whose metadata cannot
be used or written (a name too long for the file system, a size of 0), is reported as failed and the
others go on. A host that cannot be resolved or connected to before any reply (offline, a wrong
``base_url``) ends the whole run at once (``GdcFetcher.unreachable`` says why), not each file after
its retries.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import httpx

DEFAULT_GDC_API = "https://api.gdc.cancer.gov"
PARTIAL_SUFFIX = ".partial"
_MD5_RE = re.compile(r"[0-9a-fA-F]{32}")
_UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_RETRYABLE = (httpx.TransportError,)  # dropped connections, timeouts, refused connections
_NO_CONNECTION = (httpx.ConnectError, httpx.ConnectTimeout)  # name not resolved, refused, no route
MAX_METADATA_BYTES = 1 << 20  # a /files/<id> reply is a few hundred bytes; more is not GDC
MAX_NAME_BYTES = 255  # a file name's limit on Linux/macOS file systems (the .partial suffix included)


@dataclass(frozen=True)
class FetchPolicy:
    """How hard to try: parallel files, tries per file, backoff (seconds, doubled per retry, capped)."""

    concurrency: int = 4
    attempts: int = 5
    backoff_s: float = 2.0
    max_backoff_s: float = 60.0
    timeout_s: float = 60.0
    chunk_bytes: int = 1 << 20


@dataclass(frozen=True)
class GdcFile:
    """What GDC publishes about a file."""

    file_id: str
    file_name: str
    md5sum: str
    file_size: int


@dataclass(frozen=True)
class FetchResult:
    file_id: str
    status: str  # "downloaded", "present" or "failed"
    path: Path | None = None
    bytes_fetched: int = 0
    error: str | None = None


class FetchError(Exception):
    """A file that cannot be fetched (after retries where retrying makes sense)."""


class HostUnreachable(FetchError):
    """The GDC host could not be resolved or connected to, and no request has reached it yet."""

    def __init__(self, base_url: str, exc: Exception) -> None:
        super().__init__(f"cannot reach {base_url} ({type(exc).__name__}: {exc})")


class _Retry(Exception):
    """One attempt failed in a way worth retrying."""

    def __init__(self, message: str, retry_after: float | None = None, received: int = 0) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.received = received  # body bytes this attempt wrote


def md5_of(path: Path, chunk_bytes: int = 1 << 20) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(chunk_bytes), b""):
            digest.update(chunk)
    return digest.hexdigest()


def parse_gdc_file(file_id: str, payload: object) -> GdcFile:
    """Validate a ``/files/<id>`` reply; the file name must be a plain name (it becomes a path)."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, dict):
        raise FetchError(f"{file_id}: GDC metadata has no 'data' object")
    name, md5, size = data.get("file_name"), data.get("md5sum"), data.get("file_size")
    if not isinstance(name, str) or not name or name in {".", ".."} or "/" in name or "\\" in name:
        raise FetchError(f"{file_id}: GDC file_name {name!r} is not a plain file name")
    if "\x00" in name or name.endswith(PARTIAL_SUFFIX):
        raise FetchError(f"{file_id}: GDC file_name {name!r} is not usable")
    if len((name + PARTIAL_SUFFIX).encode()) > MAX_NAME_BYTES:
        raise FetchError(
            f"{file_id}: GDC file_name is {len(name.encode())} bytes, too long for a file name "
            f"(at most {MAX_NAME_BYTES - len(PARTIAL_SUFFIX)}); download it by hand under a shorter name"
        )
    if not isinstance(md5, str) or not _MD5_RE.fullmatch(md5):
        raise FetchError(f"{file_id}: GDC md5sum {md5!r} is not an md5 hex digest")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise FetchError(f"{file_id}: GDC file_size {size!r} is not a byte count")
    if size == 0:
        raise FetchError(f"{file_id}: GDC lists {name} with file_size 0: no slide to download")
    return GdcFile(file_id, name, md5.lower(), size)


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after", "")
    return float(value) if value.isdigit() else None


class GdcFetcher:
    """Fetch files by GDC UUID under ``wsi_root``; ``on_bytes(n)`` and ``on_total(n)`` feed a progress bar."""

    def __init__(
        self,
        wsi_root: Path,
        base_url: str = DEFAULT_GDC_API,
        policy: FetchPolicy | None = None,
        on_bytes: Callable[[int], None] = lambda n: None,
        on_total: Callable[[int], None] = lambda n: None,
        log: Callable[[str], None] = lambda message: None,
    ) -> None:
        self.wsi_root = Path(wsi_root)
        self.base_url = base_url.rstrip("/")
        self.policy = policy or FetchPolicy()
        self.on_bytes, self.on_total, self.log = on_bytes, on_total, log
        self.reached = False  # a reply of the host was seen: a later connect failure is a retryable blip
        self.unreachable: str | None = None  # why the run ended before reaching the host, else None

    def run(self, file_ids: Iterable[str]) -> list[FetchResult]:
        return asyncio.run(self.fetch_all(file_ids))

    async def fetch_all(self, file_ids: Iterable[str]) -> list[FetchResult]:
        ids = list(dict.fromkeys(file_ids))
        bad = [f for f in ids if not _UUID_RE.fullmatch(f)]
        if bad:
            raise ValueError(f"not GDC file UUIDs: {bad[:5]}")
        gate = asyncio.Semaphore(max(1, self.policy.concurrency))
        limits = httpx.Limits(max_connections=max(1, self.policy.concurrency) * 2)
        timeout = httpx.Timeout(self.policy.timeout_s)
        async with httpx.AsyncClient(timeout=timeout, limits=limits, follow_redirects=True) as client:

            async def one(file_id: str) -> FetchResult:
                async with gate:
                    if self.unreachable is not None:
                        return FetchResult(file_id, "failed", error=f"not tried: {self.unreachable}")
                    try:
                        return await self._fetch_one(client, file_id)
                    except HostUnreachable as exc:
                        self.unreachable = self.unreachable or str(exc)
                        return FetchResult(file_id, "failed", error=str(exc))
                    except FetchError as exc:
                        error = str(exc)
                    except OSError as exc:  # the disk: full, read-only, a name it refuses
                        where = exc.filename or self.wsi_root
                        error = f"{file_id}: cannot write {where}: {exc.strerror or exc}"
                    except Exception as exc:  # one file's surprise never ends the others' downloads
                        error = f"{file_id}: {type(exc).__name__}: {exc}"
                    self.log(f"failed: {error}")
                    return FetchResult(file_id, "failed", error=error)

            return list(await asyncio.gather(*(one(f) for f in ids)))

    async def _with_retries(self, what: str, attempt_once) -> object:
        """Run ``attempt_once()`` until it returns; back off on _Retry, give up after policy.attempts."""
        failures = 0
        while True:
            try:
                return await attempt_once()
            except _Retry as exc:
                failures += 1
                await self._back_off(what, exc, failures)

    async def _back_off(self, what: str, exc: _Retry, failures: int) -> None:
        """Wait before the next try, or raise FetchError once ``failures`` reaches policy.attempts."""
        if failures >= self.policy.attempts:
            raise FetchError(f"{what}: gave up after {failures} failed attempts: {exc}") from None
        delay = min(self.policy.max_backoff_s, self.policy.backoff_s * 2 ** (failures - 1))
        delay = max(delay, min(exc.retry_after or 0.0, self.policy.max_backoff_s))
        self.log(f"{what}: {exc}; retrying in {delay:.1f}s")
        await asyncio.sleep(delay)

    async def metadata(self, client: httpx.AsyncClient, file_id: str) -> GdcFile:
        url = f"{self.base_url}/files/{file_id}"

        async def attempt() -> GdcFile:
            body = bytearray()
            try:
                params = {"fields": "file_name,md5sum,file_size"}
                async with client.stream("GET", url, params=params) as response:
                    self.reached = True
                    if response.status_code >= 500:
                        raise _Retry(f"HTTP {response.status_code}", retry_after=_retry_after(response))
                    if response.status_code != 200:
                        raise FetchError(f"{file_id}: GET {url} answered HTTP {response.status_code}")
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > MAX_METADATA_BYTES:
                            too_long = f"more than {MAX_METADATA_BYTES} bytes of metadata"
                            raise FetchError(f"{file_id}: GET {url} answered {too_long}")
            except _RETRYABLE as exc:
                if isinstance(exc, _NO_CONNECTION) and not self.reached:
                    raise HostUnreachable(self.base_url, exc) from None
                raise _Retry(f"{type(exc).__name__}: {exc}") from None
            try:
                payload = json.loads(body)
            except (ValueError, RecursionError):
                raise FetchError(f"{file_id}: GET {url} did not answer JSON") from None
            return parse_gdc_file(file_id, payload)

        return await self._with_retries(f"{file_id} metadata", attempt)

    async def _fetch_one(self, client: httpx.AsyncClient, file_id: str) -> FetchResult:
        meta = await self.metadata(client, file_id)
        folder = self.wsi_root / file_id
        final = folder / meta.file_name
        partial = folder / (meta.file_name + PARTIAL_SUFFIX)
        if final.exists():
            size = final.stat().st_size
            if size == meta.file_size:
                self.log(f"present: {final}")
                return FetchResult(file_id, "present", final)
            raise FetchError(
                f"{meta.file_name} ({file_id}): {final} exists with {size} bytes, GDC says {meta.file_size}; "
                "remove it to download again"
            )
        folder.mkdir(parents=True, exist_ok=True)
        self.on_total(meta.file_size)
        already = partial.stat().st_size if partial.exists() else 0
        self.on_bytes(min(already, meta.file_size))
        fetched = 0
        failures = 0  # body requests that brought the .partial no further, and md5 re-downloads
        best = already  # the longest the .partial has been: a request that grows it made progress
        what = f"{meta.file_name} ({file_id})"
        while True:
            try:
                fetched += await self._download_attempt(client, meta, partial)
            except _Retry as exc:
                fetched += exc.received
                size = partial.stat().st_size if partial.exists() else 0
                if size > best:  # progress: resume at once, not counted (the published size bounds it)
                    best = size
                    self.log(f"{what}: {exc}; resuming at {size} bytes")
                    continue
                failures += 1
                await self._back_off(what, exc, failures)
                continue
            digest = await asyncio.to_thread(md5_of, partial, self.policy.chunk_bytes)
            if digest == meta.md5sum:
                break
            partial.unlink(missing_ok=True)
            self.on_bytes(-meta.file_size)
            best = 0
            failures += 1
            message = f"md5 {digest} differs from GDC's {meta.md5sum}"
            if failures >= self.policy.attempts:
                raise FetchError(f"{what}: {message} after {failures} downloads")
            self.log(f"{what}: {message}; downloading again")
        os.replace(partial, final)
        self.log(f"downloaded: {final}")
        return FetchResult(file_id, "downloaded", final, fetched)

    async def _download_attempt(self, client: httpx.AsyncClient, meta: GdcFile, partial: Path) -> int:
        """Bring ``partial`` to the published size (resuming with Range); return bytes received."""
        offset = partial.stat().st_size if partial.exists() else 0
        if offset > meta.file_size:
            self.on_bytes(-offset)
            partial.unlink()
            offset = 0
        if offset == meta.file_size:
            return 0
        headers = {"Accept-Encoding": "identity"}
        if offset:
            headers["Range"] = f"bytes={offset}-"
        url = f"{self.base_url}/data/{meta.file_id}"
        received = 0
        try:
            async with client.stream("GET", url, headers=headers) as response:
                status = response.status_code
                if status >= 500:
                    raise _Retry(f"HTTP {status}", retry_after=_retry_after(response))
                if status == 416:  # our partial is not a prefix GDC recognises: start over
                    self.on_bytes(-offset)
                    partial.unlink(missing_ok=True)
                    raise _Retry("HTTP 416 for the resume range; starting over")
                if status == 200 and offset:  # Range ignored: the body is the whole file
                    self.on_bytes(-offset)
                    offset = 0
                elif status == 206:
                    start = response.headers.get("content-range", "").removeprefix("bytes ").split("-")[0]
                    if start != str(offset):
                        raise FetchError(f"{meta.file_name} ({meta.file_id}): bad Content-Range for {offset}")
                elif status != 200:
                    raise FetchError(f"{meta.file_name} ({meta.file_id}): GET {url} answered HTTP {status}")
                with open(partial, "r+b" if offset else "wb") as fh:
                    fh.seek(offset)
                    fh.truncate()
                    try:
                        async for chunk in response.aiter_bytes():  # as received: a drop loses nothing
                            room = meta.file_size - offset - received
                            fh.write(chunk[:room])  # never past the published size
                            received += min(len(chunk), room)
                            self.on_bytes(min(len(chunk), room))
                            if len(chunk) >= room:
                                break
                    finally:
                        fh.flush()
                        os.fsync(fh.fileno())
        except _RETRYABLE as exc:
            if isinstance(exc, _NO_CONNECTION) and not self.reached:
                raise HostUnreachable(self.base_url, exc) from None
            raise _Retry(f"{type(exc).__name__} after {received} bytes: {exc}", received=received) from None
        size = partial.stat().st_size
        if size != meta.file_size:
            raise _Retry(f"got {size} of {meta.file_size} bytes", received=received)
        return received
