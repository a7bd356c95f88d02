"""Offline agents: random (valid, deterministic, uniform), majority-class, replay of recorded files."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chisquare

from giant_assets.agents.offline import MajorityAgent, RandomAgent, ReplayAgent, read_recorded
from giant_assets.runs.agent_api import AgentAnswer, AgentItem, Step
from giant_assets.runs.extraction import extract_label
from giant_assets.runs.records import records_frame
from giant_assets.runs.runner import result_row

OPTIONS = ["Lung", "Liver", "Kidney", "Skin"]
SIX = ["Lung", "Liver", "Kidney", "Skin", "Colon", "Breast"]


def item(benchmark: str = "tcga", benchmark_id: str = "7", options: list[str] | None = OPTIONS) -> AgentItem:
    return AgentItem(benchmark, benchmark_id, "Which organ?", options, "/slides/x.svs")


def answer(agent, it: AgentItem, run: int = 0):
    return asyncio.run(agent.answer(it, run))


def labels_of(agent, it: AgentItem, runs) -> list[int | None]:
    async def go() -> list[int | None]:
        out = []
        for run in runs:
            text = (await agent.answer(it, run)).text
            out.append(extract_label(text, benchmark_name=it.benchmark_name, options=it.options).label)
        return out

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("it", "valid"),
    [(item(), range(1, 5)), (item(options=SIX), range(1, 7)), (item("panda", "p1", None), range(6))],
    ids=["4-options", "6-options", "panda"],
)
def test_random_answers_are_valid_and_uniform(it: AgentItem, valid: range) -> None:
    labels = labels_of(RandomAgent(seed=3), it, range(600))
    assert set(labels) <= set(valid)  # extractable (no None) and in range
    counts = [labels.count(k) for k in valid]
    assert min(counts) > 0
    assert chisquare(counts).pvalue > 1e-4


def test_random_is_deterministic_per_seed_item_and_run() -> None:
    labels = labels_of(RandomAgent(seed=3), item(), range(60))
    assert labels_of(RandomAgent(seed=3), item(), range(60)) == labels
    assert labels_of(RandomAgent(seed=3), item(), reversed(range(60))) == labels[::-1]  # order-free
    assert labels_of(RandomAgent(seed=4), item(), range(60)) != labels
    assert labels_of(RandomAgent(seed=3), item(benchmark_id="8"), range(60)) != labels
    assert labels_of(RandomAgent(seed=3), item("gtex"), range(60)) != labels
    text = answer(RandomAgent(seed=3), item("panda", "p1", None), 5).text
    assert list(json.loads(text)) == ["isup_grade"]
    assert answer(RandomAgent(seed=3), item(), 5).steps[0].action == "answer"


def test_random_refuses_an_option_question_without_options() -> None:
    for options in ([], None):
        with pytest.raises(ValueError, match="tcga/7.*without options"):
            answer(RandomAgent(), item(options=options))


def test_majority_picks_most_frequent_label_ties_to_smallest() -> None:
    truth = pd.DataFrame(
        {
            "benchmark_name": ["tcga"] * 5 + ["panda"] * 4,
            "truth_label": [2, 3, 3, 2, 1, 4, 0, 0, 4],
        }
    )
    agent = MajorityAgent.from_truth(truth)
    assert agent.label_by_benchmark == {"tcga": 2, "panda": 0}
    assert json.loads(answer(agent, item()).text) == {"answer": 2}
    assert json.loads(answer(agent, item("panda", "1", None)).text) == {"isup_grade": 0}
    assert labels_of(agent, item(), range(3)) == [2, 2, 2]
    with pytest.raises(KeyError, match="gtex"):
        answer(agent, item("gtex"))


@pytest.mark.parametrize("seed", range(5))
def test_majority_matches_a_counter_oracle(seed: int) -> None:
    rng = np.random.default_rng(seed)
    frames, expected = [], {}
    for name, n_labels in [("tcga", 30), ("gtex", 20), ("panda", 6)]:
        labels = rng.integers(0, n_labels, int(rng.integers(5, 40))).tolist()
        counts = Counter(labels)
        top = max(counts.values())
        expected[name] = min(k for k, c in counts.items() if c == top)
        frames.append(pd.DataFrame({"benchmark_name": name, "truth_label": labels}))
    truth = pd.concat(frames).sample(frac=1, random_state=seed)  # row order must not matter
    assert MajorityAgent.from_truth(truth).label_by_benchmark == expected


STEPS = [
    {"index": 0, "action": "crop", "box": [1, 2, 3, 4], "level": 1, "image_size": [3, 4], "cost_usd": 0.5},
    {"index": 1, "action": "answer", "text": '{"answer": 1}'},
]


def recorded() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "benchmark_name": ["tcga", "tcga", "gtex", "tcga"],
            "benchmark_id": ["7", "7", "7", "8"],
            "run_index": [0, 1, 0, 0],
            "answer_text": ['{"answer": 1}', "2", "Liver", ""],
            "trajectory_json": [json.dumps(STEPS), "", "", ""],
        }
    )


def write(frame: pd.DataFrame, path: Path) -> Path:
    if path.suffix == ".csv":
        frame.to_csv(path, index=False)
    elif path.suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True)
    else:
        frame.to_parquet(path)
    return path


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_replay_reads_every_format_keyed_by_benchmark_id_and_run(tmp_path: Path, suffix: str) -> None:
    agent = ReplayAgent(write(recorded(), tmp_path / f"rec{suffix}"))
    assert agent.model == f"rec{suffix}"
    first = answer(agent, item(), 0)
    assert first.text == '{"answer": 1}'
    assert [s.action for s in first.steps] == ["crop", "answer"]
    assert first.steps[0].box == [1, 2, 3, 4] and first.steps[0].image_size == [3, 4]
    assert first.cost_usd == 0.0 and first.input_tokens == 0  # replaying spends nothing
    second = answer(agent, item(), 1)
    assert second.text == "2"  # a numeric string stays "2" (JSONL once turned it into "2.0")
    assert [(s.action, s.text) for s in second.steps] == [("answer", "2")]
    assert labels_of(agent, item(), [0, 1]) == [1, 2]
    assert answer(agent, item(), 2).text == '{"answer": 1}'  # no run 2 recorded: run 0 answers
    assert answer(agent, item("gtex"), 0).text == "Liver"
    assert labels_of(agent, item("gtex"), [0]) == [2]
    assert answer(agent, item(benchmark_id="8"), 0).text == ""  # recorded empty answer stays empty
    with pytest.raises(KeyError, match="tcga/99"):
        answer(agent, item(benchmark_id="99"))
    with pytest.raises(KeyError, match="gtex/8"):
        answer(agent, item("gtex", "8"))


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_replay_without_benchmark_or_run_columns(tmp_path: Path, suffix: str) -> None:
    frame = pd.DataFrame({"benchmark_id": ["7", "9"], "prediction": ["2", "Kidney"]})
    agent = ReplayAgent(write(frame, tmp_path / f"plain{suffix}"))
    for it, run in [(item(), 4), (item("gtex"), 0), (item("panda", "7", None), 2)]:
        assert answer(agent, it, run).text == "2"
    assert labels_of(agent, item(benchmark_id="9"), [0, 3]) == [3, 3]


def test_replay_with_runs_but_no_benchmark_and_benchmark_but_no_runs(tmp_path: Path) -> None:
    runs_only = write(
        pd.DataFrame({"benchmark_id": ["7", "7", "7"], "run_index": [0, 1, 2], "answer": ["1", "4", None]}),
        tmp_path / "runs.jsonl",
    )
    agent = ReplayAgent(runs_only)
    assert [answer(agent, item("gtex"), run).text for run in range(3)] == ["1", "4", ""]
    assert labels_of(agent, item("gtex"), range(3)) == [1, 4, None]
    names_only = write(
        pd.DataFrame({"benchmark_name": ["tcga", "gtex"], "benchmark_id": ["7", "7"], "answer": ["1", "3"]}),
        tmp_path / "names.csv",
    )
    agent = ReplayAgent(names_only)
    assert labels_of(agent, item("tcga"), [0, 5]) == [1, 1]
    assert labels_of(agent, item("gtex"), [0, 5]) == [3, 3]
    with pytest.raises(KeyError, match="panda/7"):
        answer(agent, item("panda", "7", None))


def test_replay_numeric_and_missing_cells(tmp_path: Path) -> None:
    """A label column with gaps is float in parquet; its cells replay as "2" and ""."""
    frame = pd.DataFrame({"benchmark_id": [7, 8], "prediction": [2.0, np.nan]})
    agent = ReplayAgent(write(frame, tmp_path / "labels.parquet"))
    assert answer(agent, item(benchmark_id="7")).text == "2"
    assert answer(agent, item(benchmark_id="8")).text == ""
    lines = [{"benchmark_id": 7, "answer": None}, {"benchmark_id": "007", "answer": 3}]
    path = tmp_path / "nulls.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    frame = read_recorded(path)
    assert frame["benchmark_id"].tolist() == ["7", "007"]
    assert frame["answer_text"].tolist() == ["", "3"]
    assert frame["run_index"].tolist() == [0, 0] and frame["benchmark_name"].isna().all()


def test_recorded_file_errors_name_file_and_columns(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="missing.csv"):
        read_recorded(tmp_path / "missing.csv")
    with pytest.raises(FileNotFoundError, match="missing.parquet"):
        ReplayAgent(tmp_path / "missing.parquet")
    bad = tmp_path / "bad.csv"
    bad.write_text("id,label\n1,2\n")
    with pytest.raises(ValueError, match=r"bad.csv.*benchmark_id.*found \['id', 'label'\]"):
        read_recorded(bad)
    no_answer = tmp_path / "no_answer.jsonl"
    no_answer.write_text('{"benchmark_id": "1", "label": 2}\n')
    with pytest.raises(ValueError, match=r"no_answer.jsonl.*answer_text.*found \['benchmark_id', 'label'\]"):
        read_recorded(no_answer)
    (tmp_path / "x.txt").write_text("")
    with pytest.raises(ValueError, match="x.txt.*'.txt'"):
        read_recorded(tmp_path / "x.txt")


def test_csv_of_numeric_looking_answers_keeps_their_text(tmp_path: Path) -> None:
    """A CSV answer column of only numbers was read as floats: "2.0" replayed as "2" (label 2, was None)."""
    path = tmp_path / "numeric.csv"
    path.write_text("benchmark_id,answer_text\n7,2.0\n8,03\n")
    assert read_recorded(path)["answer_text"].tolist() == ["2.0", "03"]
    agent = ReplayAgent(path)
    assert labels_of(agent, item(benchmark_id="7"), [0]) == [None]  # as extracted from the original "2.0"
    assert answer(agent, item(benchmark_id="8")).text == "03"


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_replaying_a_predictions_table_reproduces_its_labels_and_regions(tmp_path: Path, suffix: str) -> None:
    """The predictions table of a run, saved and replayed, gives the same texts, labels and crop boxes."""
    texts = ['{"answer": 2}', "Answer: C", "no idea", "2.0", "", "Kidney"]
    rows = []
    for i, text in enumerate(texts):
        it = item(benchmark_id=f"{i:03d}")
        steps = [
            Step(0, "crop", box=[10 * i, 20, 30, 40], level=1, image_size=[30, 40], cost_usd=0.2),
            Step(1, "answer", text=text, input_tokens=50, output_tokens=5),
        ]
        base = {"config_hash": "h", "agent": "giant", "model": "m", "benchmark_name": "tcga"}
        base |= {"benchmark_id": it.benchmark_id, "run_index": 0, "started_at": None}
        truth = {"benchmark_name": "tcga", "truth_label": 2, "options": OPTIONS}
        rows.append(result_row(base, truth, AgentAnswer(text, steps), None, None))
    table = records_frame(rows)
    agent = ReplayAgent(write(table, tmp_path / f"predictions{suffix}"))
    replayed = [answer(agent, item(benchmark_id=f"{i:03d}")) for i in range(len(texts))]
    assert [a.text for a in replayed] == texts
    expected = [None if pd.isna(label) else int(label) for label in table["predicted_label"]]
    assert expected == [2, 3, None, None, None, 3]
    assert labels_of(agent, item(benchmark_id="000"), [0]) == [2]
    for i, a in enumerate(replayed):
        label = extract_label(a.text, benchmark_name="tcga", options=OPTIONS).label
        assert label == expected[i]
        assert [(s.action, s.box) for s in a.steps] == [("crop", [10 * i, 20, 30, 40]), ("answer", None)]
        assert a.cost_usd == 0.0 and a.input_tokens == 0 and a.output_tokens == 0


def test_jsonl_trajectory_as_a_json_list_is_replayed(tmp_path: Path) -> None:
    path = tmp_path / "native.jsonl"
    line = {"benchmark_id": "7", "answer_text": "B", "trajectory_json": STEPS}
    path.write_text(json.dumps(line) + "\n")
    replayed = answer(ReplayAgent(path), item())
    assert replayed.text == "B" and [s.action for s in replayed.steps] == ["crop", "answer"]
    assert replayed.steps[0].level == 1 and replayed.cost_usd == 0.0


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_replay_refuses_an_answer_recorded_for_another_question(tmp_path: Path, suffix: str) -> None:
    """A predictions table records each run's item_fingerprint: replayed against items whose id now names
    another question or slide, that answer is refused (naming the item), the others replay."""
    frame = pd.DataFrame(
        {
            "benchmark_name": ["tcga", "tcga", "tcga"],
            "benchmark_id": ["1", "2", "3"],
            "answer_text": ['{"answer": 1}', '{"answer": 2}', '{"answer": 3}'],
            "item_fingerprint": ["fp-1", "fp-2", None],  # 3: recorded before fingerprints
        }
    )
    agent = ReplayAgent(write(frame, tmp_path / f"rec{suffix}"))

    def with_fp(bid: str, fp: str | None) -> AgentItem:
        return dataclasses.replace(item(benchmark_id=bid), item_fingerprint=fp)

    assert answer(agent, with_fp("1", "fp-1")).text == '{"answer": 1}'
    assert answer(agent, with_fp("3", "fp-3")).text == '{"answer": 3}'
    assert answer(agent, with_fp("2", None)).text == '{"answer": 2}'  # an item without one: as before
    with pytest.raises(ValueError, match=r"tcga/2 was for another question or slide"):
        answer(agent, with_fp("2", "fp-2-new-csv"))
