"""Which file OpenSlide opens for a slide path, and which files a slide is made of.

A slide is any file OpenSlide 4 opens (Aperio SVS, generic tiled TIFF, Hamamatsu NDPI, Leica SCN,
Philips TIFF, MIRAX ``.mrxs`` with its companion folder of the same name, ...) or a DICOM-WSI: a folder
of ``.dcm`` instances of one series, as hospitals and the Imaging Data Commons store them. A DICOM-WSI
is given as the folder or as any instance in it; OpenSlide opens it through one instance and finds the
others of that series in the same folder.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

DICOM_SUFFIX = ".dcm"
# vendor formats whose slide is a file plus a folder named after it (MIRAX: slide.mrxs + slide/)
COMPANION_FOLDER_SUFFIXES = (".mrxs",)
_SERIES_UID = (0x0020, 0x000E)


class SlideError(Exception):
    """A slide cannot be opened or read."""


def dicom_instances(folder: Path) -> list[Path]:
    """The ``.dcm`` files directly in ``folder`` (any case), sorted by name; [] when it cannot be listed."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(folder / n for n in names if n.lower().endswith(DICOM_SUFFIX) and (folder / n).is_file())


def is_dicom_folder(path: Path) -> bool:
    """Whether ``path`` is a folder holding at least one ``.dcm`` instance (a DICOM-WSI candidate)."""
    return path.is_dir() and bool(dicom_instances(path))


def _series_uid(instance: Path) -> str:
    import pydicom  # ~0.2 s to import; only DICOM-WSI folders need it
    from pydicom.errors import InvalidDicomError

    try:
        ds = pydicom.dcmread(instance, stop_before_pixels=True, specific_tags=[_SERIES_UID])
    except (InvalidDicomError, OSError, ValueError, EOFError) as exc:
        raise SlideError(f"{instance} is not a readable DICOM file ({type(exc).__name__})") from None
    uid = ds.get(_SERIES_UID)
    if uid is None or not str(uid.value).strip():
        raise SlideError(f"{instance} has no SeriesInstanceUID (0020,000E); it is not a DICOM-WSI instance")
    return str(uid.value).strip()


def openslide_target(path: str | Path) -> Path:
    """The file to hand OpenSlide for slide ``path``: the path itself, or for a DICOM-WSI folder its
    first instance. A folder that holds no ``.dcm`` instance, or instances of more than one series,
    raises SlideError naming it."""
    path = Path(path)
    if not path.is_dir():
        return path
    instances = dicom_instances(path)
    if not instances:
        raise SlideError(
            f"folder {path} is not a slide: a folder is read as a DICOM-WSI and this one holds no .dcm files"
        )
    series = sorted({_series_uid(i) for i in instances})
    if len(series) > 1:
        shown = ", ".join(series[:3]) + (", ..." if len(series) > 3 else "")
        raise SlideError(
            f"folder {path} holds {len(series)} DICOM series ({shown}); a DICOM-WSI folder must hold "
            "one slide's series: move the others to their own folders"
        )
    return instances[0]


def slide_files(path: str | Path) -> list[Path]:
    """Every file slide ``path`` is made of: a DICOM-WSI folder's instances, a MIRAX file and the files
    of its companion folder, or the file alone."""
    path = Path(path)
    if path.is_dir():
        return dicom_instances(path)
    files = [path]
    if path.suffix.lower() in COMPANION_FOLDER_SUFFIXES:
        companion = path.with_suffix("")
        if companion.is_dir():
            files += sorted(p for p in companion.iterdir() if p.is_file())
    return files


def slide_bytes(path: str | Path) -> int:
    """Bytes on disk of every file of the slide (0 for a file that cannot be read)."""
    total = 0
    for f in slide_files(path):
        with contextlib.suppress(OSError):
            total += os.path.getsize(f)
    return total
