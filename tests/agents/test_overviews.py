"""The overview cache (read once per slide file, ahead of need) and the batch runner's read-ahead, over
real generated slides and the loopback model server."""

from __future__ import annotations

import asyncio
import base64
import io
import shutil
from functools import partial
from pathlib import Path

import pytest
from PIL import Image

from giant_assets.agents.giant import GiantAgent
from giant_assets.agents.overviews import (
    PROCESS_OVERVIEWS,
    Encoding,
    OverviewCache,
    SharedOverviews,
    read_overview,
)
from giant_assets.agents.pricing import ModelPrice, PriceTable
from giant_assets.agents.providers import OpenAIResponsesModel
from giant_assets.demo.scripted import ScriptedModelServer, demo_policy
from giant_assets.runs.agent_api import AgentItem
from giant_assets.runs.journal import Journal
from giant_assets.runs.runner import BatchSettings, run_batch
from giant_assets.slides.access import encode_image, open_slide
from giant_assets.slides.synthetic import ONE_LESION_DESIGN, SlideDesign
from giant_assets.slides.views import overview, thumbnail_view
from tests.support.corrupt_slides import corrupt_smallest_level_tiles
from tests.support.slides import write_pyramidal_slide

PRICES = PriceTable({"scripted-vlm": ModelPrice(0.0, 0.0)})
PROMPT = 'Which organ?\n1. Lung\n2. Liver\n3. Skin\nAnswer as JSON {"answer": N}.'


@pytest.fixture(autouse=True)
def fresh_process_overviews() -> None:
    """Each test counts its own reads: none taken from overviews an earlier test of this process made."""
    PROCESS_OVERVIEWS.clear()


@pytest.fixture(scope="module")
def slide_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("overviews")
    first = write_pyramidal_slide(root / "a.svs", ONE_LESION_DESIGN, levels=4, svs=True)
    shutil.copyfile(first, root / "b.svs")  # same pixels, another file: read on its own
    return root


def file_copies(slide: Path, directory: Path, n: int) -> list[Path]:
    """``n`` copies of ``slide``: the same pixels in files of their own (each read on its own)."""
    copies = [directory / f"copy{i}.svs" for i in range(n)]
    for copy in copies:
        shutil.copyfile(slide, copy)
    return copies


