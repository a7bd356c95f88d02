"""Batch mode (detach) replays each waiting run from its first step: its crops come back from disk, the
same bytes as sent, instead of being read from the slide again."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from giant_assets.agents.giant import GiantAgent
from giant_assets.agents.providers import OpenAIResponsesModel
from giant_assets.agents.providers.batching import BatchPending, BatchRound, BatchStore, batch_client
from giant_assets.agents.shown_views import ShownViews
from giant_assets.demo.batch_api import BatchAPIServer
from giant_assets.demo.scripted import RecordedRequest, Reply, ScriptedModelServer, answer_reply, crop_reply
from giant_assets.runs.agent_api import AgentItem
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.batching import answer_all
from tests.support.slides import write_pyramidal_slide

STEPS = 4  # three crops, then the answer
ITEMS = 3


def navigate(request: RecordedRequest) -> Reply:
    """Crops of each item's own (its number is in the question), then an answer."""
    k, item = request.assistant_turns, int(request.text.split("(item ")[1][0])
    if k < STEPS - 1:
        return crop_reply(300 * k + 64 * item, 200 * k, 900, 700)
    return answer_reply(str(1 + (k + item) % 3))


@pytest.fixture(scope="module")
def slide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("s") / "s.tiff", ONE_LESION_DESIGN, levels=3)


def _quiet(_: str) -> None:
    pass


def _passes(slide: Path, store: Path, views: Path | None) -> tuple[list, list[ShownViews], dict, list]:
    """Detach-mode passes until every run has answered, each a new process's objects read from disk:
    (answers, each pass's ShownViews, the lines the provider answered, the model's request bodies)."""
    items = [AgentItem("gtex", str(i), f"Which organ? (item {i})", None, str(slide)) for i in range(ITEMS)]
    kept: list[ShownViews] = []
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=2) as api:
        for _ in range(3 * STEPS):
            chat = OpenAIResponsesModel("gpt-5", base_url=api.openai_base_url)
            batch = BatchRound(
                batch_client(chat), BatchStore(store), mode="detach", poll_s=0.01, settle_s=0.05, log=_quiet
            )
            chat.batch = batch
            agent = GiantAgent(chat, max_steps=STEPS, image_size=500)
            if views is not None:
                agent.shown_views = ShownViews(views)
                kept.append(agent.shown_views)
            answers = asyncio.run(answer_all(agent, items, batch))
            if not any(isinstance(a, BatchPending) for a in answers):
                return answers, kept, dict(api.answered), [r.body for r in model.requests]
    raise AssertionError("the runs did not finish")


def test_replays_read_each_crop_back_instead_of_the_slide(slide, tmp_path) -> None:
    plain, _, plain_paid, plain_sent = _passes(slide, tmp_path / "plain", None)
    answers, kept, paid, sent = _passes(slide, tmp_path / "kept", tmp_path / "views")
    # the same requests byte for byte (so the same batch lines), each paid once, the same answers
    assert sorted(sent) == sorted(plain_sent) and paid == plain_paid and set(paid.values()) == {1}
    assert [a.text for a in answers] == [a.text for a in plain] and all(a.error is None for a in answers)
    assert [s.image_sha256 for a in answers for s in a.steps] == [
        s.image_sha256 for a in plain for s in a.steps
    ]
    # pass k (k = 0, 1, ...) makes each run's k-th crop once and reads its k - 1 earlier ones back
    crops = STEPS - 1
    assert sum(v.writes for v in kept) == ITEMS * crops
    assert sum(v.hits for v in kept) == ITEMS * sum(range(crops + 1))
    assert len(list((tmp_path / "views").glob("*.view"))) == ITEMS * crops


def test_an_unreadable_kept_crop_is_made_again_from_the_slide(slide, tmp_path, caplog) -> None:
    views = ShownViews(tmp_path / "views")
    agent = GiantAgent(OpenAIResponsesModel("gpt-5", base_url="http://127.0.0.1:9/v1"), image_size=500)
    agent.shown_views = views

    async def show() -> str:
        from giant_assets.slides.access import open_slide

        with open_slide(slide) as s:
            return (await agent._show(s, [100, 100, 800, 600], "region", str(slide), "exact")).part.sha256

    first = asyncio.run(show())
    (kept,) = (tmp_path / "views").glob("*.view")
    kept.write_text('{"box": [1, 2')  # torn or damaged
    with caplog.at_level(logging.WARNING):
        assert asyncio.run(show()) == first and views.writes == 2 and views.hits == 0
    assert "unreadable" in caplog.text
    assert asyncio.run(show()) == first and views.hits == 1
    # the slide file rewritten (a new modification time): its crops are not the kept ones
    os.utime(slide, ns=(kept.stat().st_mtime_ns, kept.stat().st_mtime_ns + 10**9))
    assert asyncio.run(show()) == first and views.hits == 1 and views.writes == 3


def test_a_folder_that_cannot_be_written_turns_keeping_off_and_the_runs_go_on(
    slide, tmp_path, caplog
) -> None:
    blocked = tmp_path / "file-in-the-way"
    blocked.write_text("not a folder")  # as a full or read-only disk: every write fails
    with caplog.at_level(logging.WARNING):
        answers, kept, paid, _ = _passes(slide, tmp_path / "store", blocked / "views")
    assert all(a.error is None for a in answers) and set(paid.values()) == {1}
    # the first pass makes no crop; every later one tries once, warns once and reads the slide
    assert kept[0].enabled and not any(v.enabled for v in kept[1:]) and sum(v.writes for v in kept) == 0
    assert caplog.text.count("cannot keep crops for replays") == len(kept) - 1 > 0
