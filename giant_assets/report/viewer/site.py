"""Write the static trajectory viewer: ``<viewer>/<experiment>/index.html`` plus one page per item.

Layout of one experiment's site (every name from data goes through ``core.paths.confined_path``)::

    index.html                      all items of every benchmark built so far; filter and sort in JS
    static/viewer.css, viewer.js    no network, no CDN: opens from file:// and from any static host
    _rows/<benchmark>.json          the index rows of one benchmark (the index is rebuilt from these)
    <benchmark>/<benchmark_id>/index.html, run<k>/overview.png, run<k>/step<i>.png

Each benchmark is written on its own (one Dagster partition), then the index is rebuilt under a file
lock from every benchmark's rows, so partitions built in parallel all end up in it.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from giant_assets.benchmarks.registry import BUILT_IN_NAMES
from giant_assets.core.files import atomic_write_bytes
from giant_assets.core.paths import confined_path, decode_component
from giant_assets.report.slide_tiles import dzi_url, slide_key
from giant_assets.report.vendor import HINT
from giant_assets.report.viewer.items import ROWS_DIR, STATIC_FILES, cross_href, rebuild_items, summary_href
from giant_assets.report.viewer.overlays import run_overlays
from giant_assets.report.viewer.pages import index_counts, index_row

if TYPE_CHECKING:
    from jinja2 import Environment

RECIPE = "render.json"  # beside an item page whose pictures are drawn on its first visit
SLIDES_DIR = "_slides"  # <benchmark>.json: deep zoom key -> slide path of its pages (giant-view reads it)


@dataclass(frozen=True)
class SiteResult:
    """What one benchmark's build wrote."""

    index: Path  # the experiment's index.html
    pages: list[Path]
    pictures: int  # picture files placed beside the pages
    rows: list[dict[str, Any]]  # every index row of the experiment, as shown
    pending: int = 0  # pages whose pictures the served viewer draws on their first visit


def served_url(base: str, page: Path, viewer_root: Path) -> str:
    """The address of ``page`` (a file under ``viewer_root``) on a server of ``viewer_root`` at ``base``
    (``make view``: ``http://127.0.0.1:8765/``); each path component URL-quoted."""
    relative = page.resolve().relative_to(viewer_root.resolve())
    return base.rstrip("/") + "/" + "/".join(quote(part, safe="") for part in relative.parts)


def _money(value: float) -> str:
    return f"${value:,.4f}"


