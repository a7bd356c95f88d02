"""Deep Zoom tiles from the slide itself (``report.slide_tiles`` over ``slides.deepzoom``): the ``.dzi``
descriptor, tiles equal to OpenSlide's own read of the same region (the oracle: ``read_region`` and a
PIL resize, at the place and size computed here by hand from the Deep Zoom layout, encoded as JPEG at
the same quality), 404 for unknown keys, out-of-range tiles and hostile paths, and the caches. A real
pyramidal TIFF and a real DICOM-WSI."""

from __future__ import annotations

import io
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import openslide
import pytest
from PIL import Image

from giant_assets.report.slide_tiles import SlideTiles, dzi_url, slide_key
from giant_assets.slides.formats import openslide_target
from giant_assets.slides.synthetic import LESION, TISSUE, Blob, SlideDesign
from tests.support.dicom_slides import write_dicom_wsi
from tests.support.slides import write_pyramidal_slide

# small dark blobs every 40 px: a tile read one pixel off differs from the oracle along every edge
DOTS = tuple(Blob(x, y, 9, 7, LESION) for x in range(20, 2048, 40) for y in range(20, 1536, 40))
DESIGN = SlideDesign(2048, 1536, tissue=(Blob(1024, 768, 900, 700, TISSUE),), lesions=DOTS)
MAX_LEVEL = math.ceil(math.log2(2048))  # Deep Zoom: level k is the image halved (MAX_LEVEL - k) times
MEAN_TOL = 0.5  # the tile against the oracle's pixels through the same JPEG encoder (quality 75)


@pytest.fixture(scope="module")
def tiff(tmp_path_factory) -> str:
    return str(write_pyramidal_slide(tmp_path_factory.mktemp("dz") / "dots.tiff", DESIGN, levels=3))


@pytest.fixture(scope="module")
def dicom(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("dzdicom") / "case"
    write_dicom_wsi(folder, SlideDesign(1024, 768, lesions=DOTS), levels=2)
    return str(folder)


def _tiles(*paths: str, **caches) -> tuple[SlideTiles, list[str]]:
    """A tile server of ``paths`` and the keys it was asked to resolve."""
    known, asked = {slide_key(p): p for p in paths}, []

    def resolve(key: str) -> str | None:
        asked.append(key)
        return known.get(key)

    return SlideTiles(resolve, **caches), asked


def _pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).astype(int)


def _as_jpeg(image: Image.Image) -> np.ndarray:
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, "JPEG", quality=75)
    return _pixels(buffer.getvalue())


def _read(target: str, loc: tuple[int, int], level: int, size: tuple[int, int]) -> np.ndarray:
    """OpenSlide's read of a region, as a quality-75 JPEG decodes."""
    with openslide.OpenSlide(str(openslide_target(target))) as slide:
        return _as_jpeg(slide.read_region(loc, level, size))


def _mean_diff(a: np.ndarray, b: np.ndarray) -> float:
    assert a.shape == b.shape
    return float(np.abs(a - b).mean())


def test_the_descriptor_names_size_tile_size_overlap_and_format(tiff: str) -> None:
    tiles, _ = _tiles(tiff)
    answer = tiles.answer(dzi_url(tiff))
    assert answer.status == 200 and answer.content_type == "application/xml"
    assert "max-age" in answer.cache_control
    root = ET.fromstring(answer.body)
    ns = "{http://schemas.microsoft.com/deepzoom/2008}"
    assert root.tag == f"{ns}Image"
    assert (root.get("TileSize"), root.get("Overlap"), root.get("Format")) == ("254", "1", "jpeg")
    size = root.find(f"{ns}Size")
    assert (size.get("Width"), size.get("Height")) == ("2048", "1536")


def test_a_full_resolution_tile_is_openslides_read_of_its_region(tiff: str) -> None:
    tiles, _ = _tiles(tiff)
    key = slide_key(tiff)
    got = _pixels(tiles.answer(f"/slides/{key}_files/{MAX_LEVEL}/2_1.jpeg").body)
    # column 2, row 1: starts at 2*254 (x) and 254 (y) less the 1-pixel overlap; 254 + 2 overlaps wide
    expected = _read(tiff, (2 * 254 - 1, 254 - 1), 0, (256, 256))
    assert _mean_diff(got, expected) < MEAN_TOL
    shifted = _read(tiff, (2 * 254, 254), 0, (256, 256))  # the same tile without the overlap: not it
    assert _mean_diff(got, shifted) > 4 * MEAN_TOL


def test_a_zoomed_out_tile_is_a_read_of_a_coarser_level_resized(tiff: str) -> None:
    tiles, _ = _tiles(tiff)
    key = slide_key(tiff)
    # four halvings: the whole 2048 x 1536 slide is 128 x 96, one tile, read from the coarsest level
    # (downsample 4: 512 x 384) and resized
    got = _pixels(tiles.answer(f"/slides/{key}_files/{MAX_LEVEL - 4}/0_0.jpeg").body)
    with openslide.OpenSlide(tiff) as slide:
        expected = slide.read_region((0, 0), 2, (512, 384)).convert("RGB")
    expected.thumbnail((128, 96), Image.Resampling.LANCZOS)
    assert _mean_diff(got, _as_jpeg(expected)) < MEAN_TOL


