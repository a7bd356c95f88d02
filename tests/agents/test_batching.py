"""Batch mode through the official SDKs against a loopback server speaking both batch APIs."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from giant_assets.agents.giant import GiantAgent
from giant_assets.agents.providers import AnthropicChatModel, OpenAIChatModel, OpenAIResponsesModel
from giant_assets.agents.providers.azure import AzureChatModel, AzureResponsesModel
from giant_assets.agents.providers.batching import BatchPending, BatchRound, BatchStore, batch_client
from giant_assets.demo.batch_api import BatchAPIServer
from giant_assets.demo.scripted import (
    RecordedRequest,
    Reply,
    ScriptedModelServer,
    answer_reply,
    crop_reply,
)
from giant_assets.runs.agent_api import AgentItem
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.batching import answer_all
from tests.support.slides import write_pyramidal_slide

STEPS = 3  # two crops, then the answer
# a round closes this long after every live run waits (the timer starts only then, so a short one
# splits nothing: GIANT runs send one request at a time)
SETTLE_S = 0.05
PROMPT = "Which organ?\n1. Lung\n2. Liver\n3. Skin"


def navigate(request: RecordedRequest) -> Reply:
    k = request.assistant_turns
    return (
        crop_reply(64 * k, 32 * k, 512, 512)
        if k < STEPS - 1
        else answer_reply(str(1 + len(request.text) % 3))
    )


@pytest.fixture(scope="module")
def slide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("s") / "s.tiff", ONE_LESION_DESIGN, levels=3)


def _model(provider: str, server: BatchAPIServer | ScriptedModelServer):
    if provider == "openai":
        return OpenAIResponsesModel("gpt-5", base_url=server.openai_base_url, reasoning_effort="low")
    if provider == "chat":
        return OpenAIChatModel("gpt-5", base_url=server.openai_base_url, reasoning_effort="low")
    if provider.startswith("azure"):  # the resource's endpoint; a Global Batch deployment
        azure = AzureChatModel if provider == "azure-chat" else AzureResponsesModel
        return azure("gpt-5", deployment="gpt5-batch", base_url=server.base_url, reasoning_effort="low")
    return AnthropicChatModel("claude-sonnet-4-5", base_url=server.base_url, thinking_budget=1024)


def _items(slide: Path, n: int) -> list[AgentItem]:
    return [AgentItem("gtex", str(i), f"{PROMPT}\n(item {i})", None, str(slide)) for i in range(n)]


def _batched(provider: str, api: BatchAPIServer, store: Path, mode: str = "hold", **kw) -> tuple:
    chat = _model(provider, api)
    kw.setdefault("log", lambda _: None)
    kw.setdefault("settle_s", SETTLE_S)
    chat.batch = BatchRound(batch_client(chat), BatchStore(store), mode=mode, poll_s=0.01, **kw)
    return GiantAgent(chat, max_steps=STEPS, image_size=500), chat.batch


@pytest.mark.parametrize("provider", ["openai", "chat", "azure", "azure-chat", "anthropic"])
def test_hold_mode_one_round_per_step_same_answers_as_direct_calls(slide, tmp_path, provider) -> None:
    items = _items(slide, 4)
    with ScriptedModelServer(rule=navigate) as direct:
        sync = asyncio.run(
            answer_all(GiantAgent(_model(provider, direct), max_steps=STEPS, image_size=500), items, None)
        )
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=3) as api:
        agent, batch = _batched(provider, api, tmp_path / "store")
        answers = asyncio.run(answer_all(agent, items, batch))
        # every run waiting for the model is in the same round: 3 rounds of 4 requests, each answered once
        assert batch.rounds == STEPS and batch.submitted_requests == 4 * STEPS
        assert len(api.batches) == STEPS and all(len(b.lines) == 4 for b in api.batches.values())
        assert set(api.answered.values()) == {1} and len(api.answered) == 4 * STEPS
        assert (
            sorted(b.status for b in api.batches.values())
            == ["ended" if provider == "anthropic" else "completed"] * 3
        )

        # each batch line's body is the synchronous request, as JSON with its key order (an added or
        # changed field, e.g. a temperature, fails here): same requests, same answers
        # (the first step's in full; later steps' but for the conversation, whose reply ids differ)
        def bodies(requests: list[RecordedRequest], first: bool) -> list[str]:
            return sorted(
                json.dumps(
                    r.json if first else {k: v for k, v in r.json.items() if k not in ("input", "messages")}
                )
                for r in requests
                if (r.assistant_turns == 0) == first
            )

        lines = [RecordedRequest(model.requests[0].path, {}, json.dumps(body).encode(), 0.0)
                 for b in api.batches.values() for _, body in b.lines]  # fmt: skip
        for first in (True, False):
            assert bodies(lines, first) == bodies(direct.requests, first) != []
        # no intent left open: nothing is looked up at the provider
        assert not set(LIST.values()) & set(api.calls)
    assert [a.text for a in answers] == [a.text for a in sync]
    assert all(a.error is None for a in answers)
    assert [len(a.steps) for a in answers] == [len(a.steps) for a in sync]


def test_detach_stops_each_round_and_a_new_process_resumes_without_paying_twice(slide, tmp_path) -> None:
    items = _items(slide, 3)
    store = tmp_path / "store"
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=2) as api:
        results, rounds = [], 0
        for _ in range(10):  # each pass is a new materialization: a new store object read from disk
            agent, batch = _batched("openai", api, store, mode="detach")
            results = asyncio.run(answer_all(agent, items, batch))
            rounds += 1
            if not any(isinstance(r, BatchPending) for r in results):
                break
        assert all(not isinstance(r, BatchPending) and r.error is None for r in results)
        assert set(api.answered.values()) == {1}, "a request was paid for twice"
        assert len(api.answered) == 3 * STEPS and len(api.batches) == STEPS
    # a pass submits a round and looks once (not ended yet: polls_to_finish=2); the next pass finds it
    # ended, goes on and submits the next round: STEPS rounds take STEPS + 1 passes
    assert rounds == STEPS + 1


@pytest.mark.parametrize("provider", ["openai", "azure"])
def test_expired_lines_are_resent_next_round_then_fail_their_run(slide, tmp_path, provider) -> None:
    items = _items(slide, 4)
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        api.next_outcomes = ["expire_half"]  # the first batch: half its lines expire
        agent, batch = _batched(provider, api, tmp_path / "a")
        answers = asyncio.run(answer_all(agent, items, batch))
        assert all(a.error is None for a in answers)
        assert batch.rounds == STEPS + 1  # the expired half went into an extra round
        assert set(api.answered.values()) == {1}
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        api.next_outcomes = ["expired"] * 5
        agent, batch = _batched("anthropic", api, tmp_path / "b", max_line_attempts=2)
        answers = asyncio.run(answer_all(agent, items[:2], batch))
        assert all(a.error and "expired in each of 2 batches" in a.error for a in answers)
        assert len(api.batches) == 2 and not api.answered


def test_a_refused_line_fails_its_run_only(slide, tmp_path) -> None:
    def rule(request: RecordedRequest) -> Reply:
        return Reply(status=400, text="image too large") if "(item 1)" in request.text else navigate(request)

    with ScriptedModelServer(rule=rule) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        agent, batch = _batched("openai", api, tmp_path / "s")
        answers = asyncio.run(answer_all(agent, _items(slide, 3), batch))
    assert answers[1].error and "refused" in answers[1].error and "image too large" in answers[1].error
    assert answers[0].error is None and answers[2].error is None


def test_requests_split_at_the_provider_limit(slide, tmp_path) -> None:
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        agent, batch = _batched("openai", api, tmp_path / "s", max_requests=2)
        answers = asyncio.run(answer_all(agent, _items(slide, 5), batch))
        assert all(a.error is None for a in answers)
        assert batch.rounds == STEPS and len(api.batches) == 3 * STEPS  # 5 requests per round: 2 + 2 + 1
        assert max(len(b.lines) for b in api.batches.values()) == 2


def test_store_refuses_nothing_silently(tmp_path) -> None:
    store = BatchStore(tmp_path)
    store.record_batch({"batch_id": "b1", "custom_ids": ["x"], "status": "submitted"})
    (tmp_path / "answers.jsonl").write_text('{"custom_id": "x", "kind": "succ')  # a torn line of a kill
    again = BatchStore(tmp_path)
    assert again.open_batch("x") == "b1" and again.answers == {} and again.submissions == {"x": 1}
    # a line without custom_id is left out; a later error of an answered line does not replace it
    again.record_answers([{"custom_id": "x", "kind": "succeeded", "body": {"ok": 1}}])
    with open(tmp_path / "answers.jsonl", "a") as fh:
        fh.write('\n{"kind": "errored"}\n{"custom_id": "x", "kind": "errored", "status": 500}\n')
    again.record_answers([{"custom_id": "x", "kind": "expired"}])
    assert again.answers["x"]["body"] == {"ok": 1} and BatchStore(tmp_path).answers["x"]["body"] == {"ok": 1}
    broken = BatchStore(tmp_path / "broken")
    (tmp_path / "broken" / "answers.jsonl").mkdir(parents=True)  # an answer that cannot be stored is an
    with pytest.raises(OSError):  # error, never dropped
        broken.record_answers([{"custom_id": "x", "kind": "succeeded"}])
    assert broken.answers == {}  # not held as answered when it was not stored


def test_the_patch_baselines_concurrent_calls_go_into_one_round(slide, tmp_path) -> None:
    """Each patch run makes its n calls at once, reading its patches as it goes: one round for all runs
    (a round counted requests against runs before, and closed on the first run's first few patches)."""
    from giant_assets.agents.baselines import make_baseline_agent
    from giant_assets.experiments.spec import Experiment

    with (
        ScriptedModelServer(rule=lambda r: answer_reply("1")) as model,
        BatchAPIServer(model, polls_to_finish=1) as api,
    ):
        exp = Experiment(name="p", agent="patch", model="gpt-5", base_url=api.openai_base_url, n_patches=6,
                         patch_sampler="otsu", reasoning_effort="low")  # fmt: skip
        agent = make_baseline_agent(exp, None)
        agent.chat.batch = BatchRound(
            batch_client(agent.chat), BatchStore(tmp_path), poll_s=0.01, settle_s=1.0, log=lambda _: None
        )
        items = [replace(i, options=["Lung", "Liver", "Skin"]) for i in _items(slide, 3)]
        answers = asyncio.run(answer_all(agent, items, agent.chat.batch))
        assert all(a.error is None for a in answers), [a.error for a in answers]
        assert agent.chat.batch.rounds == 1 and len(api.batches) == 1
        assert len(next(iter(api.batches.values())).lines) == 3 * 6


def test_a_refused_reasoning_summary_is_dropped_in_batch_mode_too(slide, tmp_path) -> None:
    unverified = "Your organization must be verified to generate reasoning summaries."

    def rule(request: RecordedRequest) -> Reply:
        summary = "summary" in (request.json or {}).get("reasoning", {})
        return Reply(status=400, text=unverified) if summary else navigate(request)

    with ScriptedModelServer(rule=rule) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        agent, batch = _batched("openai", api, tmp_path / "s")
        (answer,) = asyncio.run(answer_all(agent, _items(slide, 1), batch))
    assert answer.error is None and answer.text
    calls = [s for s in answer.steps if s.action != "thumbnail"]
    assert len(calls) == STEPS
    assert all(s.provider_notes[0].startswith("reasoning summary dropped") for s in calls)
    assert ["summary" in r.json["reasoning"] for r in model.requests] == [True] + [False] * STEPS


# ---------------------------------------------------------------- a process killed around a batch create

CREATE = {"openai": "/v1/batches", "azure": "/openai/batches", "anthropic": "/v1/messages/batches"}
LIST = {p: ("GET", path) for p, path in CREATE.items()}
# the client is a forked copy of this process: a real process the test SIGKILLs (nothing of it runs on,
# no finally, no flush), without paying a fresh interpreter's import of the SDKs (seconds per test)
FORK = multiprocessing.get_context("fork")


def client_process(provider: str, base_url: str, store: str, slide: str, n: str) -> None:
    """A client in its own process: ``n`` GIANT runs in hold mode on ``store`` (the test kills it)."""
    api = SimpleNamespace(base_url=base_url, openai_base_url=base_url + "/v1")
    agent, batch = _batched(provider, api, Path(store))
    asyncio.run(answer_all(agent, _items(Path(slide), int(n)), batch))


def _kill_client_when(provider: str, api: BatchAPIServer, store: Path, slide: Path, ready) -> None:
    """Start a client process on ``store`` and SIGKILL it once ``ready()`` holds."""
    proc = FORK.Process(target=client_process, args=(provider, api.base_url, str(store), str(slide), "3"))
    proc.start()
    deadline = time.monotonic() + 120
    try:
        while not ready():
            assert proc.is_alive(), f"the client ended with exit code {proc.exitcode} before the create"
            assert time.monotonic() < deadline, "the client never reached the create"
            time.sleep(0.02)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
    assert proc.exitcode == -signal.SIGKILL


def _direct_answers(provider: str, items: list[AgentItem]) -> list[str]:
    with ScriptedModelServer(rule=navigate) as direct:
        agent = GiantAgent(_model(provider, direct), max_steps=STEPS, image_size=500)
        return [a.text for a in asyncio.run(answer_all(agent, items, None))]


def _another_cells_batch(provider: str, api: BatchAPIServer, n: int) -> str:
    """A batch of ``n`` requests submitted by some other cell of the same account, now."""

    async def submit() -> str:
        chat = _model(provider, api)
        try:
            body = {"model": "other", "max_tokens": 1, "messages": [{"role": "user", "content": "x"}]}
            return await batch_client(chat).submit([(f"other-{i}", body) for i in range(n)], "other-0")
        finally:
            await chat.aclose()

    return asyncio.run(submit())


def _submissions(api: BatchAPIServer, but: tuple[str, ...] = ()) -> Counter:
    """How many batches on the server hold each custom id (the other cells' batches left out)."""
    return Counter(cid for b in api.batches.values() if b.id not in but for cid, _ in b.lines)


@pytest.mark.parametrize("provider", ["openai", "azure", "anthropic"])
def test_a_batch_accepted_before_a_kill_is_adopted_not_paid_twice(slide, tmp_path, provider) -> None:
    items, store = _items(slide, 3), tmp_path / "store"
    sync = _direct_answers(provider, items)
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        api.create_reply_delay_s = [0.0, 120.0]  # round 2's batch exists; its id never reaches the client
        _kill_client_when(provider, api, store, slide, lambda: len(api.batches) == 2)
        orphan = list(api.batches)[1]
        assert len(BatchStore(store).batches) == 1  # round 1 recorded, round 2's id lost with the process
        # another cell's batch since then: another round tag (OpenAI), another request count (Anthropic)
        other = _another_cells_batch(provider, api, 2)
        logs: list[str] = []
        agent, batch = _batched(provider, api, store, log=logs.append)
        answers = asyncio.run(answer_all(agent, items, batch))
        submitted = _submissions(api, but=(other,))
        # no request went into two batches: round 2 was waited on, not submitted again; each paid once
        assert set(submitted.values()) == {1} and len(submitted) == 3 * STEPS, submitted
        assert set(api.answered.values()) == {1} and len(api.answered) == 3 * STEPS
        assert len(api.batches) == STEPS + 1 and batch.rounds == 1  # this process submitted round 3 only
        assert api.calls.count(LIST[provider]) == 1
        orphan_cids = [cid for cid, _ in api.batches[orphan].lines]
    assert [a.text for a in answers] == sync and all(a.error is None for a in answers)
    assert batch.adopted == [orphan]
    assert sum(f"adopted batch {orphan} of round " in line for line in logs) == 1, logs
    record = BatchStore(store).batches[orphan]
    assert record["adopted"] and record["custom_ids"] == orphan_cids and record["status"] == "ended"
    assert BatchStore(store).unresolved_intents() == []


@pytest.mark.parametrize("provider", ["openai", "azure", "anthropic"])
def test_a_kill_before_the_provider_accepted_submits_normally(slide, tmp_path, provider) -> None:
    items, store = _items(slide, 3), tmp_path / "store"
    sync = _direct_answers(provider, items)
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        api.stall_creates = 1  # round 1's create hangs and creates nothing (OpenAI: after the upload)
        _kill_client_when(provider, api, store, slide, lambda: ("POST", CREATE[provider]) in api.calls)
        assert not api.batches and not BatchStore(store).batches
        logs: list[str] = []
        agent, batch = _batched(provider, api, store, log=logs.append)
        answers = asyncio.run(answer_all(agent, items, batch))
        submitted = _submissions(api)
        assert set(submitted.values()) == {1} and len(submitted) == 3 * STEPS
        assert set(api.answered.values()) == {1} and batch.rounds == STEPS  # nothing lost, none adopted
        assert api.calls.count(LIST[provider]) == 1  # looked once
        # the search is resolved: a later process on the store asks the provider nothing about it
        agent, again = _batched(provider, api, store)
        assert [a.text for a in asyncio.run(answer_all(agent, items, again))] == sync
        assert api.calls.count(LIST[provider]) == 1 and again.rounds == 0
    assert [a.text for a in answers] == sync and all(a.error is None for a in answers)
    assert batch.adopted == [] and sum("the provider has no batch of it" in line for line in logs) == 1
    intents = BatchStore(store).intents.values()  # one per batch; the killed round's resolved
    (lost,) = [i for i in intents if "resolved" in i]
    assert lost["resolved"] == "not_found" and len(lost["custom_ids"]) == 3 and len(intents) == STEPS + 1


def test_two_anthropic_batches_that_fit_are_not_adopted(slide, tmp_path) -> None:
    """Message batches carry no tag: a batch of another cell with as many requests, created since the
    intent, makes the match ambiguous: none is adopted, the user is told, the round is paid twice."""
    items, store = _items(slide, 3), tmp_path / "store"
    sync = _direct_answers("anthropic", items)
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        api.create_reply_delay_s = [0.0, 120.0]
        _kill_client_when("anthropic", api, store, slide, lambda: len(api.batches) == 2)
        orphan = list(api.batches)[1]
        other = _another_cells_batch("anthropic", api, 3)
        logs: list[str] = []
        agent, batch = _batched("anthropic", api, store, log=logs.append)
        answers = asyncio.run(answer_all(agent, items, batch))
        orphan_cids = {cid for cid, _ in api.batches[orphan].lines}
        submitted = _submissions(api, but=(other,))
        # round 2 was submitted again: the orphan's requests are in two batches (the residual risk)
        assert {cid for cid, n in submitted.items() if n == 2} == orphan_cids
        assert len(submitted) == 3 * STEPS and batch.rounds == 2
        agent, again = _batched("anthropic", api, store)
        asyncio.run(answer_all(agent, items, again))
        assert api.calls.count(LIST["anthropic"]) == 1  # resolved: not searched again
    assert [a.text for a in answers] == sync and all(a.error is None for a in answers)
    assert batch.adopted == []
    (told,) = [line for line in logs if "could be it: none adopted" in line]
    assert orphan in told and other in told and "paid for twice" in told
    ambiguous = [i for i in BatchStore(store).intents.values() if i.get("resolved") == "ambiguous"]
    assert [sorted(i["candidates"]) for i in ambiguous] == [sorted([orphan, other])]


def test_a_wrongly_adopted_anthropic_batch_costs_one_line_attempt(slide, tmp_path) -> None:
    """The round never reached the provider, and another cell's batch of as many requests is the one
    candidate: it is adopted; when it ends its results name none of the round's requests, which then go
    into a new round as expired lines do (one of their max_line_attempts spent), and the runs finish."""
    items, store = _items(slide, 3), tmp_path / "store"
    sync = _direct_answers("anthropic", items)
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        api.stall_creates = 1
        _kill_client_when("anthropic", api, store, slide, lambda: ("POST", CREATE["anthropic"]) in api.calls)
        other = _another_cells_batch("anthropic", api, 3)
        agent, batch = _batched("anthropic", api, store)
        answers = asyncio.run(answer_all(agent, items, batch))
        assert batch.adopted == [other] and batch.rounds == STEPS  # the lost round, sent again, and 2 more
        assert set(_submissions(api, but=(other,)).values()) == {1}
    assert [a.text for a in answers] == sync and all(a.error is None for a in answers)
    again = BatchStore(store)
    (lost,) = [i for i in again.intents.values() if i["round_tag"] == again.batches[other]["round_tag"]]
    assert {again.submissions[cid] for cid in lost["custom_ids"]} == {2}  # the wrong wait counts as one
    assert {again.answers[f"other-{i}"]["kind"] for i in range(3)} == {"succeeded"}


def _intent_at(store: Path, tag: str, cids: list[str], at: float) -> None:
    """An intent written at ``at`` (as ``record_intent`` writes it then), with no batch recorded."""
    BatchStore(store)._append_intent({"round_tag": tag, "custom_ids": cids, "at": at})


def test_an_anthropic_batch_at_the_windows_edge_is_adopted_and_one_past_it_is_not(tmp_path) -> None:
    """The window of an untagged intent runs from its time less the clock slack (60 s) to the store's
    next record plus the slack. Intent at t0, the next record at t0+200: a batch of as many requests
    at t0+90 (past t0+60, where a window ending at the intent's own time would stop) is adopted; one at
    t0+261 (past the next record's t0+260, where a window ending now would reach) is not a candidate.
    Mutations: the window's end at the intent's time; the next record ignored (the end at now)."""
    store, t0 = tmp_path / "s", time.time() - 3600
    _intent_at(store, "t-0", ["a", "b"], t0)
    BatchStore(store).record_batch({"batch_id": "msgbatch_earlier", "custom_ids": ["c"], "status": "ended",
                                    "round_tag": "u-0", "submitted_at": t0 + 200})  # fmt: skip
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        mine = api._create("anthropic", "/v1/messages", [("a", {}), ("b", {})])
        late = api._create("anthropic", "/v1/messages", [("x", {}), ("y", {})])
        mine.created_at, late.created_at = t0 + 90, t0 + 261
        logs: list[str] = []
        agent, batch = _batched("anthropic", api, store, log=logs.append)

        async def adopt() -> None:
            try:
                await batch.adopt()
            finally:
                await agent.aclose()

        asyncio.run(adopt())
    assert batch.adopted == [mine.id], logs
    assert BatchStore(store).batches[mine.id]["custom_ids"] == ["a", "b"]


def test_an_azure_listing_with_a_deleted_input_file_still_adopts_the_other_batch(tmp_path) -> None:
    """Azure tells a batch by its input file's name; a batch of the account whose input file was
    deleted since (404) is no candidate, and the lost round's batch beside it is adopted. Mutation: a
    404 raised like any other failure (the listing fails, nothing is adopted, the runs fail)."""
    store = tmp_path / "s"
    with ScriptedModelServer(rule=navigate) as model, BatchAPIServer(model, polls_to_finish=1) as api:
        chat = _model("azure", api)
        client = batch_client(chat)
        body = {"model": "gpt5-batch", "input": "x"}

        logs: list[str] = []

        async def submit_lose_adopt() -> tuple[str, str]:
            try:
                mine = await client.submit([("a", body), ("b", body)], "t-0")
                other = await client.submit([("o", body)], "o-0")
                del api.files[api.batches[other].input_file_id]  # its input file deleted since: 404
                _intent_at(store, "t-0", ["a", "b"], time.time() - 30)  # mine's id lost
                chat.batch = BatchRound(client, BatchStore(store), poll_s=0.01, log=logs.append)
                await chat.batch.adopt()
                return mine, other
            finally:
                await chat.aclose()

        mine, other = asyncio.run(submit_lose_adopt())
        looked_up = [c for c in api.calls if c[0] == "GET" and c[1].startswith("/openai/files/")]
    assert chat.batch.adopted == [mine], logs
    assert len(looked_up) == 2  # both batches' input files were looked up; one was gone