@cache  # one per process: its templates are compiled once (and reloaded if their files change)
def _environment() -> Environment:
    from jinja2 import Environment, PackageLoader, StrictUndefined  # only when a site is written

    env = Environment(
        loader=PackageLoader("giant_assets.report.viewer", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["money"] = _money
    env.filters["box"] = lambda b: "—" if not b else "[" + ", ".join(f"{float(v):g}" for v in b) + "]"
    return env


def _href(*names: str) -> str:
    """A relative URL to files named ``names`` (already file-safe names, percent-encoded once more)."""
    return "/".join(quote(n, safe="") for n in names)


def _place(src: str, dst: Path) -> bool:
    """Hard-link (else copy) a picture beside its page; False when the picture is gone."""
    if not os.path.isfile(src):
        return False
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.unlink(missing_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
    return True


def _place_pictures(page: dict[str, Any], page_dir: Path) -> int:
    """Put the page's pictures beside it and point the page at them (relative links)."""
    placed = 0
    for run in page["runs"]:
        run_name = f"run{run['run_index']}"
        for holder in [run, *run["steps"]]:
            key = "overview" if holder is run else "picture"
            src = holder.get(key)
            if not src:
                continue
            name = Path(src).name
            if _place(src, page_dir / run_name / name):
                holder[key] = _href(run_name, name)
                placed += 1
            else:
                holder[key] = None
    return placed


def render_item(env: Environment, page: dict[str, Any], page_dir: Path) -> Path:
    """Write one item page (its pictures already beside it)."""
    path = page_dir / "index.html"
    cross = cross_href(page["benchmark"], page["benchmark_id"])
    overlays = {
        run["run_index"]: run_overlays(run["steps"], page["references"], run.get("reported", []))
        for run in page["runs"]
    }
    html = env.get_template("item.html").render(
        page=page, root="../../", cross_href=cross, overlays=overlays, deep_zoom_hint=HINT
    )
    atomic_write_bytes(path, html.encode("utf-8"))
    return path


def write_benchmark(
    site: Path, benchmark: str, pages: list[dict[str, Any]], experiment: dict[str, Any] | None = None
) -> SiteResult:
    """Write ``benchmark``'s item pages (replacing its earlier ones), then rebuild the index and the
    benchmark's cross-experiment pages.

    A page with runs whose pictures were not drawn gets ``render.json`` beside it (the page and the
    ``experiment``'s settings): the served viewer (``viewer.serve``) draws them on the first visit.
    """
    env = _environment()
    bench_dir = confined_path(site, benchmark)
    if bench_dir.exists():
        shutil.rmtree(bench_dir)
    written, pictures, pending, rows, slides = [], 0, 0, [], {}
    for page in pages:
        if page.get("wsi_path"):
            page["dzi"] = dzi_url(page["wsi_path"])
            slides[slide_key(page["wsi_path"])] = page["wsi_path"]
        page_dir = confined_path(bench_dir, page["benchmark_id"])
        page_dir.mkdir(parents=True, exist_ok=True)
        pictures += _place_pictures(page, page_dir)
        if any(run.get("pictures_pending") for run in page["runs"]) and page.get("wsi_path"):
            recipe = {"experiment": experiment, "page": page}
            atomic_write_bytes(page_dir / RECIPE, json.dumps(recipe, ensure_ascii=False).encode("utf-8"))
            pending += 1
        written.append(render_item(env, page, page_dir))
        rows.append(index_row(page, _href(bench_dir.name, page_dir.name, "index.html")))
    keys = confined_path(site, SLIDES_DIR, f"{benchmark}.json")
    atomic_write_bytes(keys, json.dumps(slides, ensure_ascii=False).encode("utf-8"))
    fragment = confined_path(site, ROWS_DIR, f"{benchmark}.json")
    atomic_write_bytes(fragment, json.dumps(rows, ensure_ascii=False).encode("utf-8"))
    index, all_rows = rebuild_index(site, env)
    rebuild_items(site.parent, benchmark, env)
    return SiteResult(index=index, pages=written, pictures=pictures, rows=all_rows, pending=pending)


def _benchmark_order(path: Path) -> tuple[int, str]:
    name = decode_component(path.stem)
    return (BUILT_IN_NAMES.index(name) if name in BUILT_IN_NAMES else len(BUILT_IN_NAMES), name)


def rebuild_index(site: Path, env: Environment | None = None) -> tuple[Path, list[dict[str, Any]]]:
    """Render ``index.html`` from every benchmark's rows, under a lock; also the static files and the
    list of experiments one folder up. Returns the index path and its rows."""
    env = env or _environment()
    site.mkdir(parents=True, exist_ok=True)
    with open(site / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        rows: list[dict[str, Any]] = []
        for fragment in sorted((site / ROWS_DIR).glob("*.json"), key=_benchmark_order):
            rows.extend(json.loads(fragment.read_text(encoding="utf-8")))
        experiment = decode_component(site.name)
        html = env.get_template("index.html").render(
            experiment=experiment,
            rows=rows,
            counts=index_counts(rows),
            benchmarks=sorted({r["benchmark"] for r in rows}, key=lambda b: _benchmark_order(Path(b))),
            error_kinds=sorted({e for r in rows for e in r["errors"]}),
            items_scripts=["../" + summary_href(b) for b in sorted({r["benchmark"] for r in rows})],
            root="",
        )
        index = site / "index.html"
        atomic_write_bytes(index, html.encode("utf-8"))
        for name in STATIC_FILES:
            data = resources.files("giant_assets.report.viewer").joinpath("static", name).read_bytes()
            atomic_write_bytes(site / "static" / name, data)
    _write_experiment_list(site.parent, env)
    return index, rows


def _write_experiment_list(viewer_root: Path, env: Environment) -> None:
    """``<viewer>/index.html``: a link to each experiment's site (what ``make view`` opens first)."""
    sites = sorted(p.parent for p in viewer_root.glob("*/index.html"))
    entries = [{"name": decode_component(p.name), "href": _href(p.name, "index.html")} for p in sites]
    html = env.get_template("experiments.html").render(experiments=entries, root="")
    atomic_write_bytes(viewer_root / "index.html", html.encode("utf-8"))
