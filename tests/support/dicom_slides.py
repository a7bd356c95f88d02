"""Real DICOM-WSI test slides: a generated pyramid converted by wsidicomizer (a PyPI DICOM tool)."""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

from giant_assets.slides.synthetic import SlideDesign
from tests.support.slides import write_pyramidal_slide

JPEG_QUALITY = 90  # of the DICOM's baseline JPEG frames (transfer syntax 1.2.840.10008.1.2.4.50)


def write_dicom_wsi(
    folder: Path, design: SlideDesign, levels: int = 3, tile: int = 256, encoding: object = None
) -> list[Path]:
    """Write ``design`` as a DICOM-WSI (one .dcm instance per pyramid level) in ``folder``: baseline JPEG
    frames, or ``encoding`` (a wsidicom codec setting, e.g. ``Jpeg2kSettings``)."""
    from wsidicom.codec import JpegSettings
    from wsidicomizer import WsiDicomizer
    from wsidicomizer.wsidicomizer import SourceIdentifier

    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # wsidicomizer warns about the metadata a test slide lacks
        source = write_pyramidal_slide(Path(tmp) / "source.tiff", design, levels=levels, tile=tile)
        written = WsiDicomizer.convert(
            source,
            folder,
            tile_size=tile,
            include_label=False,
            include_overview=False,
            include_thumbnail=False,
            workers=1,
            encoding=encoding or JpegSettings(quality=JPEG_QUALITY),
            preferred_source=SourceIdentifier.TIFFSLIDE,  # pure Python: needs no libturbojpeg
        )
    return sorted(Path(p) for p in written)
