"""Gemini in batch mode: GIANT runs through the google-genai SDK's batches API at the loopback batch
server speaking Gemini's routes (``demo/batch_gemini.py``), with its faults: errored lines, failed and
expired batches, a create whose reply is lost, responses without their metadata, safety blocks."""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import io
import json
import os
import sys
from collections import Counter
from pathlib import Path

import pytest
from PIL import Image

from giant_assets.agents.giant import GiantAgent
from giant_assets.agents.providers.batching import BatchPending, BatchRound, BatchStore, batch_client
from giant_assets.agents.providers.gemini import GeminiChatModel
from giant_assets.agents.providers.messages import ImagePart, Message, TextPart
from giant_assets.agents.providers.retry import RetryPolicy
from giant_assets.demo.batch_api import BatchAPIServer
from giant_assets.demo.scripted import RecordedRequest, Reply, ScriptedModelServer, answer_reply, crop_reply
from giant_assets.platform.experiments_cli import main as experiments_main
from giant_assets.runs.agent_api import AgentItem
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.batching import answer_all
from tests.support.slides import write_pyramidal_slide

MODEL = "gemini-2.5-pro"
CREATE = ("POST", f"/v1beta/models/{MODEL}:batchGenerateContent")
LIST = ("GET", "/v1beta/batches")
FAST = RetryPolicy(max_attempts=4, base_delay_s=0.001, max_delay_s=0.005)
PROMPT = "Which organ?\n1. Lung\n2. Liver\n3. Skin"


def navigate(request: RecordedRequest) -> Reply:
    """A crop, then an answer that depends on the item's question (a line answered for another run's
    request shows up as another answer)."""
    if request.assistant_turns == 0:
        return crop_reply(64, 32, 512, 512)
    return answer_reply(str(1 + request.question.count("x") % 3))


@pytest.fixture(scope="module")
def slide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("s") / "s.tiff", ONE_LESION_DESIGN, levels=3)


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "AIza-test-key")


def _items(slide: Path, n: int) -> list[AgentItem]:
    return [AgentItem("gtex", str(i), f"{PROMPT}\n(item {'x' * i})", None, str(slide)) for i in range(n)]


def _model(server: BatchAPIServer | ScriptedModelServer, **kw) -> GeminiChatModel:
    return GeminiChatModel(MODEL, base_url=server.base_url, thinking_budget=1024, **kw)


def _batched(api: BatchAPIServer, store: Path, timeout_s: float = 600.0, **kw) -> tuple:
    chat = _model(api, retry=FAST, timeout_s=timeout_s)
    kw.setdefault("log", lambda _: None)
    chat.batch = BatchRound(batch_client(chat), BatchStore(store), poll_s=0.001, settle_s=0.05, **kw)
    return GiantAgent(chat, max_steps=3, image_size=500), chat.batch


def _direct(items: list[AgentItem], rule=navigate) -> tuple[list, list[RecordedRequest]]:
    with ScriptedModelServer(rule=rule) as direct:
        answers = asyncio.run(
            answer_all(GiantAgent(_model(direct), max_steps=3, image_size=500), items, None)
        )
        return answers, list(direct.requests)


def _line_requests(api: BatchAPIServer) -> list[RecordedRequest]:
    return [RecordedRequest(b.endpoint, {}, json.dumps(body).encode(), 0.0)
            for b in api.batches.values() for _, body in b.lines]  # fmt: skip


