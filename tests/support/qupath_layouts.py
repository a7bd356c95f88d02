"""QuPath GeoJSON exports written byte for byte as each QuPath version's serialiser writes them (read from
qupath-core's own source at tags v0.2.3, v0.3.2, v0.4.4, v0.5.1 and v0.6.0; no QuPath code copied):

* 0.2: no export command: scripts wrote ``GsonTools.getInstance(true).toJson(objects)``, a pretty bare
  array; each feature's ``id`` is the Java class (``PathAnnotationObject``, ``PathCellObject``...), the
  classification the default Gson form of PathClass (``parentClass`` chain, ``name``, packed
  ``colorRGB``), ``isLocked`` always, ``measurements`` a list of ``{name, value}`` (empty too);
* 0.3: ``properties.object_type`` (``annotation``, ``detection``, ``cell``, ``tile``, ``tma_core``), no
  ``id``; ``color`` when set; measurements only when there are some;
* 0.4: ``"id"`` a UUID, ``objectType`` (``tmaCore``), classification ``{name | names, color}``,
  ``isLocked`` only when locked, measurements a ``{name: value}`` object;
* 0.5/0.6: as 0.4, plus ``metadata`` (string values) after the measurements; NaN measurements as "NaN".

Text is UTF-8 with Gson's HTML-safe escapes (``<`` as ``\\u003c``...). Compact output (QuPath's
default, "Pretty JSON" off) joins tokens without spaces except inside a
coordinate ``[x, y]``, which QuPath writes as raw text with 2 decimals at most.
"""

from __future__ import annotations

import gzip
import json
import re
import uuid
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OBJECT_TYPES_03 = {"annotation": "annotation", "detection": "detection", "cell": "cell", "tile": "tile"}
LEGACY_IDS = {
    "annotation": "PathAnnotationObject",
    "detection": "PathDetectionObject",
    "cell": "PathCellObject",
    "tile": "PathTileObject",
    "tma_core": "TMACoreObject",
}


@dataclass
class Obj:
    """One QuPath object: its type, level-0 geometry (a GeoJSON geometry dict) and what QuPath keeps."""

    kind: str  # annotation, detection, cell, tile, tma_core
    geometry: dict[str, Any]
    classification: Sequence[str] = ()  # ("Tumor", "Positive") for the derived class Tumor: Positive
    class_color: tuple[int, int, int] = (200, 0, 0)
    name: str | None = None
    color: tuple[int, int, int] | None = None  # the object's own colour, when set
    locked: bool = False
    measurements: dict[str, float] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)
    nucleus: dict[str, Any] | None = None
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))


def _num(v: float) -> float | int:
    """GeneralTools.formatNumber(Locale.US, v, 2): at most 2 decimals, no trailing zeros."""
    v = round(float(v), 2)
    return int(v) if v == int(v) else v


def _coords(value: Any) -> Any:
    if not isinstance(value, list):
        return value  # a hostile test's broken coordinates, written as they are
    if isinstance(value, list) and value and isinstance(value[0], int | float):
        return [_num(value[0]), _num(value[1])]
    return [_coords(v) for v in value]


def _geometry(geometry: dict[str, Any]) -> dict[str, Any]:
    return {"type": geometry["type"], "coordinates": _coords(geometry["coordinates"])}


def _packed(rgb: Sequence[int]) -> int:
    """ColorTools.packRGB as a Java int (alpha 255, so negative)."""
    value = (255 << 24) | (rgb[0] << 16) | (rgb[1] << 8) | rgb[2]
    return value - (1 << 32)


def _legacy_class(names: Sequence[str], rgb: Sequence[int]) -> dict[str, Any]:
    """PathClass by default Gson (fields parentClass, name, colorRGB; nulls left out)."""
    out: dict[str, Any] = {}
    if len(names) > 1:
        out["parentClass"] = _legacy_class(names[:-1], (150, 150, 150))
    out["name"] = names[-1]
    out["colorRGB"] = _packed(rgb)
    return out


