"""A WSI root holding the bundled sample CSV's slides in every supported layout, with faults.

Slides are small real pyramids (tifffile); the layout per image_path is the map below.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from giant_assets.slides.synthetic import SlideDesign
from tests.support.corrupt_slides import corrupt_smallest_level_tiles
from tests.support.slides import write_pyramidal_slide

UUID_A = "1f0e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
UUID_B = "22222222-3333-4444-8555-666666666666"
FID_05 = "d3c8a4a6-5e1e-4c0c-9a8e-2f1d3c2b6a01"  # file_id of TCGA-05-4244 in the sample CSV
FID_BH = "6d2b3c4e-5f6a-4b7c-9d8e-0f1a2b3c4d05"  # file_id of TCGA-BH-A0BZ

# image_path -> (path under the root, svs?, mpp, levels); None: absent
LAYOUT: dict[str, tuple[str, bool, float, int] | None] = {
    "GTEX-1117F-0126.tiff": ("GTEX-1117F-0126.tiff", False, 0.5, 3),  # root/<file>
    "GTEX-111CU-1826.tiff": ("gtex/GTEX-111CU-1826.tiff", False, 0.25, 3),  # root/<benchmark>/<file>
    "GTEX-OIZH-0626.tiff": None,
    "TCGA-05-4244-01Z-00-DX1.svs": (f"{FID_05}/TCGA-05-4244-01Z-00-DX1.{UUID_A}.svs", True, 0.2527, 3),
    "TCGA-A1-A0SK-01Z-00-DX1.svs": (f"tcga/{UUID_B}_TCGA-A1-A0SK-01Z-00-DX1.svs", True, 0.5, 3),
    "TCGA-ZZ-0000-01Z-00-DX1.svs": None,
    "0005f7aaab2800f6170c399693a96917.tiff": ("panda/0005f7aaab2800f6170c399693a96917.tiff", False, 0.48, 3),
    "TCGA-EA-A3HT-01Z-00-DX1.svs": ("tcga/TCGA-EA-A3HT-01Z-00-DX1.svs", True, 0.2527, 3),  # shared tcga/
    "TCGA-BH-A0BZ-01Z-00-DX1.svs": (f"{FID_BH}/TCGA-BH-A0BZ-01Z-00-DX1.svs", True, 0.5, 2),  # gdc, exact
}
CORRUPT_TILES = "panda/000920ad0b612851f8e01bcc880d9b3d.tiff"
DIRECTORY = "panda/001d865e65ef5d2579c190a0e0350d8f.tiff"
AMBIGUOUS = (
    f"tcga/TCGA-D8-A1XK-01Z-00-DX1.{UUID_A}.svs",
    f"TCGA-D8-A1XK-01Z-00-DX1.{UUID_B}.svs",
)


@dataclass(frozen=True)
class MixedRoot:
    root: Path
    slides: dict[str, Path]  # image_path -> the readable slide file written for it


def build_mixed_root(root: Path) -> MixedRoot:
    """Write the layout: 7 readable slides, 2 absent, 1 with undecodable tiles, 1 directory, 1 ambiguous."""
    design = SlideDesign(1024, 768)
    slides = {}
    for image_path, place in LAYOUT.items():
        if place is None:
            continue
        relpath, svs, mpp, levels = place
        slides[image_path] = write_pyramidal_slide(root / relpath, design, levels=levels, svs=svs, mpp=mpp)
    corrupt_smallest_level_tiles(write_pyramidal_slide(root / CORRUPT_TILES, design, levels=3))
    (root / DIRECTORY).mkdir(parents=True)
    for relpath in AMBIGUOUS:
        write_pyramidal_slide(root / relpath, design, levels=3, svs=True)
    return MixedRoot(root, slides)