def test_rounds_send_the_synchronous_requests_and_answer_as_direct_calls(slide, tmp_path) -> None:
    items = _items(slide, 3)
    sync, direct = _direct(items)
    logs: list[str] = []
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=2) as api:
        agent, batch = _batched(api, tmp_path / "s", log=logs.append)
        answers = asyncio.run(answer_all(agent, items, batch))
        assert batch.rounds == 2 and len(api.batches) == 2 and api.calls.count(CREATE) == 2
        assert set(api.answered.values()) == {1} and len(api.answered) == 6  # each line paid once
        assert LIST not in api.calls  # no intent left open: nothing looked up
        assert ("POST", "/upload/v1beta/files") not in api.calls  # small rounds go inline
        lines = _line_requests(api)
        names = [b.metadata["displayName"] for b in api.batches.values()]
    # each line is the request the synchronous model sends, as JSON (the first step's in full; the
    # second's but for the conversation, whose reply ids differ)
    for first in (True, False):

        def bodies(requests: list[RecordedRequest], first: bool = first) -> list[str]:
            return sorted(json.dumps({k: v for k, v in r.json.items() if first or k != "contents"})
                          for r in requests if (r.assistant_turns == 0) == first)  # fmt: skip

        assert bodies(lines) == bodies(direct) != []
    assert [a.text for a in answers] == [a.text for a in sync] and len(set(a.text for a in sync)) == 3
    assert all(a.error is None for a in answers)
    assert [a.input_tokens for a in answers] == [a.input_tokens for a in sync]
    # the round tag of each batch's intent travels in its display name
    tags = sorted(BatchStore(tmp_path / "s").intents)
    assert sorted(names) == [f"giant-round-{t}" for t in tags]
    assert sum("BATCH_STATE_SUCCEEDED: 3 answered" in line for line in logs) == 2, logs


def test_errored_lines_are_resent_up_to_max_line_attempts_and_refused_ones_are_not(slide, tmp_path) -> None:
    """A 429 line (RESOURCE_EXHAUSTED) goes into the next round and succeeds; a line answered 500
    (INTERNAL) each time fails its run after batch_max_line_attempts; a 400 (INVALID_ARGUMENT) at once."""
    limited: list[str] = []

    def rule(request: RecordedRequest) -> Reply:
        marks = request.question.count("x")
        if marks == 1 and not limited:
            limited.append("429")
            return Reply(status=429, text="quota")
        if marks == 2:
            return Reply(status=500, text="backend broke")
        if marks == 3:
            return Reply(status=400, text="image too large")
        return navigate(request)

    with ScriptedModelServer(rule=rule) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        agent, batch = _batched(api, tmp_path / "s", max_line_attempts=2)
        answers = asyncio.run(answer_all(agent, _items(slide, 4), batch))
        created = Counter(api.created_lines.values())
    ok, resent, broken, refused = answers
    assert ok.error is None and resent.error is None
    assert "batch_max_line_attempts is 2" in broken.error and "backend broke" in broken.error
    assert "refused" in refused.error and "image too large" in refused.error
    # first requests: item 0 once; item 1 twice (429 then ok); item 2 twice (its attempts); item 3 once;
    # then the crops' follow-ups of items 0 and 1 once each
    assert sorted(created.elements()) == [1, 1, 1, 1, 2, 2]


def test_failed_and_expired_batches_are_submitted_again_then_named(slide, tmp_path) -> None:
    logs: list[str] = []
    items = _items(slide, 2)
    sync, _ = _direct(items)
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        api.next_outcomes = ["failed", "expired"]
        agent, batch = _batched(api, tmp_path / "s", log=logs.append)
        answers = asyncio.run(answer_all(agent, items, batch))
        assert len(api.batches) == 4 and sorted(api.created_lines.values()) == [1, 1, 3, 3]
        assert set(api.answered.values()) == {1}
    assert [a.text for a in answers] == [a.text for a in sync] and all(a.error is None for a in answers)
    failed = "BATCH_STATE_FAILED (8: Enqueued token limit reached for gpt-5.): 0 answered, 2 errored"
    assert any(failed in line for line in logs), logs  # the failed batch's error, in the log
    assert any("BATCH_STATE_EXPIRED: 0 answered, 2 errored/expired" in line for line in logs), logs
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        api.next_outcomes = ["failed", "expired"]
        agent, batch = _batched(api, tmp_path / "t", max_line_attempts=2)
        answers = asyncio.run(answer_all(agent, items, batch))
        ids = list(api.batches)
    for answer in answers:
        assert "batch_max_line_attempts is 2" in answer.error and all(i in answer.error for i in ids)


