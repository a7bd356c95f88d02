"""Direct tile reads (``slides.tiles``) give OpenSlide's pixels, or step aside for OpenSlide."""

from __future__ import annotations

import random
import zlib
from pathlib import Path

import numpy as np
import openslide
import pytest
import tifffile

from giant_assets.slides.access import open_slide
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from giant_assets.slides.tiles import read_direct, tile_reader
from giant_assets.slides.views import overview, region
from tests.support.corrupt_slides import corrupt_smallest_level_tiles
from tests.support.slides import write_pyramidal_slide


def _textured_jpeg_tiff(path: Path, levels: int = 3) -> Path:
    """A generic JPEG-tiled TIFF pyramid with noisy texture (every 8x8 block differs), YCbCr 4:2:0."""
    rng = np.random.default_rng(7)
    base = rng.integers(0, 256, (1536, 2048, 3), dtype=np.uint8)
    with tifffile.TiffWriter(path) as tw:
        for lv in range(levels):
            im = np.ascontiguousarray(base[:: 2**lv, :: 2**lv])
            tw.write(im, tile=(256, 256), photometric="ycbcr", subsampling=(2, 2), compression="jpeg",
                     compressionargs={"level": 85}, subfiletype=0 if lv == 0 else 1)  # fmt: skip
    return path


def _textured_j2k_svs(path: Path, compression: int, levels: int = 2) -> Path:
    """An Aperio SVS of lossy JPEG 2000 tiles (irreversible 9/7 wavelet at 30 dB PSNR) over noisy
    texture; 33005 codes RGB (with OpenJPEG's colour transform), 33003 Aperio's YCbCr."""
    rng = np.random.default_rng(11)
    base = rng.integers(0, 256, (768, 1024, 3), dtype=np.uint8)
    coding = {"level": 30, "reversible": False, "mct": compression == 33005}
    with tifffile.TiffWriter(path) as tw:
        for lv in range(levels):
            im = np.ascontiguousarray(base[:: 2**lv, :: 2**lv])
            head = "Aperio Image Library v12.0.15\r\n1024x768 [0,0 1024x768] (256x256) J2K"
            if lv:
                head = f"Aperio Image Library v12.0.15\r\n1024x768 -> {im.shape[1]}x{im.shape[0]} - "
            tw.write(im, tile=(256, 256), photometric="rgb", compression=compression, compressionargs=coding,
                     metadata=None, description=f"{head}|AppMag = 20|MPP = 0.5000",
                     subfiletype=1 if lv else 0)  # fmt: skip
    return path


def _textured_lossless(
    path: Path, compression: str | None, predictor: bool = False, svs: bool = False, samples: int = 3
) -> Path:
    """A lossless tiled pyramid (generic TIFF, or Aperio SVS) of noisy texture with edge tiles (2000 x
    1400 is not a multiple of 256); ``samples`` 4: RGBA, which OpenSlide composites and the tiles do not."""
    rng = np.random.default_rng(13)
    base = rng.integers(0, 256, (1400, 2000, samples), dtype=np.uint8)
    with tifffile.TiffWriter(path) as tw:
        for lv in range(3):
            im = np.ascontiguousarray(base[:: 2**lv, :: 2**lv])
            head = "Aperio Image Library v12.0.15\r\n2000x1400 [0,0 2000x1400] (256x256) RAW"
            if lv:
                head = f"Aperio Image Library v12.0.15\r\n2000x1400 -> {im.shape[1]}x{im.shape[0]} - "
            tw.write(im, tile=(256, 256), photometric="rgb", compression=compression, predictor=predictor,
                     extrasamples=(2,) if samples == 4 else None, metadata=None,
                     description=f"{head}|AppMag = 20|MPP = 0.5000" if svs else None,
                     subfiletype=1 if lv else 0)  # fmt: skip
    return path


