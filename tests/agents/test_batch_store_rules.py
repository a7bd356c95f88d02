"""The batch store's accounting rules on its own files, by hand: a paid (succeeded) answer is never
replaced, a batch counts once per line however often its record is rewritten, a torn line is sealed,
a request's custom_id is canonical and per run, and an intent adopts only a batch that can be its."""

from __future__ import annotations

from pathlib import Path

from giant_assets.agents.providers.batching import BatchStore, ListedBatch, custom_id, intent_candidates

OK = {"custom_id": "x", "kind": "succeeded", "body": {"paid": 1}}
ERR = {"custom_id": "x", "kind": "errored", "status": 500, "error": "later failure"}


def test_a_succeeded_answer_is_never_replaced_in_memory_or_on_reload(tmp_path: Path) -> None:
    """Mutations: ``_replaces`` always true; one call's rows checked against the store only (an error
    after a success in the same call wins); the file's lines indexed without the rule on reload."""
    store = BatchStore(tmp_path)
    store.record_answers([OK, ERR])  # one result file: the success, then an error of the same line
    assert store.answers["x"]["kind"] == "succeeded"
    store.record_answers([ERR])
    assert store.answers["x"]["kind"] == "succeeded"
    (tmp_path / "answers.jsonl").write_text(
        (tmp_path / "answers.jsonl").read_text() + '{"custom_id": "x", "kind": "errored"}\n'
    )
    assert BatchStore(tmp_path).answers["x"]["body"] == {"paid": 1}
    retried = BatchStore(tmp_path)
    retried.record_answers([{"custom_id": "y", "kind": "errored", "status": 500}])
    retried.record_answers([{"custom_id": "y", "kind": "succeeded", "body": {}}])  # an error may be replaced
    assert BatchStore(tmp_path).answers["y"]["kind"] == "succeeded"


def test_a_batch_counts_once_per_line_however_often_its_record_is_rewritten(tmp_path: Path) -> None:
    """Mutation: every record of a batch counted as a submission (lines given up after fewer real
    attempts, or paid again too early)."""
    store = BatchStore(tmp_path)
    store.record_batch({"batch_id": "b1", "custom_ids": ["x", "y"], "status": "in_progress"})
    store.record_batch({"batch_id": "b1", "custom_ids": ["x", "y"], "status": "ended"})
    store.record_batch({"batch_id": "b2", "custom_ids": ["x"], "status": "in_progress"})
    again = BatchStore(tmp_path)
    assert again.submissions == {"x": 2, "y": 1}
    assert again.open_batch("x") == "b2" and again.open_batch("y") is None


def test_a_torn_last_line_is_sealed_before_the_next_answer(tmp_path: Path) -> None:
    """Mutation: ``_append`` not sealing a torn line (the next answer is glued to it and lost)."""
    (tmp_path / "answers.jsonl").write_text('{"custom_id": "z", "kind": "succ')  # a writer killed mid-line
    BatchStore(tmp_path).record_answers([OK])
    assert BatchStore(tmp_path).answers == {"x": OK}


def test_the_custom_id_is_canonical_and_names_the_run() -> None:
    """Mutations: the run key left out (the runs of one item would share one answer); keys not sorted."""
    body = {"model": "m", "input": [1, 2]}
    cid = custom_id("/v1/responses", body, "run-0")
    assert len(cid) == 64 and cid.startswith("g")
    assert cid == custom_id("/v1/responses", {"input": [1, 2], "model": "m"}, "run-0")
    assert len({cid, custom_id("/v1/responses", body, "run-1"), custom_id("/v1/responses", body)}) == 3


def test_an_intent_adopts_only_an_unnamed_batch_of_its_size_and_time(tmp_path: Path) -> None:
    """Untagged batches (Anthropic): a candidate is unnamed by the store, created within the window
    (60 s slack) and holds as many requests. Mutations: the size or the named test dropped."""
    intent = {"round_tag": "t", "custom_ids": ["a", "b"], "at": 1000.0}
    listed = [
        ListedBatch("named", 1001.0, 2, None),
        ListedBatch("three", 1002.0, 3, None),
        ListedBatch("late", 1200.0, 2, None),
        ListedBatch("mine", 1003.0, 2, None),
    ]
    found = intent_candidates(intent, listed, named={"named"}, until=1010.0, tagged=False)
    assert [b.id for b in found] == ["mine"]
    tagged = [ListedBatch("other", 1003.0, 2, "u"), ListedBatch("its", 5000.0, 7, "t")]
    assert [b.id for b in intent_candidates(intent, tagged, set(), 1010.0, tagged=True)] == ["its"]
    store = BatchStore(tmp_path)
    store.record_intent("t", ["a", "b"])
    store.record_intent("s", ["c"])
    store.record_batch({"batch_id": "b9", "round_tag": "s", "custom_ids": ["c"], "status": "in_progress"})
    assert [i["round_tag"] for i in BatchStore(tmp_path).unresolved_intents()] == ["t"]