def test_a_create_whose_reply_times_out_is_adopted_by_its_tag_not_paid_twice(slide, tmp_path) -> None:
    items, store = _items(slide, 2), tmp_path / "s"
    sync, _ = _direct(items)
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        api.create_reply_delay_s = [4.0]  # the batch exists; its reply comes after the client gave up
        agent, batch = _batched(api, store, timeout_s=1.0)
        failed = asyncio.run(answer_all(agent, items, batch))
        assert all("not sent again, the batch may exist" in a.error for a in failed), [
            a.error for a in failed
        ]
        (orphan,) = api.batches
        assert BatchStore(store).batches == {} and len(BatchStore(store).unresolved_intents()) == 1
        # another cell's batch since then, of as many requests: only the tag tells them apart
        other_chat = _model(api)
        body = other_chat._body([Message("user", (TextPart("x"),))], (), None)
        other = asyncio.run(batch_client(other_chat).submit([("o1", body), ("o2", body)], "other-0"))
        asyncio.run(other_chat.aclose())
        logs: list[str] = []
        api.page_cap = 1  # the orphan is on the listing's second page
        agent, again = _batched(api, store, log=logs.append)
        answers = asyncio.run(answer_all(agent, items, again))
        mine = Counter(cid for b in api.batches.values() if b.id != other for cid, _ in b.lines)
        assert set(mine.values()) == {1} and len(mine) == 4  # 2 runs x 2 steps, each in one batch
        assert api.calls.count(LIST) == 2 and again.rounds == 1  # two pages; a round of the follow-ups
    assert again.adopted == [orphan] and sum(f"adopted batch {orphan}" in line for line in logs) == 1
    assert [a.text for a in answers] == [a.text for a in sync] and all(a.error is None for a in answers)
    assert BatchStore(store).unresolved_intents() == []


def test_responses_without_their_metadata_are_matched_by_position(slide, tmp_path) -> None:
    items = _items(slide, 3)
    sync, _ = _direct(items)
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        api.drop_metadata = 2  # both rounds' batches
        agent, batch = _batched(api, tmp_path / "s")
        answers = asyncio.run(answer_all(agent, items, batch))
        assert api.drop_metadata == 0 and set(api.created_lines.values()) == {1}
    assert [a.text for a in answers] == [a.text for a in sync] and len(set(a.text for a in sync)) == 3


def test_a_safety_blocked_line_is_content_filtered_not_an_answer(slide, tmp_path) -> None:
    blocked = {"promptFeedback": {"blockReason": "SAFETY"},
               "usageMetadata": {"promptTokenCount": 900, "totalTokenCount": 900}}  # fmt: skip

    def rule(request: RecordedRequest) -> Reply:
        if request.question.count("x") == 1:
            return Reply(body=json.dumps(blocked).encode())
        return navigate(request)

    with ScriptedModelServer(rule=rule) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        agent, batch = _batched(api, tmp_path / "s")
        answers = asyncio.run(answer_all(agent, _items(slide, 2), batch))
        assert set(api.created_lines.values()) == {1}  # the blocked line is not sent again
    assert answers[0].error is None
    assert answers[1].error_kind == "content_filtered" and "blocked the prompt (SAFETY)" in answers[1].error
    assert answers[1].text in ("", None)


