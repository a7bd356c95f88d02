"""The guides' label font: DejaVu Sans from the system, else matplotlib's copy, found without importing
matplotlib (every process drawing guides would otherwise pay its import)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import matplotlib
import pytest

from giant_assets.slides import guides


def test_without_the_system_font_matplotlibs_copy_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(guides, "FONT_DIRS", (str(tmp_path),))
    assert guides.font_path() == Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"
    (tmp_path / "DejaVuSans.ttf").write_bytes(guides.font_path().read_bytes())
    assert guides.font_path() == tmp_path / "DejaVuSans.ttf"  # the system's copy first


def test_neither_font_gives_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guides, "FONT_DIRS", (str(tmp_path),))
    monkeypatch.setattr(guides.importlib.util, "find_spec", lambda name: None)
    assert guides.font_path() is None


def test_drawing_guides_imports_no_matplotlib() -> None:
    code = (
        "import sys; from PIL import Image; from giant_assets.slides.guides import draw_guides, font_path; "
        "assert font_path() is not None; draw_guides(Image.new('RGB', (400, 300)), (0, 0, 4000, 3000)); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
