"""Crops as sent, kept on disk for the runs that batch mode replays.

In batch mode with ``batch_wait: detach`` every materialization replays each waiting run from its
first step, answering the model calls from the batch store, and so re-reads every crop the run has
asked for so far: round k of a 20-step run reads k crops again (about 190 reads over the run instead of
20). ``ShownViews`` keeps each crop as it was sent (the encoded image and where it came from) in the
cell's batch folder, named by everything that decides its bytes, so a replay reads a small file instead
of decoding, resampling and encoding the slide again. The bytes are the ones already sent, so the replayed
requests keep their names in the batch store.

The folder holds the live runs' crops (the JPEG as sent, typically 100-200 KB) and is deleted once no
run of the cell waits on a batch. A failed write (a full disk) turns the store off with one warning:
replays then read the slide, as without it; a file that cannot be read back is made again.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from giant_assets.agents.providers import ImagePart
from giant_assets.runs.agent_api import Step

_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShownView:
    """A crop as the model received it: the level-0 box shown, the level read, the size sent, whether
    the box was clipped to the slide, and the encoded image."""

    box: tuple[int, int, int, int]
    level: int
    size: tuple[int, int]
    clipped: bool
    part: ImagePart

    @property
    def sha256(self) -> str:
        """The SHA-256 of the encoded image, as the trajectory records it."""
        return self.part.sha256

    def record(self, step: Step) -> Step:
        """``step`` holding this view as GIANT's steps do (box, level, size, digest): the viewer, the QuPath
        export and the review read a step's view from these fields."""
        step.box, step.level, step.image_size = list(self.box), self.level, list(self.size)
        step.image_sha256 = [self.sha256]
        return step


class ShownViews:
    """Crops of one cell's runs on disk, one file each (a JSON line, then the image); see the module
    docstring."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.enabled = True
        self._lock = threading.Lock()
        self.hits = 0  # crops read back (for tests and benchmarks)
        self.writes = 0

    @staticmethod
    def key(path: str, box: list[int], **settings: object) -> str | None:
        """The name of the crop of ``box`` from the slide file at ``path`` made with ``settings`` (size,
        image read, encoding, label); None when the file cannot be stat'ed (nothing is kept for it)."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        identity = [str(path), st.st_size, st.st_mtime_ns, list(box), sorted(settings.items())]
        return hashlib.sha256(json.dumps(identity, default=str).encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}.view"

    def get(self, key: str) -> ShownView | None:
        """The kept crop, or None (not kept, or unreadable: it is made again)."""
        if not self.enabled:
            return None
        try:
            head, _, data = self._path(key).read_bytes().partition(b"\n")
            row = json.loads(head)
            part = ImagePart(
                base64.b64encode(data).decode("ascii"), row["media_type"], row["label"], row["detail"]
            )
            view = ShownView(tuple(row["box"]), row["level"], tuple(row["size"]), row["clipped"], part)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            _LOG.warning("kept crop %s unreadable (%s): made again from the slide", key[:12], exc)
            return None
        with self._lock:
            self.hits += 1
        return view

    def put(self, key: str, view: ShownView) -> None:
        """Keep ``view``: a line of JSON (where it came from, how it is sent), then the image's bytes;
        whole or not at all (a temporary file renamed into place)."""
        if not self.enabled:
            return
        part = view.part
        head = {"box": view.box, "level": view.level, "size": view.size, "clipped": view.clipped}
        head |= {"media_type": part.media_type, "label": part.label, "detail": part.detail}
        tmp: str | None = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
            with os.fdopen(fd, "wb") as fh:
                fh.write(json.dumps(head).encode() + b"\n" + base64.b64decode(part.data_b64))
            os.replace(tmp, self._path(key))
        except OSError as exc:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            with self._lock:  # crops are kept from several threads: turn off (and say so) once
                first, self.enabled = self.enabled, False
            if not first:
                return
            _LOG.warning(
                "cannot keep crops for replays in %s (%s): replays read the slide again", self.folder, exc
            )
            return
        with self._lock:
            self.writes += 1

    def clear(self) -> None:
        """Delete the folder (no run of the cell waits any more)."""
        shutil.rmtree(self.folder, ignore_errors=True)
