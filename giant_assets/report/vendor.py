"""The browser libraries the viewer and review pages serve themselves: OpenSeadragon (deep zoom), put
in ``report/static/vendor/openseadragon/`` by ``make`` (``npm ci`` in ``frontend/``, pinned by its lock
file); never loaded from a CDN. Without it the pages show the static overview and ``HINT``."""

from __future__ import annotations

import re
from pathlib import Path

STATIC_DIR = Path(__file__).resolve().parent / "static"
VENDOR_DIR = STATIC_DIR / "vendor"
OSD_SCRIPT = "openseadragon/openseadragon.min.js"
URL_PREFIX = "/static/vendor/"  # where both servers serve VENDOR_DIR
SCRIPT_URL = "/static/deepzoom.js"  # the pages' deep zoom script (report/static/deepzoom.js)
HINT = "deep zoom needs OpenSeadragon: run make (it runs npm ci in frontend/) and reload"
_NAME = re.compile(r"^openseadragon/(?:openseadragon\.min\.js|images/[a-z_]{1,40}\.png)$")
_TYPES = {"js": "text/javascript; charset=utf-8", "png": "image/png"}


def deep_zoom_available() -> bool:
    """Whether OpenSeadragon is installed where the servers serve it."""
    return (VENDOR_DIR / OSD_SCRIPT).is_file()


def static_file(url_path: str) -> tuple[bytes, str] | None:
    """(bytes, content type) of the deep zoom script or a vendored file at ``url_path``, or None."""
    if url_path == SCRIPT_URL:
        return (STATIC_DIR / "deepzoom.js").read_bytes(), _TYPES["js"]
    if url_path.startswith(URL_PREFIX):
        return vendor_file(url_path[len(URL_PREFIX) :])
    return None


def vendor_file(name: str) -> tuple[bytes, str] | None:
    """(bytes, content type) of vendored file ``name`` (relative to VENDOR_DIR), or None when it is not
    one of OpenSeadragon's files or is not installed. Names are matched whole: no other path is read."""
    if not _NAME.match(name):
        return None
    try:
        data = (VENDOR_DIR / name).read_bytes()
    except OSError:
        return None
    return data, _TYPES[name.rsplit(".", 1)[1]]
