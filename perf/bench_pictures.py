"""Trajectory pictures per run: the time and disk one run costs, drawn up front or on a page's first visit.

A GIANT agent (image size 1000, the OpenAI default) runs ``RUNS`` times on a generated 16384 x 12288
slide against the loopback scripted model, zooming ``CROPS`` times per run. Then, per run:

- ``sent``: the map plus every image the model was sent, re-rendered by the agent's own code (what
  ``trajectory_pictures`` writes now, and what ``giant-view`` draws on a page's first visit);
- ``re-read``: the map plus each crop re-read without guides as PNG (what it wrote before; still the
  path of agents that record no image digest);
- ``first visit``: an item page with ``RUNS`` pending runs fetched from ``giant-view`` over loopback
  HTTP (drawing included), then the same page again (a static file).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
import urllib.request
from pathlib import Path

import pandas as pd

from giant_assets.agents.registry import make_giant_agent
from giant_assets.demo.scripted import ScriptedModelServer, answer_reply, crop_reply
from giant_assets.experiments.spec import Experiment
from giant_assets.report.trajectory_images import PICTURE_COLUMNS, draw_runs
from giant_assets.report.viewer import item_pages
from giant_assets.report.viewer.serve import serve_in_thread
from giant_assets.report.viewer.site import RECIPE, write_benchmark
from giant_assets.runs.agent_api import AgentItem
from giant_assets.slides.synthetic import LESION, TISSUE, Blob, SlideDesign, write_pyramidal_slide

RUNS = 6
CROPS = 5
DESIGN = SlideDesign(
    16384,
    12288,
    tissue=(Blob(8192, 6144, 7000, 5200, TISSUE),),
    lesions=(Blob(5000, 4000, 900, 700, LESION), Blob(11000, 8000, 400, 600, LESION)),
)
BOXES = [(2000, 1000, 8192, 8192), (4000, 3000, 4096, 4096), (4500, 3500, 2048, 2048),
         (4800, 3800, 1024, 1024), (10000, 7000, 2000, 2000)]  # fmt: skip
KEY_ENV = "GIANT_BENCH_PICTURES_KEY"


def _runs(slide: Path, experiment: Experiment) -> list[list[dict]]:
    script = [crop_reply(*b) for b in BOXES[:CROPS]] + [answer_reply("1")]

    async def one(url: str) -> list[dict]:
        agent = make_giant_agent(experiment.model_copy(update={"base_url": url}), None)
        try:
            item = AgentItem("tcga", "1", "Which organ?", ["Lung", "Liver"], str(slide))
            return (await agent.answer(item, 0)).steps_as_dicts()
        finally:
            await agent.aclose()

    out = []
    for _ in range(RUNS):
        with ScriptedModelServer(list(script)) as srv:
            out.append(asyncio.run(one(srv.openai_base_url)))
    return out


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _page(runs: list[list[dict]], slide: Path) -> dict:
    """The item page of these runs with none of their pictures drawn (trajectory_viewer, render: none)."""
    frame = pd.DataFrame(
        [
            {"config_hash": "h", "benchmark_name": "tcga", "benchmark_id": "1", "run_index": k,
             "answer_text": "1", "predicted_label": 1, "extraction": "", "error_kind": None, "error": None,
             "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "latency_s": 0.0,
             "n_steps": len(steps), "trajectory_json": json.dumps(steps)}
            for k, steps in enumerate(runs)
        ]
    )  # fmt: skip
    voted = pd.DataFrame(
        [{"benchmark_name": "tcga", "benchmark_id": "1", "predicted_label": 1, "correct": True}]
    )
    items = pd.DataFrame(
        [{"benchmark_name": "tcga", "benchmark_id": "1", "prompt": "Which organ?",
          "options": ["Lung", "Liver"], "truth_label": 1, "wsi_path": str(slide)}]
    )  # fmt: skip
    (page,) = item_pages(frame, voted, items, pd.DataFrame(columns=list(PICTURE_COLUMNS)))
    return page


def main() -> None:
    import os

    os.environ.setdefault(KEY_ENV, "sk-bench")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        slide = write_pyramidal_slide(root / "slide.tiff", DESIGN, levels=5)
        experiment = Experiment(name="bench", agent="giant", model="scripted-vlm", api_key_env=KEY_ENV)
        runs = _runs(slide, experiment)
        for label, spec in (("sent (now)", experiment), ("re-read (before)", None)):
            out = root / label.split()[0]
            work = [(steps, out / f"run{k}", ()) for k, steps in enumerate(runs)]
            started = time.perf_counter()
            records = draw_runs(str(slide), work, spec)
            seconds = time.perf_counter() - started
            checked = [r.get("verified") for rs in records for r in rs if r["kind"] != "overview"]
            per_run = f"{1000 * seconds / RUNS:6.0f} ms and {_size(out) / RUNS / 1024:5.0f} KB per run"
            verified = f"digests verified: {sum(bool(c) for c in checked)}/{len(checked)}"
            print(f"{label:>17}: {per_run} ({CROPS} crops; {verified})")
        viewer = root / "viewer"
        write_benchmark(viewer / "bench", "tcga", [_page(runs, slide)], experiment.model_dump(mode="json"))
        page_dir = viewer / "bench" / "tcga" / "1"
        assert (page_dir / RECIPE).is_file()
        server, thread = serve_in_thread(viewer)
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}/bench/tcga/1/index.html"
            for visit in ("first visit", "second visit"):
                started = time.perf_counter()
                with urllib.request.urlopen(url) as response:
                    response.read()
                seconds = time.perf_counter() - started
                print(f"{visit:>17}: {1000 * seconds:6.0f} ms for a page of {RUNS} runs")
        finally:
            server.shutdown()
            server.server_close()
            thread.join(5)
        print(json.dumps({"runs": RUNS, "crops_per_run": CROPS}))


if __name__ == "__main__":
    main()