def test_a_dicom_wsi_is_tiled_through_the_same_path(dicom: str) -> None:
    tiles, _ = _tiles(dicom)
    key = slide_key(dicom)
    root = ET.fromstring(tiles.answer(dzi_url(dicom)).body)
    size = root.find("{http://schemas.microsoft.com/deepzoom/2008}Size")
    assert (size.get("Width"), size.get("Height")) == ("1024", "768")
    got = _pixels(tiles.answer(f"/slides/{key}_files/10/1_2.jpeg").body)  # 1024 wide: level 10 is full size
    assert _mean_diff(got, _read(dicom, (254 - 1, 2 * 254 - 1), 0, (256, 256))) < MEAN_TOL
    assert _mean_diff(got, _read(dicom, (254, 2 * 254), 0, (256, 256))) > 4 * MEAN_TOL


def test_unknown_keys_and_tiles_outside_the_pyramid_are_404(tiff: str) -> None:
    tiles, _ = _tiles(tiff)
    key = slide_key(tiff)
    cols, rows = math.ceil(2048 / 254), math.ceil(1536 / 254)  # 9 x 7 tiles at full resolution
    assert tiles.answer(f"/slides/{key}_files/{MAX_LEVEL}/{cols - 1}_{rows - 1}.jpeg").status == 200
    for path in (
        f"/slides/{'0' * 24}.dzi",
        f"/slides/{'0' * 24}_files/0/0_0.jpeg",
        f"/slides/{key}_files/{MAX_LEVEL + 1}/0_0.jpeg",
        f"/slides/{key}_files/{MAX_LEVEL}/{cols}_0.jpeg",
        f"/slides/{key}_files/{MAX_LEVEL}/0_{rows}.jpeg",
        f"/slides/{key}_files/0/1_0.jpeg",  # level 0 is one pixel: one tile
    ):
        answer = tiles.answer(path)
        assert answer.status == 404, path
        assert answer.cache_control == "no-store"


def test_hostile_paths_are_404_and_never_reach_the_resolver(tiff: str) -> None:
    tiles, asked = _tiles(tiff)
    key = slide_key(tiff)
    for path in (
        "/slides/../../etc/passwd",
        f"/slides/{key}/../../etc/passwd.dzi",
        f"/slides/%2e%2e%2f{key}.dzi",
        f"/slides/{tiff}.dzi",
        f"/slides/{key.upper()}.dzi",
        f"/slides/{key}0.dzi",
        f"/slides/{key}_files/1e308/0_0.jpeg",
        f"/slides/{key}_files/{'9' * 5000}/0_0.jpeg",
        f"/slides/{key}_files/-1/0_0.jpeg",
        f"/slides/{key}_files/{MAX_LEVEL}/0_0.png",
        f"/slides/{key}_files/{MAX_LEVEL}/0_{'1' * 5000}.jpeg",
        f"/slides/{key}_files/{MAX_LEVEL}/0_nan.jpeg",
        f"/slides/{key}.dzi?x=1",
        f"/slides/{key}.dzi\x00",
    ):
        assert tiles.answer(path).status == 404, path
    assert asked == []


def test_tiles_are_cached_and_open_slides_are_bounded(tiff: str, tmp_path: Path) -> None:
    other = str(write_pyramidal_slide(tmp_path / "other.tiff", SlideDesign(512, 512), levels=1))
    tiles, asked = _tiles(tiff, other, open_slides=1)
    key = slide_key(tiff)
    first = tiles.answer(f"/slides/{key}_files/{MAX_LEVEL}/0_0.jpeg")
    again = tiles.answer(f"/slides/{key}_files/{MAX_LEVEL}/0_0.jpeg")
    assert first.body == again.body and tiles.reads == 1  # the second came from the tile cache
    assert tiles.answer(dzi_url(other)).status == 200  # opens the other slide, closing the first
    assert tiles.answer(dzi_url(tiff)).status == 200  # the first is opened (resolved) again
    assert asked == [key, slide_key(other), key]


def test_a_tile_that_does_not_decode_is_a_503_and_the_rest_still_serve(tmp_path: Path) -> None:
    from tests.support.corrupt_slides import corrupt_smallest_level_tiles

    path = str(write_pyramidal_slide(tmp_path / "bad.tiff", SlideDesign(1024, 768), levels=3, svs=True))
    corrupt_smallest_level_tiles(Path(path))
    tiles, _ = _tiles(path)
    key = slide_key(path)
    assert tiles.answer(f"/slides/{key}_files/0/0_0.jpeg").status == 503  # read from the damaged level
    assert tiles.answer(f"/slides/{key}_files/10/0_0.jpeg").status == 200  # level 0 is intact


def test_slides_evicted_while_read_by_other_threads_are_closed_after_the_reads(tiff: str, tmp_path) -> None:
    """Two slides, one kept open, four threads alternating between them: every eviction closes a slide
    that another thread may be reading (closing it mid-read would abort the process)."""
    from concurrent.futures import ThreadPoolExecutor

    other = str(write_pyramidal_slide(tmp_path / "o.tiff", DESIGN, levels=3))
    tiles, _ = _tiles(tiff, other, open_slides=1, tile_bytes=0)  # no tile cache: every request reads
    paths = [
        f"/slides/{slide_key(p)}_files/{MAX_LEVEL}/{k % 8}_{k % 6}.jpeg"
        for k in range(40)
        for p in (tiff, other)
    ]
    with ThreadPoolExecutor(4) as pool:
        statuses = list(pool.map(lambda p: tiles.answer(p).status, paths))
    assert set(statuses) <= {200, 503} and statuses.count(200) > len(paths) // 2
    tiles.close()