def test_a_round_above_20_mb_goes_as_an_input_file_and_is_answered_from_the_responses_file(tmp_path) -> None:
    """The server refuses inline requests past 20 MB, as the API documents: a round of GIANT-sized
    requests (3 MB images) is uploaded as a JSONL file (the resumable upload protocol) whose lines are
    the requests the synchronous model sends, and its answers are read from the responses file, line by
    line (a bad line named and left out)."""
    png = io.BytesIO()
    Image.frombytes("RGB", (1024, 1024), os.urandom(3 * 2**20)).save(png, "PNG")  # noise: ~3 MB
    image = base64.b64encode(png.getvalue()).decode()

    def turn(i: int) -> list[Message]:
        return [Message("user", (TextPart(f"q{i}"), ImagePart(image, "image/png")))]

    limited: list[str] = []

    def rule(request: RecordedRequest) -> Reply:
        if request.question == "q5" and not limited and len(direct_bodies) == 6:  # once, in batch mode
            limited.append("429")
            return Reply(status=429, text="quota")
        return Reply(text=f"seen {request.question}")

    async def complete(chat: GeminiChatModel, batch: BatchRound | None, i: int) -> str:
        if batch is None:
            return (await chat.complete(turn(i))).text
        async with batch.run():
            return (await chat.complete(turn(i))).text

    async def all_of(chat: GeminiChatModel, batch: BatchRound | None) -> list[str]:
        try:
            return await asyncio.gather(*(complete(chat, batch, i) for i in range(6)))
        finally:
            await chat.aclose()

    direct_bodies: list[str] = []
    with ScriptedModelServer(rule=rule) as direct:
        sync = asyncio.run(all_of(_model(direct), None))
        direct_bodies += sorted(json.dumps(r.json) for r in direct.requests)
    logs: list[str] = []
    with ScriptedModelServer(rule=rule) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        api.bad_lines = 1  # the responses file gets a torn line, a blank line and one without a key
        chat = _model(api, retry=FAST)
        store = BatchStore(tmp_path / "s")
        chat.batch = BatchRound(batch_client(chat), store, poll_s=0.001, settle_s=0.05, log=logs.append)
        texts = asyncio.run(all_of(chat, chat.batch))
        # the file line answered 429 (RESOURCE_EXHAUSTED) went into the next round: alone, inline
        batch, again = api.batches.values()
        assert batch.input_file_id.startswith("files/") and len(api.files[batch.input_file_id]) > 20 * 2**20
        assert not again.input_file_id and len(again.lines) == 1 and limited
        assert api.calls.count(("POST", "/upload/v1beta/files")) >= 2  # the session's start, then chunks
        assert ("GET", f"/v1beta/{batch.output_file_id}:download") in api.calls
        lines = sorted(json.dumps(r.json) for r in _line_requests(api)[:6])
    assert texts == sync == [f"seen q{i}" for i in range(6)]
    left_out = [line for line in logs if line.startswith("left out:")]  # named, the good lines used
    assert [line.split(" line ")[1][:1] for line in left_out] == ["2", "4"], left_out
    assert "not JSON" in left_out[0] and "no key" in left_out[1]
    assert lines == direct_bodies  # each file line's request is the synchronous request, as JSON


def test_the_check_accepts_a_gemini_batch_experiment(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "test-key")  # the check also refuses an unset key
    path = tmp_path / "experiments.yaml"
    path.write_text(
        "experiments:\n  g: {agent: giant, provider: gemini, model: gemini-2.5-pro, thinking_budget: 1024,"
        " batch: true, budget_usd: 5}\n"
    )
    assert experiments_main(["check", "--file", str(path)]) == 0, capsys.readouterr().err


def test_detach_stops_the_runs_and_a_later_process_resumes_paying_nothing_twice(slide, tmp_path) -> None:
    items = _items(slide, 2)
    sync, _ = _direct(items)
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=2) as api:
        passes = 0
        while True:  # each pass a new process on the same store, as the batch sensor launches them
            passes += 1
            agent, batch = _batched(api, tmp_path / "s", mode="detach")
            answers = asyncio.run(answer_all(agent, items, batch))
            if not any(isinstance(a, BatchPending) for a in answers):
                break
            assert all(isinstance(a, BatchPending) for a in answers) and passes < 6
        assert passes == 3 and len(api.batches) == 2 and set(api.answered.values()) == {1}
    assert [a.text for a in answers] == [a.text for a in sync]


