"""QuPath's GeoJSON, read and written: the objects a pathologist draws and the annotations we hand back.

What QuPath writes (File > Export objects as GeoJSON, or ``exportObjectsToGeoJson``; read from its
serialiser, qupath-core ``GsonTools`` / ``PathObjectTypeAdapters`` / ``QuPathTypeAdapters``): a
``FeatureCollection`` (0.3+ default), else a bare array of features (or one feature; 0.2 scripts wrote
``GsonTools.getInstance(true).toJson(objects)``, a pretty array). Geometry is in level-0 pixels (origin
top left of the full-resolution image); rectangles and ellipses are Polygons, points a MultiPoint,
polylines LineStrings. The object type and the classification changed with the versions:

* 0.2: the type is the feature's ``id`` (``PathAnnotationObject``, ``PathDetectionObject``,
  ``PathCellObject``, ``PathTileObject``, ``TMACoreObject``); the classification PathClass's default Gson
  form ``{"parentClass": {...}, "name": "Positive", "colorRGB": <packed int>}`` (a derived class is a
  ``parentClass`` chain: ``Tumor: Positive``);
* 0.3: no ``id``; the type in ``properties.object_type`` (``annotation``, ``detection``, ``cell``,
  ``tile``, ``tma_core``); classification as 0.2;
* 0.4+: ``id`` a UUID; ``properties.objectType`` (``tmaCore``); classification ``{"name": ..., "color":
  [r, g, b]}`` or ``{"names": ["Tumor", "Positive"], ...}`` for a derived class; 0.5+ also keeps
  ``properties.metadata`` (string values).

QuPath reads ``objectType``, then ``object_type``, then ``type``, then a 0.2 id; none means an
annotation. ZIP exports (``X.zip`` holding ``X.geojson``) and gzip ones (``X.geojson.gz``) are read too.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import uuid
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import shapely
from shapely.geometry.base import BaseGeometry

from giant_assets.geometry.numbers import numeric_array

# QuPath 0.2/0.3 named the object type in the feature's id
LEGACY_OBJECT_TYPES = {
    "PathAnnotationObject": "annotation",
    "PathDetectionObject": "detection",
    "PathCellObject": "cell",
    "PathTileObject": "tile",
    "TMACoreObject": "tma_core",
}
# the other spellings QuPath reads, as one name each
OBJECT_TYPE_ALIASES = {**LEGACY_OBJECT_TYPES, "tmaCore": "tma_core", "PathRootObject": "root"}
GEOJSON_SUFFIXES = (".geojson", ".json")
MULTIPART_EXTENSIONS = (".ome.tif", ".ome.tiff", ".tar.gz", ".ome.zarr")  # GeneralTools, QuPath 0.6
_WORD = re.compile(r"\w*", re.ASCII)  # Java's \w
_NON_SPACE = re.compile(r"[^ \t\n\r]")
_DECODER = json.JSONDecoder()
_MAX_CLASS_DEPTH = 32  # parentClass links followed
_CHUNK = 1 << 22  # characters read at a time
_NAMESPACE = uuid.UUID("8c1d6a52-5b7e-4d8e-9a51-2f0e6c4b7a10")  # ids of the features we write


class QuPathFileError(ValueError):
    """A QuPath GeoJSON file that cannot be read; the message names the file and the feature."""


@dataclass(frozen=True)
class QuPathObject:
    """One feature of a QuPath export: its geometry in level-0 pixels and what QuPath says of it."""

    index: int  # 0-based position in the file
    feature_id: str  # the feature's id ("" when it has none or a legacy type name)
    object_type: str  # annotation, detection, cell, tile, tma_core, root (or what the file says)
    geometry: BaseGeometry | None  # annotations: Polygon / MultiPolygon, MultiPoint or a line; else None
    classification: str | None = None
    name: str | None = None

    @property
    def is_points(self) -> bool:
        return isinstance(self.geometry, shapely.MultiPoint)

    @property
    def is_line(self) -> bool:
        """A line or polyline annotation: no area, so no region."""
        return isinstance(self.geometry, shapely.LineString | shapely.MultiLineString)

    def describe(self) -> str:
        """How an error names this feature: its position, and its id and name when it has them."""
        return _describe(self.index, self.feature_id, self.name)


def _describe(index: int, feature_id: str, name: Any) -> str:
    extra = [f"id {feature_id!r}"] if feature_id else []
    extra += [f"name {name!r}"] if name not in (None, "") else []
    return f"feature {index}" + (f" ({', '.join(extra)})" if extra else "")


def _points(value: Any, where: str) -> np.ndarray:
    pts = numeric_array(value, where, max_depth=2)
    if pts.ndim != 2 or pts.shape[1] < 2:
        raise ValueError(f"{where}: expected a list of [x, y] positions, got shape {pts.shape}")
    if not np.isfinite(pts).all():
        raise ValueError(f"{where}: coordinates must be finite numbers")
    return pts[:, :2]


def _polygon(rings: Any, where: str) -> shapely.Polygon:
    if not isinstance(rings, list) or not rings:
        raise ValueError(f"{where}: a polygon is a non-empty list of rings (exterior, then holes)")
    parsed = []
    for j, ring in enumerate(rings):
        pts = _points(ring, f"{where} ring {j}")
        if len(np.unique(pts, axis=0)) < 3:
            raise ValueError(f"{where} ring {j}: a ring needs at least 3 distinct positions")
        parsed.append(pts)
    return shapely.Polygon(parsed[0], parsed[1:])


def parse_geometry(geometry: Any, where: str = "geometry") -> BaseGeometry:
    """A GeoJSON geometry as shapely: Polygon / MultiPolygon as they are (holes kept), Point / MultiPoint
    as a MultiPoint, LineString / MultiLineString as they are (QuPath lines: no area), a GeometryCollection
    as its polygonal parts. Raises ValueError otherwise."""
    if not isinstance(geometry, dict) or "type" not in geometry:
        raise ValueError(f"{where}: missing or not a GeoJSON geometry object")
    kind = geometry["type"]
    if kind == "GeometryCollection":
        parts = [
            parse_geometry(g, f"{where} part {i}") for i, g in enumerate(geometry.get("geometries") or [])
        ]
        areas = [p for p in parts if isinstance(p, shapely.Polygon | shapely.MultiPolygon)]
        if not areas:
            raise ValueError(f"{where}: a GeometryCollection without any polygon")
        return shapely.unary_union(areas)
    coords = geometry.get("coordinates")
    if coords is None:
        raise ValueError(f"{where}: {kind} without 'coordinates'")
    if kind == "Polygon":
        return _polygon(coords, where)
    if kind == "MultiPolygon":
        if not isinstance(coords, list) or not coords:
            raise ValueError(f"{where}: a MultiPolygon is a non-empty list of polygons")
        return shapely.MultiPolygon([_polygon(p, f"{where} polygon {i}") for i, p in enumerate(coords)])
    if kind == "Point":
        return shapely.MultiPoint(_points([coords], where))
    if kind == "MultiPoint":
        return shapely.MultiPoint(_points(coords, where))
    if kind == "LineString":
        return shapely.LineString(_points(coords, where))
    if kind == "MultiLineString":
        if not isinstance(coords, list) or not coords:
            raise ValueError(f"{where}: a MultiLineString is a non-empty list of lines")
        return shapely.MultiLineString([_points(c, f"{where} line {i}") for i, c in enumerate(coords)])
    raise ValueError(f"{where}: unsupported geometry type {kind!r}")


def _classification(props: Mapping[str, Any], where: str) -> str | None:
    value = props.get("classification")
    if value is None:
        return None
    if isinstance(value, str):
        return value or None
    if not isinstance(value, dict):
        raise ValueError(f"{where}: 'classification' must be an object with a 'name'")
    if isinstance(value.get("names"), list) and value["names"]:  # 0.4+ derived class, e.g. Tumor: Positive
        return ": ".join(str(n) for n in value["names"])
    names: list[str] = []  # 0.2/0.3: the class's name after its parentClass chain's (PathClass.toString)
    node: Any = value
    while isinstance(node, dict) and len(names) < _MAX_CLASS_DEPTH:
        if node.get("name") not in (None, ""):
            names.append(str(node["name"]))
        node = node.get("parentClass")
    if node is not None and not isinstance(node, dict):
        raise ValueError(f"{where}: 'classification.parentClass' must be an object")
    return ": ".join(reversed(names)) or None


def _feature_list(data: Any, where: str) -> list[Any]:
    """The features of a whole (small) document: a FeatureCollection, a Feature or an array of them."""
    if isinstance(data, list):
        return data
    if isinstance(data, dict) and data.get("type") == "FeatureCollection":
        features = data.get("features")
        if not isinstance(features, list):
            raise QuPathFileError(f"{where}: a FeatureCollection whose 'features' is not a list")
        return features
    if isinstance(data, dict) and data.get("type") == "Feature":
        return [data]
    raise QuPathFileError(
        f"{where}: not a QuPath GeoJSON export (expected a FeatureCollection, a Feature or an array of them)"
    )


def strip_extension(name: str) -> str:
    """A file name without its extension as QuPath strips it (``GeneralTools.stripExtension``, 0.6): the
    known multi-part ones (``.ome.tif``, ``.ome.tiff``, ``.tar.gz``, ``.ome.zarr``) whole, a ``.gz`` with
    the extension before it, else the last ``.word``. ``X.svs`` -> ``X``, ``X.ome.tif`` -> ``X``."""
    lower = name.lower()
    if lower.endswith(".gz") and len(name) > 3:
        return strip_extension(name[:-3]) if _extension(name[:-3]) else name[:-3]
    return name[: len(name) - len(_extension(name))]


def _extension(name: str) -> str:
    lower = name.lower()
    for multi in MULTIPART_EXTENSIONS:
        if lower.endswith(multi):
            return multi
    dot = name.rfind(".")
    return name[dot:] if dot >= 0 and _WORD.fullmatch(name[dot + 1 :]) and dot < len(name) - 1 else ""


@dataclass(frozen=True)
class QuPathSource:
    """One export to read: a file, or an entry of a QuPath ZIP export (``member``)."""

    path: Path
    member: str | None = None

    def __str__(self) -> str:
        return f"{self.path} [{self.member}]" if self.member else str(self.path)


def qupath_sources(path: str | Path) -> list[QuPathSource]:
    """The exports in one file: a ZIP export (QuPath's "Compression: ZIP") gives each .geojson / .json
    entry, any other file itself (gzip is recognised when read)."""
    path = Path(path)
    if not path.name.lower().endswith(".zip"):
        return [QuPathSource(path)]
    try:
        with zipfile.ZipFile(path) as archive:
            names = [
                n for n in archive.namelist() if n.lower().endswith(GEOJSON_SUFFIXES) and not n.endswith("/")
            ]
    except (OSError, zipfile.BadZipFile) as exc:
        raise QuPathFileError(f"{path}: not a readable ZIP archive: {exc}") from None
    if not names:
        raise QuPathFileError(f"{path}: a ZIP archive without any .geojson or .json entry")
    return [QuPathSource(path, n) for n in names]


@contextmanager
def _text_stream(source: QuPathSource) -> Iterator[io.TextIOBase]:
    """The export's text: gzip (by its magic bytes) undone, a UTF-8 byte order mark dropped."""
    with ExitStack() as stack:
        if source.member is not None:
            raw: IO[bytes] = stack.enter_context(zipfile.ZipFile(source.path)).open(source.member)
        else:
            raw = stack.enter_context(open(source.path, "rb"))  # noqa: SIM115 - closed by the stack
        if raw.peek(2)[:2] == b"\x1f\x8b":  # QuPath's "Compression: gzip" (X.geojson.gz)
            raw = stack.enter_context(gzip.GzipFile(fileobj=raw))
        yield stack.enter_context(io.TextIOWrapper(raw, encoding="utf-8-sig", errors="strict"))


class _Feed:
    """A JSON document read a chunk at a time, decoded value by value with json's C scanner: a feature
    at a time, so a 600 MB cell export is never held whole."""

    def __init__(self, stream: io.TextIOBase, where: str) -> None:
        self.stream, self.where = stream, where
        self.buf, self.pos, self.base, self.eof = "", 0, 0, False

    def _more(self) -> bool:
        if self.eof:
            return False
        chunk = self.stream.read(max(_CHUNK, len(self.buf) - self.pos))
        if not chunk:
            self.eof = True
            return False
        if self.pos > len(self.buf) // 2:  # drop what has been read
            self.base += self.pos
            self.buf, self.pos = self.buf[self.pos :], 0
        self.buf += chunk
        return True

    def peek(self) -> str:
        """The next character that is not white space ("" at the end)."""
        while True:
            match = _NON_SPACE.search(self.buf, self.pos)
            if match:
                self.pos = match.start()
                return self.buf[self.pos]
            self.pos = len(self.buf)
            if not self._more():
                return ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            found = repr(self.buf[self.pos]) if self.pos < len(self.buf) else "the end of the file"
            raise QuPathFileError(
                f"{self.where}: invalid JSON: expected {char!r} at character {self.offset}, found {found}"
            )
        self.pos += 1

    @property
    def offset(self) -> int:
        return self.base + self.pos

    def value(self) -> Any:
        """The next JSON value, decoded whole."""
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                truncated = exc.pos >= len(self.buf) - 1 or exc.msg.startswith("Unterminated string")
                if truncated and self._more():
                    continue
                raise QuPathFileError(
                    f"{self.where}: invalid JSON: {exc.msg} at character {self.base + exc.pos}"
                ) from None
            except RecursionError:
                raise QuPathFileError(
                    f"{self.where}: invalid export: JSON nested too deeply at character {self.offset}"
                ) from None
            except ValueError as exc:  # an integer of more than 4300 digits
                raise QuPathFileError(
                    f"{self.where}: invalid JSON at character {self.offset}: {exc}"
                ) from None
            if end < len(self.buf) or not self._more():  # a value cut by the chunk's end is read again
                self.pos = end
                return value

    def array(self) -> Iterator[Any]:
        """The values of the array that starts here, one at a time."""
        self.expect("[")
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            yield self.value()
            if self.peek() == ",":
                self.pos += 1
                continue
            self.expect("]")
            return


def _stream_features(feed: _Feed) -> Iterator[Any]:
    """Each feature of an export, as QuPath reads them: a FeatureCollection's ``features`` (streamed),
    an array of features (streamed) or a single Feature."""
    first = feed.peek()
    if first == "[":
        yield from feed.array()
        return
    if first != "{":
        raise QuPathFileError(
            f"{feed.where}: not a QuPath GeoJSON export (expected a FeatureCollection, a Feature or an "
            "array of them)"
        )
    feed.pos += 1
    members: dict[str, Any] = {}
    streamed = False
    while feed.peek() != "}":
        if members or streamed:
            feed.expect(",")
        key = feed.value()
        feed.expect(":")
        if (
            key == "features"
            and feed.peek() == "["
            and members.get("type", "FeatureCollection") == "FeatureCollection"
        ):
            streamed = True
            yield from feed.array()
        else:
            members[str(key)] = feed.value()
    feed.pos += 1
    if not streamed:
        yield from _feature_list(members, feed.where)
    elif members.get("type", "FeatureCollection") != "FeatureCollection":
        raise QuPathFileError(f"{feed.where}: not a QuPath GeoJSON export ('type' {members['type']!r})")


def _object(feature: Any, i: int, where: str) -> QuPathObject:
    """One feature as a QuPathObject; only annotations get their geometry parsed."""
    if not isinstance(feature, dict):
        raise QuPathFileError(f"{where}: feature {i}: not a GeoJSON Feature object")
    raw_id = feature.get("id")
    feature_id = "" if raw_id is None or raw_id in LEGACY_OBJECT_TYPES else str(raw_id)
    props = feature.get("properties") or {}
    if not isinstance(props, dict):
        raise QuPathFileError(f"{where}: feature {i}: 'properties' is not an object")
    name = props.get("name")
    name = None if name in (None, "") else str(name)
    here = f"{where}: {_describe(i, feature_id, name)}"
    object_type = _object_type(props, raw_id)
    if object_type != "annotation":  # detections, cells, tiles... are only counted: no geometry built
        return QuPathObject(i, feature_id, object_type, None, None, name)
    try:
        geometry = parse_geometry(feature.get("geometry"), "geometry")
        classification = _classification(props, "properties")
    except ValueError as exc:
        raise QuPathFileError(f"{here}: {exc}") from None
    except RecursionError:
        raise QuPathFileError(f"{here}: geometry nested too deeply") from None
    return QuPathObject(i, feature_id, object_type, geometry, classification, name)


def _object_type(props: Mapping[str, Any], raw_id: Any) -> str:
    """QuPath's own order: ``objectType`` (0.4+), ``object_type`` (0.3), ``type``, then the 0.2 id."""
    for key in ("objectType", "object_type", "type"):
        value = props.get(key)
        if isinstance(value, str) and value:
            return OBJECT_TYPE_ALIASES.get(value, value)
    return LEGACY_OBJECT_TYPES.get(raw_id, "annotation") if isinstance(raw_id, str) else "annotation"


def iter_qupath_objects(source: QuPathSource | str | Path) -> Iterator[QuPathObject]:
    """Every feature of a QuPath GeoJSON export, in file order, read one at a time; QuPathFileError names
    the file and the feature. Annotations carry their geometry; other objects only their type."""
    if not isinstance(source, QuPathSource):
        source = QuPathSource(Path(source))
    where = str(source)
    try:
        with _text_stream(source) as stream:
            for i, feature in enumerate(_stream_features(_Feed(stream, where))):
                yield _object(feature, i, where)
    except UnicodeDecodeError as exc:
        raise QuPathFileError(
            f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start} of a chunk)"
        ) from None
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise QuPathFileError(f"{where}: cannot read: {exc}") from None


