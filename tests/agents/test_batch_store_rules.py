"""The batch store's accounting rules on its own files, by hand: a paid (succeeded) answer is never
replaced, a batch counts once per line however often its record is rewritten, a torn line is sealed,
a request's custom_id is canonical and per run, and an intent adopts only a batch that can be its."""

from __future__ import annotations

import json
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


def test_hostile_store_lines_are_named_by_file_and_line_and_the_good_ones_kept(tmp_path: Path) -> None:
    """Lines edited by hand or torn: a field missing (the intent without round_tag that once raised
    KeyError), of the wrong type, NaN, 1e308, a 5,000-digit integer, 100,000-deep JSON. Each is left out
    and named; every good record is read. Mutations: a check dropped (the bad line indexed, or a
    KeyError), the line number off, RecursionError not caught."""
    good_batch = {"batch_id": "b1", "custom_ids": ["x"], "status": "submitted", "submitted_at": 1000.0}
    good_intent = {"round_tag": "t", "custom_ids": ["x"], "at": 999.0}
    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / "batches.jsonl").write_text(
        "\n".join([
            json.dumps({"custom_ids": ["y"], "status": "submitted"}),  # 1: no batch_id
            json.dumps(good_batch),  # 2
            json.dumps({"batch_id": "b2", "custom_ids": "xy"}),  # 3: custom_ids a string
            json.dumps({"batch_id": "b3", "submitted_at": 1e308}),  # 4: not a unix time
            '{"batch_id": "b4", "submitted_at": NaN}',  # 5
            '{"batch_id": "b5", "requests": ' + "9" * 5000 + "}",  # 6: past Python's int digits limit
            deep,  # 7
        ]) + "\n"
    )  # fmt: skip
    (tmp_path / "intents.jsonl").write_text(
        json.dumps({"custom_ids": ["z"], "at": 5.0})
        + "\n"  # 1: no round_tag (was: KeyError)
        + json.dumps(good_intent)
        + "\n"  # 2
        + json.dumps({"round_tag": "u", "custom_ids": ["z"]})
        + "\n"  # 3: an intent without its time
        + json.dumps({"round_tag": "t", "resolved": "not_found"})
        + "\n"  # 4: a resolution: good
    )
    (tmp_path / "answers.jsonl").write_text(
        json.dumps({"custom_id": "x", "kind": "succeeded"})
        + "\n"  # 1: no body
        + json.dumps({"custom_id": "y", "kind": "errored", "status": "500"})
        + "\n"  # 2: status a string
        + json.dumps({"custom_id": "w", "kind": "errored", "status": 1e308})
        + "\n"  # 3
        + json.dumps({"custom_id": "v", "kind": "paid"})
        + "\n"  # 4
        + json.dumps(OK)
        + "\n"  # 5
    )
    store = BatchStore(tmp_path)
    assert store.batches == {"b1": good_batch} and store.submissions == {"x": 1}
    assert store.answers == {"x": OK}
    assert store.intents == {"t": good_intent | {"round_tag": "t", "resolved": "not_found"}}
    named = [
        (p.split(" line ")[0].rsplit("/", 1)[1], int(p.split(" line ")[1].split(":")[0]))
        for p in store.problems
    ]
    assert named == [("batches.jsonl", n) for n in (1, 3, 4, 5, 6, 7)] + [
        ("answers.jsonl", n) for n in (1, 2, 3, 4)
    ] + [("intents.jsonl", n) for n in (1, 3)], store.problems
    assert all(p.startswith(str(tmp_path)) and p.endswith("(left out)") for p in store.problems)
    assert "no batch_id" in store.problems[0] and "no round_tag" in store.problems[10]
    assert "not JSON" in store.problems[4] and "not JSON" in store.problems[5]