def test_a_cancelled_batch_ends_cancelled_and_answers_nothing(tmp_path) -> None:
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=5) as api:
        chat = _model(api, retry=FAST)
        client = batch_client(chat)
        body = chat._body([Message("user", (TextPart("x"),))], (), None)

        async def cancel_then_look() -> tuple:
            batch_id = await client.submit([("a", body), ("b", body)], "t-0")
            running = await client.status(batch_id)
            await client.cancel(batch_id)
            ended = await client.status(batch_id)
            return batch_id, running, ended, await client.results(batch_id, ["a", "b"])

        try:
            batch_id, running, ended, results = asyncio.run(cancel_then_look())
        finally:
            asyncio.run(chat.aclose())
        assert ("POST", f"/v1beta/{batch_id}:cancel") in api.calls and not api.answered
    assert not running.ended and running.status == "BATCH_STATE_RUNNING" and running.counts["pending"] == 2
    assert ended.ended and ended.status == "BATCH_STATE_CANCELLED" and ended.counts["requests"] == 2
    assert results is not None and results.rows == []  # its lines count as expired in the round


def test_keyless_responses_one_short_are_not_matched_by_position_and_go_to_the_next_round(
    slide, tmp_path
) -> None:
    """Three requests answered by two responses without their keys (the first one missing): matched
    by position, the two runs that remain would each take a neighbour's answer. None is matched: each
    is named, and the three requests go into the next round, whose answers are right."""
    items = _items(slide, 3)
    sync, _ = _direct(items)
    logs: list[str] = []
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        api.drop_metadata, api.short_responses = 1, 1  # the first round's batch only
        agent, batch = _batched(api, tmp_path / "s", log=logs.append)
        answers = asyncio.run(answer_all(agent, items, batch))
        first = next(iter(api.batches.values()))
        assert first.short and first.no_metadata
        # the first requests twice (the short batch, then the next round), the follow-ups once
        assert sorted(api.created_lines.values()) == [1, 1, 1, 2, 2, 2]
    assert [a.text for a in answers] == [a.text for a in sync] and len(set(a.text for a in sync)) == 3
    assert all(a.error is None for a in answers), [a.error for a in answers]
    unmatched = [line for line in logs if "not matched" in line]
    assert len(unmatched) == 2 and all("2 responses to 3 requests" in line for line in unmatched), logs


def test_reordered_responses_are_matched_by_key(slide, tmp_path) -> None:
    items = _items(slide, 3)
    sync, _ = _direct(items)
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        api.reorder_responses = 2  # both rounds' batches answer in reverse order, keyed
        agent, batch = _batched(api, tmp_path / "s")
        answers = asyncio.run(answer_all(agent, items, batch))
        assert api.reorder_responses == 0 and set(api.created_lines.values()) == {1}
    assert [a.text for a in answers] == [a.text for a in sync] and len(set(a.text for a in sync)) == 3


def test_reordered_responses_with_some_keys_missing_match_only_the_keyed_ones(tmp_path) -> None:
    """Four responses in reverse order, the 1st and 3rd request's without a key: the keyed ones show
    the order is not the requests', so the keyless ones are not matched by position (which would give
    request 2 the answer of request 3)."""

    def echo(request: RecordedRequest) -> Reply:
        return Reply(text=f"seen {request.question}")

    with ScriptedModelServer(rule=echo) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        chat = _model(api, retry=FAST)
        client = batch_client(chat)
        lines = [(f"c{i}", chat._body([Message("user", (TextPart(f"q{i}"),))], (), None)) for i in range(4)]

        async def submit_and_read() -> tuple:
            batch_id = await client.submit(lines, "t-0")
            api.batches[batch_id].no_metadata, api.batches[batch_id].reordered = "odd", True
            status = await client.status(batch_id)
            return batch_id, status, await client.results(batch_id, [c for c, _ in lines])

        try:
            batch_id, status, results = asyncio.run(submit_and_read())
        finally:
            asyncio.run(chat.aclose())
    assert status.ended and results is not None
    texts = {r["custom_id"]: r["body"]["candidates"][0]["content"]["parts"][0]["text"] for r in results.rows}
    assert texts == {"c1": "seen q1", "c3": "seen q3"}
    assert len(results.problems) == 2 and all(batch_id in p and "not matched" in p for p in results.problems)
    # the responses' positions 2 and 4 (requests 3 and 1, reversed) are named
    assert [p.split(" response ")[1][:1] for p in results.problems] == ["2", "4"]


