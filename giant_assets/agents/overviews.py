"""The overview a run starts from: read once per slide file, ahead of need, off the event loop.

Every GIANT run of an item starts from the same image (the whole slide with its guides, encoded for the
model), as every thumbnail-baseline run does (without guides); every attempt of a run and every run of
an item repeat it, and the VQA benchmarks ask several questions about one slide. ``OverviewCache``
makes it once per slide file (path, size and modification time) in a worker thread (OpenSlide's tile
decoding and Pillow's resampling and encoding release the GIL, so reads run beside the event loop and
beside each other, ``workers`` at a time, oldest request first) and keeps the newest ``capacity``
results (about 200 KB each: the encoded image, not the pixels).

Every cache of a process also shares its finished overviews through ``PROCESS_OVERVIEWS`` (the newest
``PROCESS_CAPACITY``): the cells of one Dagster run or ``materialize`` call, the demo's experiments and
the sweep's agents each build their own agent, and all show the same slides at the same size. An overview
is shared only between caches that make it alike (size, encoding, guides, label, the view function and
its arguments) and only while the file is unchanged.

``prefetch`` starts the read before a run needs it: the batch runner calls it for the runs about to
start, so a run's first model call does not wait for its slide to be read while it holds a model slot.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import openslide
from PIL import Image

from giant_assets.agents.providers import ImagePart
from giant_assets.core.recent import RecentValues
from giant_assets.slides.access import JPEG_QUALITY, encode_image, media_type, open_slide
from giant_assets.slides.views import SlideView, overview

OVERVIEW_LABEL = "overview of the whole slide"
PROCESS_CAPACITY = 64  # finished overviews every cache of the process shares (~200 KB each)


@dataclass(frozen=True)
class Overview:
    """The whole slide as first shown to the model, and what its trajectory step records."""

    width: int  # level-0 slide size
    height: int
    box: tuple[int, int, int, int]  # level-0 box shown (the whole slide)
    level: int  # pyramid level read
    image_size: tuple[int, int]  # pixels sent
    part: ImagePart  # the encoded image


@dataclass(frozen=True)
class Encoding:
    """How an image is sent: file format, JPEG quality, and OpenAI's ``detail`` (None: no field, auto)."""

    image_format: str = "JPEG"
    quality: int = JPEG_QUALITY
    detail: str | None = None

    def part(self, image: Image.Image, label: str) -> ImagePart:
        """``image`` encoded this way (blocking: run in a thread)."""
        data = encode_image(image, self.image_format, self.quality)
        return ImagePart(data, media_type(self.image_format), label, self.detail)


ViewMaker = Callable[[openslide.OpenSlide, int, bool], SlideView]  # (slide, long side, guides) -> image


def read_overview(
    path: str,
    long_side: int,
    encoding: Encoding,
    guides: bool = True,
    label: str = OVERVIEW_LABEL,
    view_maker: ViewMaker = overview,
) -> Overview:
    """Open ``path``, make its overview at ``long_side`` and encode it (blocking: run in a thread)."""
    slide = open_slide(path)
    try:
        width, height = slide.dimensions
        view = view_maker(slide, long_side, guides)
        part = encoding.part(view.image, label)
    finally:
        slide.close()
    return Overview(int(width), int(height), view.box, view.level, view.image.size, part)


class SharedOverviews(RecentValues[Overview]):
    """Finished overviews of this process, the newest ``capacity`` kept, looked up from any thread."""

    def __init__(self, capacity: int = PROCESS_CAPACITY) -> None:
        super().__init__(capacity)


PROCESS_OVERVIEWS = SharedOverviews()


class OverviewCache:
    """Overviews of slide files at one size and format, computed once each; see the module docstring."""

    def __init__(
        self,
        long_side: int,
        encoding: Encoding,
        guides: bool = True,
        label: str = OVERVIEW_LABEL,
        capacity: int = 64,
        workers: int | None = None,
        view: ViewMaker = overview,
        shared: SharedOverviews | None = PROCESS_OVERVIEWS,
    ) -> None:
        self.long_side = long_side
        self.encoding = encoding
        self.guides = guides
        self.label = label
        self.view = view
        self.capacity = max(1, capacity)
        self._workers = max(1, workers or os.cpu_count() or 1)
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop the reads and slots belong to
        self._slots: asyncio.Semaphore | None = None
        self._entries: OrderedDict[tuple, asyncio.Task[Overview]] = OrderedDict()
        self.reads = 0  # overviews actually read (for tests and benchmarks)
        self.taken = 0  # overviews taken from the process's shared ones instead
        how = _view_identity(view)  # None: a view not comparable by value is never shared
        self._shared = shared if how is not None else None
        self._how = (long_side, encoding, guides, label, how)

    def prefetch(self, path: str | None) -> None:
        """Start reading ``path``'s overview unless it is cached or under way (must run in the loop)."""
        key = _file_key(path)
        if key is not None:
            self._entry(key)

    async def get(self, path: str) -> Overview:
        """``path``'s overview: cached, under way (awaited), or read now.

        A failed read is not kept: the next call reads again, and its error reaches the caller.
        """
        key = _file_key(path)
        if key is None:  # not a readable file now: read directly, so the caller sees OpenSlide's error
            return await asyncio.to_thread(self._read_now, path)
        task = self._entry(key)
        try:
            return await asyncio.shield(task)  # a cancelled run must not cancel a read others may share
        except Exception:
            if self._entries.get(key) is task:
                del self._entries[key]
            raise

    async def aclose(self) -> None:
        """Cancel reads not yet started; reads in worker threads finish on their own."""
        for task in self._entries.values():
            task.cancel()
        self._entries.clear()

    def _entry(self, key: tuple) -> asyncio.Task[Overview]:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop (another asyncio.run): start afresh in it
            self._loop, self._slots = loop, asyncio.Semaphore(self._workers)
            self._entries.clear()
        task = self._entries.get(key)
        if task is not None:
            self._entries.move_to_end(key)
            return task
        task = asyncio.ensure_future(self._read(key))
        task.add_done_callback(_consume_exception)
        self._entries[key] = task
        excess = len(self._entries) - self.capacity
        if excess > 0:  # drop the least recently used finished reads; reads under way stay
            for old in [k for k, t in self._entries.items() if t.done()][:excess]:
                del self._entries[old]
        return task

    async def _read(self, key: tuple) -> Overview:
        shared_key = (*key, *self._how)
        if self._shared is not None and (made := self._shared.get(shared_key)) is not None:
            self.taken += 1
            return made
        assert self._slots is not None  # made by _entry in this loop
        async with self._slots:
            self.reads += 1
            made = await asyncio.to_thread(self._read_now, key[0])
        if self._shared is not None:
            self._shared.put(shared_key, made)
        return made

    def _read_now(self, path: str) -> Overview:
        return read_overview(path, self.long_side, self.encoding, self.guides, self.label, self.view)


def _view_identity(view: ViewMaker) -> Hashable | None:
    """What makes two view functions make the same image: the function, or a ``functools.partial``'s
    function and arguments; None when they are not hashable."""
    if isinstance(view, functools.partial):
        how: Hashable = (view.func, view.args, tuple(sorted(view.keywords.items())))
    else:
        how = view
    try:
        hash(how)
    except TypeError:
        return None
    return how


def _file_key(path: str | None) -> tuple | None:
    """(path, size, modification time): a replaced or rewritten slide file is read again."""
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (path, st.st_size, st.st_mtime_ns)


def _consume_exception(task: asyncio.Task) -> None:
    """Mark a failed read's exception as seen: a prefetch nobody awaited must not log a warning."""
    if not task.cancelled():
        task.exception()