def feature(obj: Obj, version: str) -> dict[str, Any]:
    """The feature QuPath ``version`` ("0.2" ... "0.6") writes for ``obj``, keys in its order."""
    out: dict[str, Any] = {"type": "Feature"}
    if version == "0.2":
        out["id"] = LEGACY_IDS[obj.kind]
    elif version >= "0.4":
        out["id"] = obj.uid
    out["geometry"] = _geometry(obj.geometry)
    if obj.nucleus is not None:
        out["nucleusGeometry"] = _geometry(obj.nucleus)
    props: dict[str, Any] = {}
    if version == "0.3":
        props["object_type"] = obj.kind
    elif version >= "0.4":
        props["objectType"] = "tmaCore" if obj.kind == "tma_core" else obj.kind
    if obj.name is not None:
        props["name"] = obj.name
    color = obj.color or (obj.class_color if version == "0.2" and obj.name is not None else None)
    if color is not None and (version > "0.2" or obj.name is not None):  # 0.2 wrote it with a name only
        props["color"] = list(color)
    if obj.classification:
        if version < "0.4":
            props["classification"] = _legacy_class(obj.classification, obj.class_color)
        else:
            names = list(obj.classification)
            key = {"name": names[0]} if len(names) == 1 else {"names": names}
            props["classification"] = {**key, "color": list(obj.class_color)}
    if version < "0.4":
        props["isLocked"] = obj.locked
    elif obj.locked:
        props["isLocked"] = True
    if version == "0.2" or (version == "0.3" and obj.measurements):
        props["measurements"] = [{"name": k, "value": v} for k, v in obj.measurements.items()]
    elif obj.measurements:
        props["measurements"] = dict(obj.measurements)
    if version >= "0.5" and obj.metadata:
        props["metadata"] = dict(obj.metadata)
    out["properties"] = props
    return out


_PAIR = re.compile(r"\[\s*(-?[0-9.]+),\s*(-?[0-9.]+)\s*\]")
_HTML = re.compile("[<>&='\u2028\u2029]")
_TRIPLE = re.compile(r"\[\s*([0-9]+),\s*([0-9]+),\s*([0-9]+)\s*\]")


def _dump(value: Any, pretty: bool, raw_colors: bool) -> str:
    """Gson's writer: compact, or pretty with 2 spaces; coordinates (and from 0.4 colours) are raw text
    QuPath writes as ``[x, y]`` on one line with a space."""
    separators = (",", ": ") if pretty else (",", ":")
    text = json.dumps(value, indent=2 if pretty else None, separators=separators, ensure_ascii=False)
    text = _HTML.sub(lambda m: f"\\u{ord(m.group()):04x}", text)  # Gson's default HTML-safe escaping
    text = _PAIR.sub(r"[\1, \2]", text)
    return _TRIPLE.sub(r"[\1, \2, \3]", text) if raw_colors else text


def export_text(
    objects: Sequence[Obj], version: str, *, pretty: bool = False, collection: bool = True
) -> str:
    """A whole export: 0.2 a pretty bare array (its scripts); 0.3+ the Export objects command's
    FeatureCollection (``collection=False``: a bare array, or the one feature)."""
    features = [feature(o, version) for o in objects]
    if version == "0.2":
        doc: Any = features
        pretty = True
    elif collection:
        doc = {"type": "FeatureCollection", "features": features}
    else:
        doc = features[0] if len(features) == 1 else features
    return _dump(doc, pretty, raw_colors=version >= "0.4")


def write_export(path: Path, objects: Sequence[Obj], version: str, **kwargs: Any) -> Path:
    """Write an export as QuPath names the compressed kinds: ``X.geojson.gz`` gzip, ``X.zip`` holding
    ``X.geojson``, else plain UTF-8."""
    data = export_text(objects, version, **kwargs).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(data))
    elif path.name.endswith(".zip"):
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr(path.name[: -len(".zip")] + ".geojson", data)
    else:
        path.write_bytes(data)
    return path


def rect(x: float, y: float, w: float, h: float) -> dict[str, Any]:
    """A rectangle as QuPath writes it: a closed Polygon from the top-left corner."""
    ring = [[x, y], [x + w, y], [x + w, y + h], [x, y + h], [x, y]]
    return {"type": "Polygon", "coordinates": [ring]}


def cell_objects(n: int, width: float, height: float, seed: int = 7) -> Iterator[Obj]:
    """``n`` cells as a cell detection writes them: a 24-gon boundary, a nucleus and 40 measurements."""
    import math
    import random

    rng = random.Random(seed)
    names = [f"{c}: {m}" for c in ("Nucleus", "Cell", "Cytoplasm") for m in range(1, 14)] + ["Nucleus/Cell"]
    for _ in range(n):
        cx, cy, r = rng.uniform(50, width - 50), rng.uniform(50, height - 50), rng.uniform(8, 20)

        def ring(radius: float, cx: float = cx, cy: float = cy) -> list[list[float]]:
            pts = [
                [
                    round(cx + radius * math.cos(2 * math.pi * k / 24), 2),
                    round(cy + radius * math.sin(2 * math.pi * k / 24), 2),
                ]
                for k in range(24)
            ]
            return pts + [pts[0]]

        yield Obj(
            "cell",
            {"type": "Polygon", "coordinates": [ring(r)]},
            classification=(rng.choice(["Tumor", "Stroma", "Immune cells"]),),
            nucleus={"type": "Polygon", "coordinates": [ring(r / 2)]},
            measurements={k: round(rng.uniform(0, 100), 4) for k in names},
        )
