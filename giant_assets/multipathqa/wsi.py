"""Resolve CSV ``image_path`` values to slide files under a WSI root, safely, and read their metadata.

Places tried, in this order; the first place holding the slide wins (``file_id`` places only when the
row's ``file_id`` is a GDC file UUID, ``root/tcga`` only for the three TCGA-derived benchmarks):

1. ``root/<image_path>``
2. ``root/<benchmark>/<image_path>``
3. ``root/tcga/<image_path>`` (one folder shared by tcga, tcga_slidebench and tcga_expert_vqa)
4. ``<dir>/<file_id>/<image_path>`` for ``<dir>`` in root, root/<benchmark>, root/tcga (gdc-client layout)
5. ``<dir>/<file_id>/`` holding the name with a UUID affix (GDC's own file names,
   ``TCGA-...-DX1.<uuid>.svs``)
6. the name with a UUID suffix or prefix (``.``, ``_`` or ``-`` between them) in root, root/<benchmark>
   or root/tcga

A slide is a file OpenSlide opens or a DICOM-WSI folder of ``.dcm`` instances (``slides.formats``); a
place holding two different files for one row is an error naming both. No candidate may leave the
WSI root (absolute paths, ``..`` and symlinks pointing outside, a DICOM instance's too, are refused).
The tree is listed once per :class:`SlideTree` (to depth 3), so resolving 934 rows costs one walk,
not one glob per row.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath

import openslide
import pandas as pd

from giant_assets.multipathqa.schema import WSI_AMBIGUOUS, WSI_MISSING, WSI_OK, WSI_UNREADABLE, WSI_UNSAFE
from giant_assets.slides.formats import SlideError, dicom_instances, is_dicom_folder, openslide_target

TCGA_BENCHMARKS = frozenset({"tcga", "tcga_slidebench", "tcga_expert_vqa"})
SHARED_TCGA_DIR = "tcga"
SCAN_DEPTH = 3  # root/<dir>/<file_id>/<file>: deep enough for every place above
PROBE_SIZE = 512  # side of the region read from the smallest level to prove tiles decode

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
UUID_RE = re.compile(_UUID)
_AFFIXED_RE = re.compile(rf"(?:{_UUID}[._-])?(?P<stem>.+?)(?:[._-]{_UUID})?(?P<ext>\.[^.]+)")


@dataclass(frozen=True)
class SlideResolution:
    path: Path | None
    status: str
    error: str | None = None


def is_gdc_uuid(value: str | None) -> bool:
    return bool(value) and UUID_RE.fullmatch(value.strip()) is not None


def strip_uuid_affix(name: str) -> str:
    """``TCGA-X-DX1.<uuid>.svs`` and ``<uuid>_TCGA-X-DX1.svs`` -> ``TCGA-X-DX1.svs`` (others unchanged)."""
    match = _AFFIXED_RE.fullmatch(name)
    return match["stem"] + match["ext"] if match else name


@dataclass
class SlideTree:
    """The files under a WSI root to depth :data:`SCAN_DEPTH`, keyed by folder and UUID-less name."""

    root: Path
    by_plain_name: dict[tuple[str, str], list[str]] = field(default_factory=lambda: defaultdict(list))

    @classmethod
    def scan(cls, wsi_root: Path) -> SlideTree:
        tree = cls(Path(wsi_root).resolve())
        for dirpath, dirnames, filenames in os.walk(tree.root):
            rel = Path(dirpath).relative_to(tree.root).as_posix()
            depth = 0 if rel == "." else rel.count("/") + 1
            if depth >= SCAN_DEPTH:
                dirnames.clear()
            for name in filenames:
                plain = strip_uuid_affix(name)
                if plain != name:
                    tree.by_plain_name[(rel, plain)].append(name)
        return tree

    def affixed(self, folder: str, name: str) -> list[str]:
        """Files in ``folder`` (relative, posix) whose name is ``name`` with a UUID affix."""
        key = (PurePosixPath(folder).as_posix(), strip_uuid_affix(name))
        return sorted(self.by_plain_name.get(key, ()))


def _unsafe_reason(image_path: str) -> str | None:
    posix, windows = PurePosixPath(image_path), PureWindowsPath(image_path)
    if posix.is_absolute() or windows.is_absolute() or windows.drive:
        return f"image_path {image_path!r} is absolute; it must be relative to the WSI root"
    if ".." in posix.parts or ".." in windows.parts:
        return f"image_path {image_path!r} contains '..'; it must stay inside the WSI root"
    return None


def _places(benchmark_name: str, image_path: str, file_id: str | None, tree: SlideTree) -> list[list[str]]:
    """Candidate relative paths, grouped by place, in the documented order."""
    folders = ["."]
    for folder in (benchmark_name, SHARED_TCGA_DIR if benchmark_name in TCGA_BENCHMARKS else None):
        if folder and folder not in folders:
            folders.append(folder)
    image = PurePosixPath(image_path.replace("\\", "/"))
    places = [[(PurePosixPath(f) / image).as_posix()] for f in folders]
    uuid = file_id.strip() if is_gdc_uuid(file_id) else None
    if uuid:
        places.append([(PurePosixPath(f) / uuid / image).as_posix() for f in folders])
        places.append(
            [
                (PurePosixPath(f) / uuid / image.parent / hit).as_posix()
                for f in folders
                for hit in tree.affixed((PurePosixPath(f) / uuid / image.parent).as_posix(), image.name)
            ]
        )
    places.append(
        [
            (PurePosixPath(f) / image.parent / hit).as_posix()
            for f in folders
            for hit in tree.affixed((PurePosixPath(f) / image.parent).as_posix(), image.name)
        ]
    )
    return places


def resolve_slide(
    wsi_root: Path,
    benchmark_name: str,
    image_path: str,
    file_id: str | None = None,
    tree: SlideTree | None = None,
) -> SlideResolution:
    """Find the slide file for one row (see the module docstring for the places and their order)."""
    reason = _unsafe_reason(image_path)
    if reason:
        return SlideResolution(None, WSI_UNSAFE, reason)
    tree = tree or SlideTree.scan(wsi_root)
    root = tree.root
    tried: list[str] = []
    directories: list[Path] = []
    blocked: dict[Path, str] = {}  # folders whose listing failed (permissions, I/O): reported, not fatal
    for place in _places(benchmark_name, image_path, file_id, tree):
        found: dict[Path, Path] = {}
        for rel in place:
            candidate = root / rel
            tried.append(str(candidate))
            try:
                if not candidate.exists():
                    continue
                real = candidate.resolve()
            except OSError as exc:
                blocked.setdefault(candidate.parent, exc.strerror or type(exc).__name__)
                continue
            if not real.is_relative_to(root):
                return SlideResolution(
                    None, WSI_UNSAFE, f"{candidate} resolves outside the WSI root ({real})"
                )
            dicom = real.is_dir() and is_dicom_folder(real)
            if dicom or (real.is_file() and real.suffix.lower() == ".dcm"):
                # OpenSlide reads every instance of the series in the folder: none may lead outside
                for instance in dicom_instances(real if dicom else real.parent):
                    if not instance.resolve().is_relative_to(root):
                        return SlideResolution(
                            None,
                            WSI_UNSAFE,
                            f"{instance} resolves outside the WSI root ({instance.resolve()})",
                        )
            if real.is_file() or dicom:
                found.setdefault(real, candidate)
            elif real.is_dir():
                directories.append(candidate)
        if len(found) > 1:
            names = " and ".join(str(c) for c in found.values())
            return SlideResolution(None, WSI_AMBIGUOUS, f"ambiguous: two candidate slides {names}")
        if found:
            return SlideResolution(next(iter(found)), WSI_OK)
    if blocked:
        folder, why = next(iter(blocked.items()))
        return SlideResolution(
            None,
            WSI_UNREADABLE,
            f"folder {folder} cannot be read ({why}); fix its permissions or mount and check again",
        )
    if directories:
        return SlideResolution(
            None,
            WSI_UNREADABLE,
            f"{directories[0]} is a directory, not a slide file nor a DICOM-WSI folder of .dcm files "
            f"(image_path {image_path!r})",
        )
    return SlideResolution(None, WSI_MISSING, f"slide not found; tried {', '.join(dict.fromkeys(tried))}")


def read_slide_metadata(path: Path) -> dict:
    """Open the slide (a file, or a DICOM-WSI folder: ``slides.formats``) with OpenSlide, return its
    geometry, and decode one region of its smallest level.

    The region (:data:`PROBE_SIZE` px square, centred) proves the tiles decode, so a slide that opens
    but whose pixels are corrupt raises here instead of failing an agent run later.
    """
    with openslide.OpenSlide(str(openslide_target(path))) as slide:
        props = slide.properties

        def _float(key: str) -> float | None:
            try:
                return float(props[key])
            except (KeyError, ValueError):
                return None

        width, height = slide.dimensions
        _probe_smallest_level(slide)
        return {
            "width": int(width),
            "height": int(height),
            "level_count": int(slide.level_count),
            "level_downsamples": [float(d) for d in slide.level_downsamples],
            "mpp_x": _float(openslide.PROPERTY_NAME_MPP_X),
            "mpp_y": _float(openslide.PROPERTY_NAME_MPP_Y),
            "vendor": props.get(openslide.PROPERTY_NAME_VENDOR),
        }


def _probe_smallest_level(slide: openslide.OpenSlide) -> None:
    level = slide.level_count - 1
    lw, lh = slide.level_dimensions[level]
    size = (min(PROBE_SIZE, lw), min(PROBE_SIZE, lh))
    scale = slide.level_downsamples[level]
    x0 = int((lw - size[0]) // 2 * scale)
    y0 = int((lh - size[1]) // 2 * scale)
    slide.read_region((x0, y0), level, size).close()


_EMPTY_META = dict.fromkeys(
    ("width", "height", "level_count", "level_downsamples", "mpp_x", "mpp_y", "vendor")
)


def resolve_items(items: pd.DataFrame, wsi_root: Path) -> pd.DataFrame:
    """Add wsi_path/wsi_status/wsi_error and slide metadata columns; one bad slide never fails the rest."""
    tree = SlideTree.scan(wsi_root)
    file_ids = items["file_id"] if "file_id" in items else pd.Series([None] * len(items), index=items.index)
    cache: dict[tuple[str, str, str | None], tuple[SlideResolution, dict]] = {}
    rows = []
    for name, image_path, file_id in zip(items["benchmark_name"], items["image_path"], file_ids, strict=True):
        file_id = file_id if isinstance(file_id, str) else None
        key = (name, image_path, file_id)
        if key not in cache:
            res = resolve_slide(wsi_root, name, image_path, file_id, tree)
            meta = dict(_EMPTY_META)
            if res.status == WSI_OK:
                try:
                    meta = read_slide_metadata(res.path)
                except SlideError as exc:
                    res = SlideResolution(None, WSI_UNREADABLE, str(exc))
                except (openslide.OpenSlideError, OSError, ValueError) as exc:
                    detail = str(exc) or type(exc).__name__
                    res = SlideResolution(
                        None, WSI_UNREADABLE, f"{res.path}: OpenSlide cannot read it: {detail}"
                    )
            cache[key] = (res, meta)
        res, meta = cache[key]
        rows.append(
            {
                "wsi_path": str(res.path) if res.path else None,
                "wsi_status": res.status,
                "wsi_error": res.error,
                **meta,
            }
        )
    resolved = pd.DataFrame.from_records(
        rows, index=items.index, columns=["wsi_path", "wsi_status", "wsi_error", *_EMPTY_META]
    )
    out = pd.concat([items, resolved], axis=1)
    for col in ("width", "height", "level_count"):
        out[col] = out[col].astype("Int64")
    for col in ("mpp_x", "mpp_y"):
        out[col] = out[col].astype("Float64")
    return out