class RecordingAgent(GiantAgent):
    """The real GIANT agent, logging when the runner asks it to read ahead and when a run starts."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.events: list[tuple[str, str]] = []

    def prefetch(self, item: AgentItem) -> None:
        self.events.append(("prefetch", item.benchmark_id))
        super().prefetch(item)

    async def answer(self, item: AgentItem, run_index: int):
        self.events.append(("answer", item.benchmark_id))
        return await super().answer(item, run_index)


def rows(slides: list[Path]) -> list[dict]:
    return [
        {"benchmark_name": "tcga", "benchmark_id": f"q{i}", "prompt": PROMPT, "options": ["Lung", "Liver",
         "Skin"], "wsi_path": str(p), "truth_label": 1, "wsi_status": "ok"}
        for i, p in enumerate(slides)
    ]  # fmt: skip


def run(agent: GiantAgent, items: list[dict], tmp_path: Path, runs: int, concurrency: int):
    async def go():
        try:
            return await run_batch(
                agent,
                items,
                config_hash="h",
                journal=Journal(tmp_path / "journal.jsonl"),
                settings=BatchSettings(runs_per_item=runs, concurrency=concurrency),
                log=lambda _: None,
            )
        finally:
            await agent.aclose()

    return asyncio.run(go())


def sent_overviews(srv: ScriptedModelServer) -> list[bytes]:
    """The first image of every first call (the overview), as the JPEG bytes the server received."""
    return [next(t for t in r.turns if t.images).images[0] for r in srv.requests if r.assistant_turns == 0]


def test_runs_and_items_of_one_slide_share_one_read(slide_dir: Path, tmp_path: Path) -> None:
    a, b = slide_dir / "a.svs", slide_dir / "b.svs"
    with ScriptedModelServer(rule=demo_policy) as srv:
        agent = GiantAgent(OpenAIResponsesModel("scripted-vlm", base_url=srv.openai_base_url), prices=PRICES)
        outcome = run(agent, rows([a, a, b]), tmp_path, runs=3, concurrency=4)
    assert outcome.executed == 9 and all(r["error_kind"] is None for r in outcome.rows)
    assert agent.overviews.reads == 2  # two slide files, nine runs
    # what every run sent is exactly the overview made directly from the slide (the oracle)
    slide = open_slide(a)
    try:
        expected = base64.b64decode(encode_image(overview(slide, 1000).image))
    finally:
        slide.close()
    assert sent_overviews(srv) == [expected] * 9
    assert Image.open(io.BytesIO(expected)).size == (1000, 750)


def test_runner_reads_ahead_of_each_run_by_the_concurrency(slide_dir: Path, tmp_path: Path) -> None:
    n, concurrency = 10, 2
    copies = file_copies(slide_dir / "a.svs", tmp_path, n)
    with ScriptedModelServer(rule=demo_policy) as srv:
        agent = RecordingAgent(
            OpenAIResponsesModel("scripted-vlm", base_url=srv.openai_base_url), prices=PRICES
        )
        outcome = run(agent, rows(copies), tmp_path, runs=1, concurrency=concurrency)
    assert outcome.executed == n and agent.overviews.reads == n
    order = agent.events
    assert [bid for kind, bid in order if kind == "prefetch"] == [f"q{i}" for i in range(n)]
    for i in range(n):
        started = order.index(("answer", f"q{i}"))
        ahead = sum(kind == "prefetch" for kind, _ in order[:started])
        # every run's read was started before the run, and no more than ~2x the concurrency ahead of it
        assert i + 1 <= ahead <= min(n, i + 2 * concurrency + 2)
    assert sum(kind == "prefetch" for kind, _ in order[: order.index(("answer", "q0"))]) < n


def test_a_rewritten_slide_is_read_again(tmp_path: Path) -> None:
    path = write_pyramidal_slide(tmp_path / "s.svs", ONE_LESION_DESIGN, levels=4, svs=True)
    cache = OverviewCache(500, Encoding())

    async def go() -> tuple:
        first = await cache.get(str(path))
        again = await cache.get(str(path))
        smaller = SlideDesign(2048, 1536)
        write_pyramidal_slide(path, smaller, levels=3, svs=True)
        third = await cache.get(str(path))
        return first, again, third

    first, again, third = asyncio.run(go())
    assert again is first and cache.reads == 2
    assert (first.width, first.height) == (4096, 3072) and (third.width, third.height) == (2048, 1536)
    assert third == read_overview(str(path), 500, Encoding())


def test_a_failed_read_is_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "broken.svs"
    path.write_bytes(b"II*\x00 not really a slide")
    cache = OverviewCache(500, Encoding())

    async def go() -> None:
        for _ in range(2):
            with pytest.raises(Exception, match="broken.svs"):
                await cache.get(str(path))
        assert not cache._entries

    asyncio.run(go())
    assert cache.reads == 2  # read again on the second call, failed again


def test_a_cancelled_run_does_not_cancel_a_shared_read(slide_dir: Path) -> None:
    cache = OverviewCache(500, Encoding())

    async def go():
        first = asyncio.create_task(cache.get(str(slide_dir / "a.svs")))
        second = asyncio.create_task(cache.get(str(slide_dir / "a.svs")))
        await asyncio.sleep(0)
        first.cancel()
        return await second, first

    shown, first = asyncio.run(go())
    assert first.cancelled() and shown.image_size == (500, 375) and cache.reads == 1


def test_capacity_drops_the_least_recently_used(slide_dir: Path, tmp_path: Path) -> None:
    paths = [str(p) for p in file_copies(slide_dir / "a.svs", tmp_path, 3)]
    cache = OverviewCache(200, Encoding(), capacity=2, shared=None)  # this cache's own capacity

    async def go() -> None:
        await cache.get(paths[0])
        await cache.get(paths[1])
        await cache.get(paths[0])  # now the most recent
        await cache.get(paths[2])  # evicts paths[1]
        await cache.get(paths[0])
        assert cache.reads == 3
        await cache.get(paths[1])
        assert cache.reads == 4

    asyncio.run(go())


def test_one_cache_serves_successive_event_loops(slide_dir: Path, tmp_path: Path) -> None:
    paths = [str(p) for p in file_copies(slide_dir / "a.svs", tmp_path, 4)]
    cache = OverviewCache(300, Encoding(), workers=1)

    async def two(a: str, b: str) -> list:  # one worker: the second read waits on the first
        return await asyncio.gather(cache.get(a), cache.get(b))

    first = asyncio.run(two(paths[0], paths[1]))
    second = asyncio.run(two(paths[2], paths[3]))  # another loop (another asyncio.run), same cache
    assert first == second and cache.reads == 4


def test_an_undecodable_slide_fails_its_own_runs_only(slide_dir: Path, tmp_path: Path) -> None:
    bad, good, other = file_copies(slide_dir / "a.svs", tmp_path, 3)
    assert corrupt_smallest_level_tiles(bad) > 0  # opens fine; the 200 px overview's tiles do not decode
    with ScriptedModelServer(rule=demo_policy) as srv:
        agent = GiantAgent(
            OpenAIResponsesModel("scripted-vlm", base_url=srv.openai_base_url), image_size=200, prices=PRICES
        )
        outcome = run(agent, rows([good, bad, other]), tmp_path, runs=2, concurrency=2)
    by_item = {(r["benchmark_id"], r["run_index"]): r for r in outcome.rows}
    assert len(by_item) == 6 and outcome.executed == 6
    for run_index in (0, 1):
        assert by_item[("q0", run_index)]["error"] is None and by_item[("q2", run_index)]["error"] is None
        failed = by_item[("q1", run_index)]
        assert failed["error"].startswith("slide unavailable") and str(bad) in failed["error"]
    assert len(srv.requests) == 2 * 2 * 2  # two good items x two runs x (crop + answer); none for the bad
    assert not any(key[0] == str(bad) for key in agent.overviews._entries)  # the failure was not kept


def test_caches_alike_share_each_overview_once_per_process(slide_dir: Path, tmp_path: Path) -> None:
    """The cells of a run each build their own agent: an overview made alike (size, encoding, guides,
    label, view and its arguments) from an unchanged file is read once for all of them."""
    path = str(write_pyramidal_slide(tmp_path / "s.svs", ONE_LESION_DESIGN, levels=4, svs=True))
    shared = SharedOverviews()

    def shown(cache: OverviewCache) -> object:
        return asyncio.run(cache.get(path))

    first_cache = OverviewCache(300, Encoding(), shared=shared)
    first = shown(first_cache)
    alike = OverviewCache(300, Encoding(), shared=shared)
    assert shown(alike) is first and (first_cache.reads, alike.reads, alike.taken) == (1, 0, 1)
    unlike = [
        OverviewCache(301, Encoding(), shared=shared),
        OverviewCache(300, Encoding(quality=80), shared=shared),
        OverviewCache(300, Encoding(), guides=False, shared=shared),
        OverviewCache(300, Encoding(), label="another label", shared=shared),
        OverviewCache(300, Encoding(), view=partial(overview, image_read="fast"), shared=shared),
        OverviewCache(300, Encoding(), guides=False, view=thumbnail_view, shared=shared),
    ]
    for cache in unlike:
        made = shown(cache)
        assert (cache.reads, cache.taken) == (1, 0), cache._how
        assert made == read_overview(path, cache.long_side, cache.encoding, cache.guides,
                                     cache.label, cache.view)  # fmt: skip
    fast = OverviewCache(300, Encoding(), view=partial(overview, image_read="fast"), shared=shared)
    assert shown(fast) is shown(unlike[4]) and (fast.reads, fast.taken) == (0, 1)  # an equal partial
    write_pyramidal_slide(Path(path), SlideDesign(2048, 1536), levels=3, svs=True)  # the file rewritten
    after = OverviewCache(300, Encoding(), shared=shared)
    assert (shown(after).width, after.reads) == (2048, 1)


def test_a_view_not_comparable_by_value_is_never_shared(slide_dir: Path) -> None:
    path, shared = str(slide_dir / "a.svs"), SharedOverviews()
    listed = [OverviewCache(200, Encoding(), view=partial(_listed_view, pixels=[10**7]), shared=shared)
              for _ in range(2)]  # fmt: skip
    valued = [OverviewCache(200, Encoding(), view=partial(overview, max_read_pixels=10**7), shared=shared)
              for _ in range(2)]  # fmt: skip
    for cache in listed + valued:
        asyncio.run(cache.get(path))
    assert [(c.reads, c.taken) for c in listed + valued] == [(1, 0), (1, 0), (1, 0), (0, 1)]


def _listed_view(slide, long_side: int, guides: bool, pixels: list[int]):
    return overview(slide, long_side, guides, max_read_pixels=pixels[0])


def test_the_process_keeps_its_newest_overviews(slide_dir: Path, tmp_path: Path) -> None:
    paths = [str(p) for p in file_copies(slide_dir / "a.svs", tmp_path, 3)]
    shared = SharedOverviews(capacity=2)
    for path in paths:
        asyncio.run(OverviewCache(200, Encoding(), shared=shared).get(path))
    newest = OverviewCache(200, Encoding(), shared=shared)
    for path in (paths[2], paths[1]):
        asyncio.run(newest.get(path))
    assert (newest.reads, newest.taken) == (0, 2)
    oldest = OverviewCache(200, Encoding(), shared=shared)
    asyncio.run(oldest.get(paths[0]))
    assert (oldest.reads, oldest.taken) == (1, 0)


def test_agents_of_one_process_send_the_overview_read_once(slide_dir: Path, tmp_path: Path) -> None:
    """Two GIANT agents alike (two cells) read the slide once; the `fast` image read its own."""
    a = slide_dir / "a.svs"
    with ScriptedModelServer(rule=demo_policy) as srv:

        def chat() -> OpenAIResponsesModel:
            return OpenAIResponsesModel("scripted-vlm", base_url=srv.openai_base_url)

        agents = [GiantAgent(chat(), prices=PRICES), GiantAgent(chat(), prices=PRICES),
                  GiantAgent(chat(), prices=PRICES, image_read="fast")]  # fmt: skip
        for i, agent in enumerate(agents):
            assert run(agent, rows([a]), tmp_path / str(i), runs=1, concurrency=1).executed == 1
    assert [(g.overviews.reads, g.overviews.taken) for g in agents] == [(1, 0), (0, 1), (1, 0)]
    sent = sent_overviews(srv)
    assert len(sent) == 3 and sent[0] == sent[1]