def test_a_line_cancelled_by_the_service_goes_into_the_next_round(slide, tmp_path) -> None:
    """A line error of gRPC code 1 (CANCELLED: the service gave up on it, as for a cancelled batch) is
    not a refusal: its request goes into the next round and is answered. Mutation: code 1 read as its
    HTTP status 499 (a 4xx: refused for good, the run fails)."""
    cancelled: list[str] = []

    def rule(request: RecordedRequest) -> Reply:
        if request.question.count("x") == 1 and not cancelled:
            cancelled.append("499")
            return Reply(status=499, text="the request was cancelled")  # the line's error: code 1
        return navigate(request)

    items = _items(slide, 2)
    sync, _ = _direct(items)
    with ScriptedModelServer(rule=rule) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        agent, batch = _batched(api, tmp_path / "s")
        answers = asyncio.run(answer_all(agent, items, batch))
        # item 1's first request twice (cancelled, then answered), every other line once
        assert cancelled and sorted(api.created_lines.values()) == [1, 1, 1, 2]
    assert all(a.error is None for a in answers), [a.error for a in answers]
    assert [a.text for a in answers] == [a.text for a in sync]


def test_a_batch_remembered_ended_and_shown_running_again_is_named_and_looked_at_again(
    slide, tmp_path
) -> None:
    """Inline answers are shown only while a look shows the batch ended. A batch another look saw end
    (the batch sensor's, kept in the store) and shown running again by the next look contradicts
    itself: the round names it (log and store) and looks again, and reads the answers of the look
    that shows it ended. Mutations: the remembered look ignored; a contradiction not looked at again
    (the runs stop); not named."""
    items, store = _items(slide, 2), tmp_path / "s"
    logs: list[str] = []
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=2) as api:
        api.flip_every_other = 1
        agent, batch = _batched(api, store, mode="detach")
        assert all(isinstance(a, BatchPending) for a in asyncio.run(answer_all(agent, items, batch)))
        (batch_id,) = api.batches

        async def sensor_look() -> None:  # ends it (its second look); kept as the sensor keeps it
            chat = _model(api, retry=FAST)
            try:
                BatchStore(store).remember_end(batch_id, (await batch_client(chat).status(batch_id)).seen())
            finally:
                await chat.aclose()

        asyncio.run(sensor_look())
        agent, batch = _batched(api, store, mode="detach", log=logs.append)
        answers = asyncio.run(answer_all(agent, items, batch))
        assert all(isinstance(a, BatchPending) for a in answers)  # round 2 submitted: its runs wait on it
        assert set(api.created_lines.values()) == {1} and len(api.created_lines) == 4
    named = [line for line in logs if f"batch {batch_id} contradicts itself" in line]
    assert len(named) == 1 and "seen BATCH_STATE_SUCCEEDED before, now shown running again" in named[0], logs
    record = BatchStore(store).batches[batch_id]
    assert record["status"] == "ended" and record["contradicted"]["status"].startswith("running")


def test_only_a_gemini_model_loads_the_gemini_batch_client(monkeypatch) -> None:
    """The batching package loads google-genai (seconds of imports) for a Gemini model only: a fresh
    copy of it, with the Gemini batch client made unimportable, still batches an OpenAI model."""
    from giant_assets.agents.providers import OpenAIResponsesModel, batching
    from giant_assets.agents.providers.batching import OpenAIBatches

    monkeypatch.setitem(sys.modules, "giant_assets.agents.providers.batching.gemini_batches", None)
    spec = importlib.util.spec_from_file_location("batching_without_gemini", batching.__file__)
    fresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fresh)  # raises if the package imports the Gemini client up front
    model = OpenAIResponsesModel("gpt-5", base_url="http://127.0.0.1:9/v1", reasoning_effort="low")
    assert type(fresh.batch_client(model)) is OpenAIBatches
    with pytest.raises(ImportError):
        fresh.GeminiBatches  # noqa: B018 (the lazy attribute is the import under test)
    gemini = GeminiChatModel(MODEL, base_url="http://127.0.0.1:9", thinking_budget=1024)
    with pytest.raises(ImportError):
        fresh.batch_client(gemini)
