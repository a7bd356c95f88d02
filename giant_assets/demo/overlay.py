"""The demo's own declarations beside the experiments file it is given (``overlay.yaml``): a declared
benchmark over the sample's slides, the example plug-in and a GIANT iteration sweep.

They are written with the given file's declarations into ``<data>/demo-experiments.yaml``, the file the
demo runs on; the given file is never changed, so no other command or test sees these items.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml

from giant_assets.experiments.declared import load_experiments

OVERLAY_NAME = "overlay.yaml"
COMPOSED_NAME = "demo-experiments.yaml"
LIKE = "demo-giant"  # the overlay's experiments talk to this experiment's model (base_url, key variable)
FROM_LIKE = ("base_url", "api_key_env")


def overlay_path() -> Path:
    return Path(str(resources.files("giant_assets.demo").joinpath(OVERLAY_NAME)))


def overlay() -> dict:
    """The overlay's declarations, its items paths made absolute (they are relative to the overlay)."""
    path = overlay_path()
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    for declaration in doc.get("benchmarks", {}).values():
        declaration["items"] = str(path.parent / declaration["items"])
    return doc


def compose(given: Path, out: Path) -> Path:
    """Write ``out``: ``given``'s declarations and the overlay's. ``given`` is validated first (its own
    errors name it); a name both declare is an error naming both files."""
    declared = load_experiments(given)
    if LIKE not in declared:
        raise SystemExit(f"demo: {given} declares no {LIKE!r} experiment (the demo's model settings)")
    doc = yaml.safe_load(given.read_text(encoding="utf-8"))
    for declaration in (doc.get("benchmarks") or {}).values():  # relative to the given file's folder
        for field in ("items", "wsi_root"):
            if declaration.get(field):
                declaration[field] = str(given.parent / Path(declaration[field]).expanduser())
    extra = overlay()
    like = declared[LIKE]
    for section in ("experiments", "benchmarks"):
        mine = doc.get(section) or {}
        clash = sorted(set(mine) & set(extra.get(section, {})))
        if clash:
            raise SystemExit(
                f"demo: {given} declares {section[:-1]}(s) {clash} that the demo declares itself "
                f"({overlay_path()}); rename yours"
            )
        doc[section] = mine | extra.get(section, {})
    for name in extra["experiments"]:
        doc["experiments"][name] |= {field: getattr(like, field) for field in FROM_LIKE}
    out.parent.mkdir(parents=True, exist_ok=True)
    header = f"# written by `make demo`: {given} with the demo's own declarations ({overlay_path()})\n"
    out.write_text(header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    load_experiments(out)  # validated as any experiments file
    return out