def read_qupath_objects(source: QuPathSource | str | Path) -> list[QuPathObject]:
    """:func:`iter_qupath_objects` as a list."""
    return list(iter_qupath_objects(source))


def box_ring(x: float, y: float, w: float, h: float) -> list[list[float]]:
    """A level-0 box as QuPath writes a rectangle: clockwise from the top-left corner, closed."""
    return [[x, y], [x + w, y], [x + w, y + h], [x, y + h], [x, y]]


def annotation_feature(
    rings: Sequence[Sequence[Sequence[float]]],
    *,
    name: str,
    classification: str,
    color: Sequence[int],
    properties: Mapping[str, Any] | None = None,
    measurements: Mapping[str, float] | None = None,
    metadata: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One locked QuPath annotation: a Polygon of ``rings`` (exterior, then holes) with a
    classification, a name, measurements (numbers QuPath lists in its table), ``metadata`` (text QuPath
    0.5+ keeps and shows; strings only) and extra properties (which QuPath drops on import).
    Its id is a UUID derived from its content, so the same export writes the same file."""
    props: dict[str, Any] = {
        "objectType": "annotation",
        "name": name,
        "classification": {"name": classification, "color": [int(c) for c in color]},
        "isLocked": True,
    }
    if measurements:
        props["measurements"] = {k: float(v) for k, v in measurements.items()}
    if metadata:
        props["metadata"] = {str(k): str(v) for k, v in metadata.items()}
    props |= dict(properties or {})
    geometry = {"type": "Polygon", "coordinates": [[[float(x), float(y)] for x, y in r] for r in rings]}
    digest = json.dumps([geometry, props], sort_keys=True, default=str)
    return {
        "type": "Feature",
        "id": str(uuid.uuid5(_NAMESPACE, digest)),
        "geometry": geometry,
        "properties": props,
    }


def feature_collection(features: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The FeatureCollection QuPath imports (File > Import objects, or drag and drop)."""
    return {"type": "FeatureCollection", "features": list(features)}