@pytest.fixture(scope="module")
def slides(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("tiles")
    return {
        "svs": write_pyramidal_slide(d / "slide.svs", ONE_LESION_DESIGN, levels=4, svs=True),
        "jpeg-tiff": _textured_jpeg_tiff(d / "textured.tiff"),
        "zlib-tiff": write_pyramidal_slide(d / "slide.tiff", ONE_LESION_DESIGN, levels=4),
        "j2k-svs": _textured_j2k_svs(d / "j2k.svs", 33005),
        "j2k-ycbcr-svs": _textured_j2k_svs(d / "j2k_ycbcr.svs", 33003),
        "raw-tiff": _textured_lossless(d / "raw.tiff", None),
        "lzw-predictor-tiff": _textured_lossless(d / "lzw.tiff", "lzw", predictor=True),
        "deflate-predictor-tiff": _textured_lossless(d / "deflate.tiff", "deflate", predictor=True),
        "deflate-svs": _textured_lossless(d / "deflate.svs", "adobe_deflate", svs=True),
        "rgba-tiff": _textured_lossless(d / "rgba.tiff", "adobe_deflate", samples=4),
    }


class _Wrapped:
    """An OpenSlide handle behind a wrapper, counting ``read_region`` calls."""

    def __init__(self, slide: openslide.OpenSlide) -> None:
        self._slide, self.reads = slide, 0

    def __getattr__(self, name):
        return getattr(self._slide, name)

    def read_region(self, *args):
        self.reads += 1
        return self._slide.read_region(*args)


def _openslide_rgb(slide: openslide.OpenSlide, loc, level, size) -> np.ndarray:
    rgba = np.asarray(slide.read_region(loc, level, size))
    assert (rgba[..., 3] == 255).all()
    return rgba[..., :3]


LOSSLESS_SLIDES = ["zlib-tiff", "raw-tiff", "lzw-predictor-tiff", "deflate-predictor-tiff", "deflate-svs"]


@pytest.mark.parametrize("name", ["svs", "jpeg-tiff", "j2k-svs", *LOSSLESS_SLIDES])
def test_direct_reads_equal_openslide(slides: dict[str, Path], name: str) -> None:
    rng = random.Random(3)
    with open_slide(slides[name]) as slide:
        assert slide.properties[openslide.PROPERTY_NAME_VENDOR] == (
            "aperio" if name.endswith("svs") else "generic-tiff"
        )
        reader = tile_reader(slide)
        assert reader is not None and all(reader.levels)
        for level in range(slide.level_count):
            ds = int(slide.level_downsamples[level])
            lw, lh = slide.level_dimensions[level]
            boxes = [(0, 0, lw, lh), (lw // 4, lh // 4, lw // 4, lh // 4), (lw - 300, lh - 200, 300, 200)]
            boxes += [(rng.randrange(lw - 64), rng.randrange(lh - 64), 0, 0) for _ in range(6)]
            for x, y, w, h in boxes:
                w, h = w or rng.randint(1, lw - x), h or rng.randint(1, lh - y)
                got = read_direct(slide, (x * ds, y * ds), level, (w, h))
                assert got is not None, (level, x, y, w, h)
                assert np.array_equal(got, _openslide_rgb(slide, (x * ds, y * ds), level, (w, h)))


def test_hostile_deflate_tiles_fall_back_to_openslide(slides: dict[str, Path], tmp_path: Path) -> None:
    """A deflate tile that does not decode (its header zeroed), and one that inflates to 64 MB of zeros (a
    "bomb" in the tile's place; tifffile inflates at most the tile's bytes): the direct read gives way
    (None) and OpenSlide reads as before: it reports the damage, and libtiff cuts the bomb at the tile's
    size. Mutation: a decoding error raised instead of giving way."""

    broken = tmp_path / "broken.tiff"
    broken.write_bytes(slides["deflate-predictor-tiff"].read_bytes())
    corrupt_smallest_level_tiles(broken)
    with open_slide(broken) as slide:
        assert read_direct(slide, (0, 0), 2, (64, 64)) is None
        with pytest.raises(openslide.OpenSlideError):
            slide.read_region((0, 0), 2, (64, 64))

    bomb = zlib.compress(bytes(64 << 20), 9)  # ~64 KB of deflate for 64 MB of pixels; a tile holds 192 KB
    bombed = tmp_path / "bomb.tiff"
    bombed.write_bytes(slides["deflate-predictor-tiff"].read_bytes())
    with tifffile.TiffFile(bombed) as tif:
        offset, count = tif.pages[0].dataoffsets[0], tif.pages[0].databytecounts[0]
    assert len(bomb) < count
    with open(bombed, "r+b") as fh:
        fh.seek(offset)
        fh.write(bomb + bytes(count - len(bomb)))
    with open_slide(bombed) as slide:
        assert read_direct(slide, (0, 0), 0, (64, 64)) is None
        assert slide.read_region((0, 0), 0, (64, 64)).size == (64, 64)  # libtiff stops at the tile's size


def test_views_unchanged_by_the_direct_read(slides: dict[str, Path]) -> None:
    """The overview and a crop equal the views made from OpenSlide's read (the reader switched off)."""
    with open_slide(slides["svs"]) as slide:
        fast = [overview(slide, 1000), region(slide, [1024, 512, 2048, 1024], 1000)]
        assert tile_reader(slide) is not None
    with open_slide(slides["svs"]) as opened:
        slide = _Wrapped(opened)  # not an OpenSlide instance: read through OpenSlide
        slow = [overview(slide, 1000), region(slide, [1024, 512, 2048, 1024], 1000)]
        assert tile_reader(slide) is None and slide.reads == 2
    for a, b in zip(fast, slow, strict=True):
        assert a.level == b.level and np.array_equal(np.asarray(a.image), np.asarray(b.image))


def test_openslide_reads_what_the_tiles_cannot(slides: dict[str, Path], tmp_path: Path) -> None:
    with open_slide(slides["rgba-tiff"]) as slide:  # 4 samples: OpenSlide composites the alpha
        assert tile_reader(slide) is None
        assert slide.read_region((0, 0), 0, (8, 8)).size == (8, 8)
    with open_slide(slides["j2k-ycbcr-svs"]) as slide:  # Aperio's YCbCr JPEG 2000: OpenSlide converts it
        assert tile_reader(slide) is None
        assert slide.read_region((0, 0), 0, (8, 8)).size == (8, 8)

    with open_slide(slides["svs"]) as slide:
        assert read_direct(slide, (1, 0), 1, (100, 100)) is None  # not a whole level-1 pixel
        assert read_direct(slide, (4000, 0), 0, (200, 100)) is None  # past the right edge
        assert read_direct(slide, (2, 0), 1, (100, 100)) is not None
    broken = tmp_path / "broken.svs"
    broken.write_bytes(slides["svs"].read_bytes())
    corrupt_smallest_level_tiles(broken)
    with open_slide(broken) as slide:
        assert read_direct(slide, (0, 0), 3, (64, 64)) is None  # undecodable: OpenSlide's error stands
        with pytest.raises(openslide.OpenSlideError):
            slide.read_region((0, 0), 3, (64, 64))
