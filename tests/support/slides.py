"""Synthetic slides for tests, each distinct one rendered once per run of the suite.

``write_pyramidal_slide`` here is the package's (same arguments, same file), except that a slide of the
same design and options written before in this run of the suite (by any xdist worker) is copied from
its first rendering instead of being rendered and compressed again: ~30 modules write the same
one-lesion slide. Each caller gets its own file, which it may change (corrupt, truncate, rewrite).
"""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import os
import shutil
from pathlib import Path
from typing import Any

from giant_assets.slides import synthetic
from giant_assets.slides.synthetic import SlideDesign

_rendered: Path | None = None  # set by the suite's session fixture (tests/conftest.py: rendered_slides)


def keep_renderings_in(folder: Path) -> None:
    """Where this run of the suite keeps its first renderings (shared by its workers)."""
    global _rendered
    folder.mkdir(parents=True, exist_ok=True)
    _rendered = folder


def write_pyramidal_slide(path: Path | str, design: SlideDesign, *args: Any, **options: Any) -> Path:
    """``giant_assets.slides.synthetic.write_pyramidal_slide`` (same arguments), rendered once."""
    if _rendered is None:
        return synthetic.write_pyramidal_slide(path, design, *args, **options)
    call = inspect.signature(synthetic.write_pyramidal_slide).bind(path, design, *args, **options)
    call.apply_defaults()
    what = {name: value for name, value in call.arguments.items() if name != "path"}
    key = hashlib.sha256(repr(sorted(what.items())).encode()).hexdigest()[:32]
    first = _rendered / f"{key}.tiff"
    with open(_rendered / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker rendering the same slide: wait for it
        if not first.exists():
            partial = _rendered / f"{key}.{os.getpid()}.partial"
            synthetic.write_pyramidal_slide(partial, **what)
            partial.rename(first)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(first, path)
    return path
