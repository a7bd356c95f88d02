"""The exact read path per slide compression, against the CPU floor: read + RGB + Lanczos of one view.

Slides: the 4096 x 3072, 4-level design of ``bench_views`` written as Aperio SVS with JPEG tiles, as SVS
with JPEG 2000 tiles (compression 33005, lossless), as a generic TIFF with deflate tiles (the synthetic
slides' own format), and as DICOM-WSI (wsidicomizer, 256 px frames) with
baseline JPEG (quality 90) and with JPEG 2000 (lossless) frames. DICOM JPEG-LS is not listed: OpenSlide 4
refuses its transfer syntax (1.2.840.10008.1.2.4.80), so no platform read exists to time.

- **exact**: the platform's read (``access.read_scaled`` at ``views.choose_level``: the JPEG, lossless
  or Aperio JPEG 2000 RGB tiles, or DICOM JPEG frames, directly where ``slides.tiles`` covers the slide, else
  OpenSlide ``read_region``), then Lanczos;

- **floor**: only the covering tiles (frames) decoded with imagecodecs (libjpeg-turbo, OpenJPEG), stitched
  and cut in numpy, then the same Lanczos. Its pixels are compared with the exact read (``max|diff|``).

CPU time (``time.process_time``), median of ``REPEATS`` interleaved runs, OpenSlide's tile cache off (a
repeat would otherwise be served from it, unlike an agent's next crop). ``python -m perf formats``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import imagecodecs
import numpy as np
import openslide
import tifffile
from PIL import Image

from giant_assets.slides.access import MAX_READ_PIXELS, open_slide, output_size, read_scaled
from giant_assets.slides.formats import dicom_instances
from giant_assets.slides.synthetic import ONE_LESION_DESIGN, render_level, write_pyramidal_slide
from giant_assets.slides.views import choose_level, level_read_size
from perf.bench_views import LONG_SIDE, REPEATS, TARGET, VIEWS, TileReader

JPEG_BASELINE, JPEG_2000 = "1.2.840.10008.1.2.4.50", ("1.2.840.10008.1.2.4.90", "1.2.840.10008.1.2.4.91")


class DicomFrames:
    """One DICOM-WSI level's frames (TILED_FULL, row-major) held as bytes, decoded with imagecodecs."""

    def __init__(self, folder: Path) -> None:
        import pydicom
        from pydicom.encaps import generate_frames

        self.levels: dict[tuple[int, int], tuple[int, int, list[bytes], Callable]] = {}
        for path in dicom_instances(folder):
            ds = pydicom.dcmread(path)
            n = int(ds.NumberOfFrames)
            frames = list(generate_frames(ds.PixelData, number_of_frames=n))
            syntax = str(ds.file_meta.TransferSyntaxUID)
            decode = imagecodecs.jpeg8_decode if syntax == JPEG_BASELINE else imagecodecs.jpeg2k_decode
            size = (int(ds.TotalPixelMatrixColumns), int(ds.TotalPixelMatrixRows))
            self.levels[size] = (int(ds.Columns), int(ds.Rows), frames, decode)

    def read(self, size: tuple[int, int], x: int, y: int, w: int, h: int) -> np.ndarray:
        tw, th, frames, decode = self.levels[size]
        across = -(-size[0] // tw)
        c0, c1, r0, r1 = x // tw, (x + w - 1) // tw, y // th, (y + h - 1) // th
        out = np.empty(((r1 - r0 + 1) * th, (c1 - c0 + 1) * tw, 3), np.uint8)
        for r in range(r0, r1 + 1):
            for c in range(c0, c1 + 1):
                tile = decode(frames[r * across + c])
                out[(r - r0) * th : (r - r0 + 1) * th, (c - c0) * tw : (c - c0 + 1) * tw] = tile
        ox, oy = x - c0 * tw, y - r0 * th
        return out[oy : oy + h, ox : ox + w]


def _tiff_floor(path: Path) -> Callable[[tuple[int, int], int, int, int, int], np.ndarray]:
    reader = TileReader(path)
    return lambda size, x, y, w, h: reader.read(reader.page(size), x, y, w, h)


def write_slides(folder: Path) -> dict[str, tuple[Path, Callable]]:
    """name -> (slide path, floor reader(level size, x, y, w, h))."""
    from wsidicom.codec import Jpeg2kSettings, JpegSettings
    from wsidicomizer import WsiDicomizer
    from wsidicomizer.wsidicomizer import SourceIdentifier

    slides: dict[str, tuple[Path, Callable]] = {}
    svs = write_pyramidal_slide(folder / "jpeg.svs", ONE_LESION_DESIGN, levels=4, svs=True)
    slides["SVS JPEG"] = (svs, _tiff_floor(svs))
    j2k = _write_j2k_svs(folder / "j2k.svs")
    slides["SVS JPEG 2000"] = (j2k, _tiff_floor(j2k))
    source = write_pyramidal_slide(folder / "source.tiff", ONE_LESION_DESIGN, levels=4)
    slides["TIFF deflate"] = (source, _tiff_floor(source))
    for name, encoding in (("DICOM JPEG", JpegSettings(quality=90)), ("DICOM JPEG 2000", Jpeg2kSettings())):
        out = folder / name.replace(" ", "_")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            WsiDicomizer.convert(
                source, out, tile_size=256, include_label=False, include_overview=False,
                include_thumbnail=False, workers=1, encoding=encoding,
                preferred_source=SourceIdentifier.TIFFSLIDE,
            )  # fmt: skip
        slides[name] = (out, DicomFrames(out).read)
    return slides


def _write_j2k_svs(path: Path) -> Path:
    """An Aperio SVS whose tiles are JPEG 2000 RGB codestreams (compression 33005), 4 levels."""
    d = ONE_LESION_DESIGN
    base = render_level(d, 1)
    with tifffile.TiffWriter(path) as tw:
        for lv in range(4):
            im = np.ascontiguousarray(base[:: 1 << lv, :: 1 << lv])
            full = f"{d.width}x{d.height}"
            head = f"Aperio Image Library v12.0.15\r\n{full} [0,0 {full}] (256x256) J2K"
            if lv:
                head = (
                    f"Aperio Image Library v12.0.15\r\n{d.width}x{d.height} -> {im.shape[1]}x{im.shape[0]} - "
                )
            tw.write(
                im, tile=(256, 256), photometric="rgb", compression=33005, metadata=None,
                description=f"{head}|AppMag = 20|MPP = 0.5000", subfiletype=1 if lv else 0,
            )  # fmt: skip
    return path


def _cpu(fn: Callable[[], object]) -> tuple[float, object]:
    started = time.process_time()
    out = fn()
    return time.process_time() - started, out


def main() -> None:
    print(f"CPU ms of read + RGB + Lanczos per view, median of {REPEATS}; floor = imagecodecs decode of the")
    print("covering tiles + numpy cut + the same Lanczos")
    print(
        f"{'slide':>16} {'view':>15} {'level':>5} {'exact':>8} {'floor':>8} {'x floor':>8} {'max|diff|':>10}"
    )
    worst: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (path, floor_read) in write_slides(Path(tmp)).items():
            with open_slide(path) as slide:
                # no tile cache: each repeat decodes afresh, as a new crop does (and as the floor does)
                slide.set_cache(openslide.OpenSlideCache(0))
                for view, box in VIEWS.items():
                    level = choose_level(slide, box, LONG_SIDE)
                    rw, rh = level_read_size(slide, level, box)
                    out = output_size(box[2], box[3], LONG_SIDE) if max(rw, rh) > LONG_SIDE else (rw, rh)
                    size = tuple(int(v) for v in slide.level_dimensions[level])
                    ds = float(slide.level_downsamples[level])

                    def exact(slide=slide, level=level, box=box, out=out):
                        return read_scaled(slide, level, box, out, MAX_READ_PIXELS)[0]

                    def floor(size=size, box=box, ds=ds, rw=rw, rh=rh, out=out, floor_read=floor_read):
                        rgb = Image.fromarray(floor_read(size, int(box[0] / ds), int(box[1] / ds), rw, rh))
                        return rgb.resize(out, Image.Resampling.LANCZOS) if rgb.size != out else rgb

                    times: dict[str, list[float]] = {"exact": [], "floor": []}
                    made = {}
                    for _ in range(REPEATS):
                        for label, fn in (("exact", exact), ("floor", floor)):
                            t, made[label] = _cpu(fn)
                            times[label].append(t)
                    e, f = statistics.median(times["exact"]), statistics.median(times["floor"])
                    diff = np.abs(
                        np.asarray(made["exact"], np.int16) - np.asarray(made["floor"], np.int16)
                    ).max()
                    print(
                        f"{name:>16} {view:>15} {level:>5} {e * 1e3:>8.1f} {f * 1e3:>8.1f} "
                        f"{e / f:>7.2f}x {diff:>10}"
                    )
                    worst[name] = max(worst.get(name, 0.0), e / f)
    for name, ratio in worst.items():
        verdict = "met" if ratio <= TARGET else "MISSED"
        print(f"{name}: worst view {ratio:.2f}x the floor (target <= {TARGET}x: {verdict})")


if __name__ == "__main__":
    main()
