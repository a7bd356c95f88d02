"""The objects of every version's fixture (``v0.X/TCGA-EA-A3HT-01Z-00-DX1.geojson``), as a pathologist's
QuPath project holds them on the 4096 x 3072 slide after a cell detection and a round trip of our own
export; each fixture is this scenario written by ``tests.support.qupath_layouts`` in that version's
layout (``python -m tests.eval.qupath_versions.scenario`` writes them again, byte for byte).
"""

from __future__ import annotations

from pathlib import Path

from tests.support.qupath_layouts import Obj, rect, write_export

HERE = Path(__file__).parent
SLIDE = "TCGA-EA-A3HT-01Z-00-DX1.svs"
# QuPath's default export settings per version: 0.2 had no export command (a script's pretty array);
# 0.3+ "Export objects" writes a compact FeatureCollection; 0.5's fixture has "Pretty JSON" ticked
VERSIONS = {"0.2": {}, "0.3": {}, "0.4": {}, "0.5": {"pretty": True}, "0.6": {}}


def _cell(x: float, y: float, uid: str) -> Obj:
    return Obj(
        "cell",
        {
            "type": "Polygon",
            "coordinates": [[[x, y], [x + 12, y], [x + 12, y + 10.5], [x, y + 10.5], [x, y]]],
        },
        classification=("Tumor",),
        nucleus={
            "type": "Polygon",
            "coordinates": [[[x + 3, y + 3], [x + 8, y + 3], [x + 8, y + 7], [x + 3, y + 3]]],
        },
        measurements={"Nucleus: Area": 18.25, "Cell: Area": 126.0},
        uid=uid,
    )


def objects() -> list[Obj]:
    return [
        Obj("annotation", rect(1700, 1300, 350, 280), ("Tumor",), name="lesion (rectangle)", locked=True,
            uid="5a1f0c2e-3b7d-4c19-9e0a-7d1b2c3e4f50", measurements={"Area µm^2": 24500.0}),
        Obj("annotation", {"type": "Polygon", "coordinates": [
            [[1000, 1000], [1600, 1000], [1600, 1600], [1000, 1600], [1000, 1000]],
            [[1200, 1200], [1200, 1400], [1400, 1400], [1400, 1200], [1200, 1200]]]},
            ("Tumor", "Positive"), class_color=(200, 50, 50), uid="9c0e8f7a-1d2b-4e3f-8a9b-0c1d2e3f4a5b"),
        Obj("annotation", {"type": "MultiPoint", "coordinates": [[1800.5, 1400.25], [10, 20]]}, ("Mitosis",),
            class_color=(0, 200, 0), color=(0, 200, 0), uid="7e8f9a0b-1c2d-4e3f-a4b5-c6d7e8f9a0b1"),
        Obj("annotation", {"type": "LineString", "coordinates": [[100, 100], [900.75, 450.5]]}, (),
            name="ruler", uid="0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6"),
        Obj("annotation", rect(2900, 1800, 200, 200), ("GIANT crop",), class_color=(255, 140, 0),
            name="0 run 0 step 1", locked=True, uid="3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f",
            measurements={"run": 0.0, "step": 1.0}, metadata={"reason": "look at the margin", "run": "0"}),
        Obj("detection", rect(2000, 2000, 40, 30), ("Tumor",), uid="6f7a8b9c-0d1e-4f2a-9b3c-4d5e6f7a8b9c"),
        Obj("detection", rect(2100, 2000, 40, 30), ("Stroma",), uid="8b9c0d1e-2f3a-4b4c-8d5e-6f7a8b9c0d1e"),
        _cell(2200.5, 2100.25, "a0b1c2d3-e4f5-4a6b-8c7d-8e9f0a1b2c3d"),
        _cell(2230, 2100.25, "b1c2d3e4-f5a6-4b7c-9d8e-9f0a1b2c3d4e"),
        Obj("tile", rect(0, 0, 512, 512), (), uid="c2d3e4f5-a6b7-4c8d-8e9f-0a1b2c3d4e5f"),
        Obj("tma_core", rect(3500, 100, 400, 400), name="A-1", uid="d3e4f5a6-b7c8-4d9e-9f0a-1b2c3d4e5f6a"),
    ]  # fmt: skip


def main() -> None:
    for version, options in VERSIONS.items():
        write_export(HERE / f"v{version}" / SLIDE.replace(".svs", ".geojson"), objects(), version, **options)


if __name__ == "__main__":
    main()
