"""CPU by stage inside a real run: the functions an item goes through, wrapped with per-thread CPU clocks.

``StageClock`` patches, for the benchmark process only, the functions where a GIANT item spends its
client CPU (read, resample, draw, encode, request, store), accumulates ``time.thread_time`` around each
call (each call runs in one thread: a worker thread for the slide work, the event loop for the rest,
so concurrent calls are not double-counted), and restores them on exit. What is left of the process's
CPU (``other``) is the event loop, the SDK, HTTP and the batch runner's bookkeeping.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from PIL import Image

from giant_assets.agents import overviews
from giant_assets.agents.providers import openai_responses
from giant_assets.runs import journal, runner
from giant_assets.slides import access, views

STAGES = ("read", "resample", "draw", "encode", "request", "store")


def _targets() -> list[tuple[object, str, str]]:
    """(owner, attribute, stage) of every patched function."""
    return [
        (access, "_read_rgb", "read"),  # tiles decoded and stitched, or OpenSlide's read_region
        (Image.Image, "resize", "resample"),  # Pillow's Lanczos to the sent size
        (views, "draw_guides", "draw"),  # the guides of overviews and crops
        (overviews, "encode_image", "encode"),  # JPEG and base64
        (openai_responses.OpenAIResponsesModel, "_body", "request"),  # the wire body from the messages
        (openai_responses.OpenAIResponsesModel, "_reply", "request"),  # the reply read back
        (runner, "result_row", "store"),  # the journal row
        (journal.Journal, "append", "store"),  # and its fsync'd append
    ]


class StageClock:
    """A context manager: CPU seconds per stage while it is open (``seconds``), summed over threads."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(STAGES, 0.0)
        self._lock = threading.Lock()
        self._saved: list[tuple[object, str, Any]] = []
        self._depth = threading.local()

    def __enter__(self) -> StageClock:
        for owner, name, stage in _targets():
            original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
            self._saved.append((owner, name, original))
            setattr(owner, name, self._timed(original, stage))
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()

    def _timed(self, fn: Callable[..., Any], stage: str) -> Callable[..., Any]:
        depth = self._depth

        def timed(*args: Any, **kwargs: Any) -> Any:
            outer = getattr(depth, "n", 0) == 0  # a stage inside another (resize in a read) counts once
            depth.n = getattr(depth, "n", 0) + 1
            started = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                depth.n -= 1
                if outer:
                    spent = time.thread_time() - started
                    with self._lock:
                        self.seconds[stage] += spent

        return timed
