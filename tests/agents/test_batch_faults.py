"""Batch mode under faults, for every provider with a batch API (OpenAI, Azure OpenAI, Anthropic),
against the loopback batch APIs with injected faults: nothing is paid twice (every create line counted
at the server), every batch endpoint call goes through the retry policy, a bad result line is named and
left out, and what cannot finish says why."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import pytest

from giant_assets.agents.giant import GiantAgent
from giant_assets.agents.providers import AnthropicChatModel, OpenAIResponsesModel
from giant_assets.agents.providers.azure import AzureResponsesModel
from giant_assets.agents.providers.batching import (
    ANTHROPIC_LIMITS,
    AZURE_LIMITS,
    OPENAI_LIMITS,
    BatchPending,
    BatchRound,
    BatchStore,
    batch_client,
)
from giant_assets.agents.providers.retry import RetryPolicy
from giant_assets.demo.batch_api import BatchAPIServer
from giant_assets.demo.scripted import RecordedRequest, Reply, ScriptedModelServer, answer_reply, crop_reply
from giant_assets.runs.agent_api import AgentItem
from giant_assets.runs.run_identity import RunIdentity, running
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.slides import write_pyramidal_slide

PROVIDERS = ["openai", "azure", "anthropic"]
OPENAI_WIRE = ("openai", "azure")  # the Files + Batches wire: a batch fails as a whole with a reason
AZURE_KEY = "azure-batch-key-0123456789abcdef0123"
DEPLOYMENT = "giant-gpt5-batch"  # a Global Batch deployment: its name goes in every line's body.model


@pytest.fixture(autouse=True)
def _azure_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", AZURE_KEY)


FAST = RetryPolicy(max_attempts=4, base_delay_s=0.001, max_delay_s=0.005)
PROMPT = "Which organ?\n1. Lung\n2. Liver\n3. Skin"


def one_call(request: RecordedRequest) -> Reply:
    return answer_reply(str(1 + len(request.text) % 3))


def two_calls(request: RecordedRequest) -> Reply:
    return crop_reply(64, 32, 512, 512) if request.assistant_turns == 0 else one_call(request)


@pytest.fixture(scope="module")
def slide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("s") / "s.tiff", ONE_LESION_DESIGN, levels=3)


def _items(slide: Path, n: int) -> list[AgentItem]:
    return [AgentItem("gtex", str(i), f"{PROMPT}\n(item {i})", None, str(slide)) for i in range(n)]


def _round(provider: str, api: BatchAPIServer, store: Path, retry: RetryPolicy = FAST, **kw) -> tuple:
    if provider == "openai":
        chat = OpenAIResponsesModel(
            "gpt-5", base_url=api.openai_base_url, reasoning_effort="low", retry=retry
        )
    elif provider == "azure":
        # the loopback resource demands the key and knows only the batch deployment
        api.azure_key, api.deployments = AZURE_KEY, {DEPLOYMENT}
        chat = AzureResponsesModel(
            "gpt-5", deployment=DEPLOYMENT, base_url=api.base_url, reasoning_effort="low", retry=retry
        )
    else:
        chat = AnthropicChatModel(
            "claude-sonnet-4-5", base_url=api.base_url, thinking_budget=1024, retry=retry
        )
    kw.setdefault("log", lambda _: None)
    kw.setdefault("mode", "hold")
    chat.batch = BatchRound(batch_client(chat), BatchStore(store), poll_s=0.001, settle_s=0.05, **kw)
    return GiantAgent(chat, max_steps=3, image_size=500), chat.batch


async def _answer_runs(agent, items: list[AgentItem], batch: BatchRound, runs: int = 1, close=True) -> list:
    """Every (item, run) at once under ``batch``, each inside its run identity as the runner sets it."""

    async def one(item: AgentItem, run: int):
        with running(RunIdentity("cfg", item.benchmark_name, item.benchmark_id, run, "fp")):
            async with batch.run():
                try:
                    return await agent.answer(item, run)
                except BatchPending as pending:
                    return pending

    try:
        return await asyncio.gather(*(one(item, r) for item in items for r in range(runs)))
    finally:
        if close:
            await agent.aclose()


def _paid_once(api: BatchAPIServer, expected: int) -> None:
    """Every line the client created was created once, and answered (paid) once."""
    assert len(api.created_lines) == expected and set(api.created_lines.values()) == {1}, api.created_lines
    assert set(api.answered.values()) <= {1}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_runs_of_one_item_are_independent_lines_and_a_replay_pays_nothing(slide, tmp_path, provider) -> None:
    items = _items(slide, 2)
    with ScriptedModelServer(rule=one_call) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        agent, batch = _round(provider, api, tmp_path / "s")
        first = asyncio.run(_answer_runs(agent, items, batch, runs=3))
        # 2 items x 3 runs: 6 lines although each item's 3 runs send byte-identical requests
        _paid_once(api, 6)
        bodies = Counter(
            json.dumps(body, sort_keys=True) for b in api.batches.values() for _, body in b.lines
        )
        # Claude's requests are byte-identical across runs (GPT-5's carry a per-run cache key)
        assert sorted(bodies.values()) == ([3, 3] if provider == "anthropic" else [1] * 6)
        # a later materialization of the same runs (same identities): every answer from the store
        agent, again = _round(provider, api, tmp_path / "s")
        second = asyncio.run(_answer_runs(agent, items, again, runs=3))
        assert again.rounds == 0 and len(api.batches) == 1
    assert all(a.error is None for a in first) and [a.text for a in second] == [a.text for a in first]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_failed_polls_downloads_creates_and_listings_are_retried(slide, tmp_path, provider) -> None:
    items = _items(slide, 3)
    with ScriptedModelServer(rule=two_calls) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        api.refuse_creates, api.fail_polls, api.fail_downloads = 2, 3, 3
        agent, batch = _round(provider, api, tmp_path / "s")
        answers = asyncio.run(_answer_runs(agent, items, batch))
        assert all(a.error is None for a in answers), [a.error for a in answers]
        _paid_once(api, 3 * 2)
        assert api.refuse_creates == api.fail_polls == api.fail_downloads == 0  # each fault was met
        # an intent with no batch (a create lost with its process): the listing that looks for it, retried
        BatchStore(tmp_path / "s").record_intent("lost-0", ["gnone"])
        api.fail_listings = 2
        agent, again = _round(provider, api, tmp_path / "s")
        assert [a.text for a in asyncio.run(_answer_runs(agent, items, again))] == [a.text for a in answers]
        assert api.fail_listings == 0 and again.rounds == 0


@pytest.mark.parametrize("provider", PROVIDERS)
def test_polls_failing_past_the_retry_policy_stop_the_runs_and_the_next_wait_polls_again(
    slide, tmp_path, provider
) -> None:
    """detach: the runs stop unjournalled (the batch is paid and open) and the failed watcher is not
    kept: the next wait of the same process polls again. hold: it polls on."""
    items = _items(slide, 2)
    short = RetryPolicy(max_attempts=2, base_delay_s=0.001)
    with ScriptedModelServer(rule=one_call) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        agent, batch = _round(provider, api, tmp_path / "d", retry=short, mode="detach")

        async def twice() -> tuple[list, list]:  # the same process, the same round object
            return await _answer_runs(agent, items, batch, close=False), await _answer_runs(
                agent, items, batch
            )

        api.polls_to_finish = 1
        api.fail_polls = 2
        stopped, answers = asyncio.run(twice())
        assert all(isinstance(a, BatchPending) for a in stopped), stopped
        assert all(not isinstance(a, BatchPending) and a.error is None for a in answers), answers
        _paid_once(api, 2)
        logs: list[str] = []
        agent, held = _round(provider, api, tmp_path / "h", retry=short, log=logs.append)
        api.fail_polls = 5  # more than one retry budget: hold mode polls on
        answers = asyncio.run(_answer_runs(agent, items, held))
        assert all(a.error is None for a in answers) and api.fail_polls == 0
        assert any("polling on (hold mode)" in line for line in logs), logs


@pytest.mark.parametrize("provider", PROVIDERS)
def test_ended_then_in_progress_loses_no_line(slide, tmp_path, provider) -> None:
    items = _items(slide, 3)
    logs: list[str] = []
    with ScriptedModelServer(rule=one_call) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        api.flip_after_end = 1
        agent, batch = _round(provider, api, tmp_path / "s", log=logs.append)
        answers = asyncio.run(_answer_runs(agent, items, batch))
        _paid_once(api, 3)
        assert batch.rounds == 1 and api.flip_after_end == 0
    assert all(a.error is None for a in answers)
    # read from the files the ended look named: no second look, which would show it running again
    assert not any("contradicts itself" in line for line in logs), logs
    assert {r["kind"] for r in BatchStore(tmp_path / "s").answers.values()} == {"succeeded"}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_bad_result_lines_are_named_and_the_good_ones_used(slide, tmp_path, provider) -> None:
    items = _items(slide, 3)
    logs: list[str] = []
    with ScriptedModelServer(rule=one_call) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        api.bad_lines = 1
        agent, batch = _round(provider, api, tmp_path / "s", log=logs.append)
        answers = asyncio.run(_answer_runs(agent, items, batch))
        _paid_once(api, 3)
        (batch_id,) = api.batches
    assert all(a.error is None for a in answers), [a.error for a in answers]
    left_out = [line for line in logs if line.startswith("left out:")]
    # the torn line (2), the blank line (3) is skipped, the line without custom_id (4)
    assert [line.split(" line ")[1][:1] for line in left_out] == ["2", "4"], left_out
    assert all(f"batch {batch_id} file " in line for line in left_out)
    assert "not JSON" in left_out[0] and "no custom_id" in left_out[1]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_succeeded_answer_is_never_replaced_by_a_later_error(slide, tmp_path, provider) -> None:
    items = _items(slide, 2)
    with ScriptedModelServer(rule=one_call) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        api.conflicting = 1  # each succeeded line is followed by an error record of the same line
        agent, batch = _round(provider, api, tmp_path / "s")
        answers = asyncio.run(_answer_runs(agent, items, batch))
        _paid_once(api, 2)
    assert all(a.error is None for a in answers), [a.error for a in answers]
    assert {r["kind"] for r in BatchStore(tmp_path / "s").answers.values()} == {"succeeded"}  # read back too


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_refused_line_fails_its_run_at_once(slide, tmp_path, provider) -> None:
    def rule(request: RecordedRequest) -> Reply:
        return Reply(status=400, text="image too large") if "(item 1)" in request.text else one_call(request)

    with ScriptedModelServer(rule=rule) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        agent, batch = _round(provider, api, tmp_path / "s")
        answers = asyncio.run(_answer_runs(agent, _items(slide, 3), batch))
        _paid_once(api, 3)  # the refused line was not sent again
        assert batch.rounds == 1
    assert answers[1].error and "refused" in answers[1].error and "image too large" in answers[1].error
    assert answers[0].error is None and answers[2].error is None


@pytest.mark.parametrize("provider", PROVIDERS)
def test_where_every_batch_fails_the_runs_fail_naming_the_batches_and_the_setting(
    slide, tmp_path, provider
) -> None:
    logs: list[str] = []
    with ScriptedModelServer(rule=one_call) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        api.next_outcomes = ["failed" if provider in OPENAI_WIRE else "expired"] * 2
        agent, batch = _round(provider, api, tmp_path / "s", max_line_attempts=2, log=logs.append)
        answers = asyncio.run(_answer_runs(agent, _items(slide, 2), batch))
        ids = list(api.batches)
        assert len(ids) == 2 and set(api.created_lines.values()) == {2} and not api.answered
    for answer in answers:
        assert "batch_max_line_attempts is 2" in answer.error and all(i in answer.error for i in ids)
        assert "raise batch_max_line_attempts" in answer.error
    if provider in OPENAI_WIRE:  # the failed batch's reason is in the log
        assert sum("token_limit_exceeded: Enqueued token limit reached" in line for line in logs) == 2, logs


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_later_chunk_failing_to_submit_fails_only_its_runs(slide, tmp_path, provider) -> None:
    with ScriptedModelServer(rule=one_call) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        api.fail_create_at = {2}  # the round's second create: a 500 (a create is not repeated on a 500)
        agent, batch = _round(provider, api, tmp_path / "s", max_requests=2)
        answers = asyncio.run(_answer_runs(agent, _items(slide, 5), batch))
        _paid_once(api, 2)  # chunk 1 submitted, chunk 2 refused, chunk 3 not tried
    errors = [a.error for a in answers]
    assert sum(e is None for e in errors) == 2, errors
    assert sum(bool(e) and "chunk 2/3" in e for e in errors) == 3, errors


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_second_process_on_the_store_resends_nothing_submitted_since_it_started(
    slide, tmp_path, provider
) -> None:
    """Two runs of the cell launched for two batches of one split round: the later one's store object
    was made before the earlier one submitted; it reads the store again under the store lock."""
    items, store = _items(slide, 4), tmp_path / "s"
    with ScriptedModelServer(rule=two_calls) as model, BatchAPIServer(model, polls_to_finish=2) as api:
        agent0, first = _round(provider, api, store, mode="detach", max_requests=2)
        asyncio.run(_answer_runs(agent0, items, first))  # round 1 in two batches, each looked at once
        agent_a, a = _round(provider, api, store, mode="detach", max_requests=2)
        agent_b, b = _round(provider, api, store, mode="detach", max_requests=2)  # loaded before a runs
        asyncio.run(_answer_runs(agent_a, items, a))  # round 1 ended: stored; round 2 submitted
        asyncio.run(_answer_runs(agent_b, items, b))
        assert b.rounds == 0
        _paid_once(api, 4 * 2)


def test_a_held_store_lock_is_waited_for_then_named(slide, tmp_path) -> None:
    holder = BatchStore(tmp_path / "s")
    assert holder.try_lock()
    with ScriptedModelServer(rule=one_call) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        agent, batch = _round("openai", api, tmp_path / "s", lock_wait_s=0.4)
        with pytest.raises(Exception, match="held by another process submitting rounds"):
            asyncio.run(_answer_runs(agent, _items(slide, 1), batch))
        assert not api.batches
    holder.unlock()


@pytest.mark.parametrize(
    ("provider", "limits"),
    [("openai", OPENAI_LIMITS), ("azure", AZURE_LIMITS), ("anthropic", ANTHROPIC_LIMITS)],
)
def test_a_round_of_giant_sized_requests_splits_at_the_byte_cap(tmp_path, provider, limits) -> None:
    """GIANT requests carry several MB of base64 images: a round of them splits below the provider's
    byte cap, measured on the exact JSONL the client uploads (OpenAI) or the request it sends."""
    image = "A" * (3 * 2**20 + 12345)  # a 3 MB base64 image, the size of a GIANT step's views
    with ScriptedModelServer(rule=one_call) as model:
        agent, batch = _round(provider, model, tmp_path / "s")  # type: ignore[arg-type]
        body = {
            "model": "m",
            "input": [{"type": "input_image", "image_url": f"data:image/png;base64,{image}"}],
        }
        lines = [(f"g{i:063d}", body) for i in range(limits[1] // len(image) + 5)]
        chunks = batch._chunks(lines)
        asyncio.run(agent.aclose())
    assert len(chunks) == 2 and sum(len(c) for c in chunks) == len(lines)

    def wire_bytes(chunk: list) -> int:  # what the client sends for the chunk, as the SDK serializes it
        if provider in OPENAI_WIRE:
            url = batch.client.endpoint
            return sum(
                len(json.dumps({"custom_id": c, "method": "POST", "url": url, "body": b})) + 1
                for c, b in chunk
            )
        return len(json.dumps({"requests": [{"custom_id": c, "params": b} for c, b in chunk]}))

    assert all(wire_bytes(chunk) <= limits[1] for chunk in chunks)
    assert wire_bytes(chunks[0] + chunks[1][:1]) > limits[1]  # filled up to the cap, not a fixed count


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_line_answered_429_goes_into_the_next_round(slide, tmp_path, provider) -> None:
    """A rate-limited line (429: retryable, not a refusal) is sent again, not failed."""
    seen: list[str] = []

    def rule(request: RecordedRequest) -> Reply:
        if "(item 1)" in request.text and not seen:
            seen.append("429")
            return Reply(status=429, text="rate limited")
        return one_call(request)

    with ScriptedModelServer(rule=rule) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        agent, batch = _round(provider, api, tmp_path / "s")
        answers = asyncio.run(_answer_runs(agent, _items(slide, 2), batch))
        assert batch.rounds == 2 and sorted(api.created_lines.values()) == [1, 2]
    assert all(a.error is None for a in answers), [a.error for a in answers]


def test_two_looks_at_once_at_a_batch_that_ends_answer_each_line_once() -> None:
    """The loopback provider bills a line once however many clients look at its batch as it ends (the
    batch sensor and the cell's run look at the same batch): a look while its lines are being answered
    shows it still running."""
    import threading
    import time
    import urllib.request

    def slow(request: RecordedRequest) -> Reply:
        time.sleep(0.3)
        return one_call(request)

    body = {
        "model": "gpt-5",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": PROMPT}]}],
    }
    with ScriptedModelServer(rule=slow) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        batch = api._create("openai", "/v1/responses", [("g1", body), ("g2", body)])
        seen: list[str] = []

        def look() -> None:
            with urllib.request.urlopen(f"{api.base_url}/v1/batches/{batch.id}") as reply:
                seen.append(json.loads(reply.read())["status"])

        looks = [threading.Thread(target=look) for _ in range(2)]
        for thread in looks:
            thread.start()
        for thread in looks:
            thread.join(10)
        look()
    assert api.answered == Counter({"g1": 1, "g2": 1})
    assert sorted(seen[:2]) == ["completed", "finalizing"] and seen[2] == "completed"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_batch_shown_running_on_every_other_look_after_it_ended_is_not_waited_on_forever(
    slide, tmp_path, provider
) -> None:
    """Once ended, the batch shows in_progress without result files on every other look. Each process
    (detach) looks once: the look that shows it ended is kept in the store with the files it names,
    and the answers are read from those files, with no second look that would show it running (with
    one, every process saw it ended, then running, and stopped: waited on forever, no word).
    Mutations: the files read after a look of their own (a second retrieval); the ended look not kept."""
    items = _items(slide, 2)
    with ScriptedModelServer(rule=one_call) as model, BatchAPIServer(model, polls_to_finish=2) as api:
        api.flip_every_other = 1
        passes = 0
        while True:  # each pass a new process on the same store, as the batch sensor launches them
            passes += 1
            agent, batch = _round(provider, api, tmp_path / "s", mode="detach")
            answers = asyncio.run(_answer_runs(agent, items, batch))
            if not any(isinstance(a, BatchPending) for a in answers):
                break
            assert passes < 5, "waited on forever"
        assert passes == 2 and api.flip_every_other == 0
        _paid_once(api, 2)
        (batch_id,) = api.batches
    assert all(a.error is None for a in answers), [a.error for a in answers]
    record = BatchStore(tmp_path / "s").batches[batch_id]
    assert record["status"] == "ended" and record["seen_ended"]["handle"]  # where its results were
