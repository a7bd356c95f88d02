"""Offline agents: random (valid, deterministic, uniform), majority-class, replay of recorded files."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from scipy.stats import chisquare

from giant_assets.agents.base import AgentItem
from giant_assets.agents.offline import MajorityAgent, RandomAgent, ReplayAgent, read_recorded
from giant_assets.eval.extraction import extract_label

OPTIONS = ["Lung", "Liver", "Kidney", "Skin"]


def item(benchmark: str = "tcga", benchmark_id: str = "7", options: list[str] | None = OPTIONS) -> AgentItem:
    return AgentItem(benchmark, benchmark_id, "Which organ?", options, "/slides/x.svs")


def answer(agent, it: AgentItem, run: int = 0):
    return asyncio.run(agent.answer(it, run))


def labels_of(agent, it: AgentItem, runs: range) -> list[int]:
    async def go() -> list[int]:
        out = []
        for run in runs:
            text = (await agent.answer(it, run)).text
            out.append(extract_label(text, benchmark_name=it.benchmark_name, options=it.options).label)
        return out

    return asyncio.run(go())


def test_random_answers_are_valid_deterministic_and_uniform() -> None:
    agent = RandomAgent(seed=3)
    options_labels = labels_of(agent, item(), range(800))
    assert set(options_labels) == {1, 2, 3, 4}
    assert chisquare(list(Counter(options_labels).values())).pvalue > 1e-4
    grades = labels_of(agent, item("panda", "p1", None), range(600))
    assert set(grades) == {0, 1, 2, 3, 4, 5}
    assert chisquare(list(Counter(grades).values())).pvalue > 1e-4
    assert labels_of(RandomAgent(seed=3), item(), range(50)) == options_labels[:50]
    assert labels_of(RandomAgent(seed=4), item(), range(50)) != options_labels[:50]
    assert labels_of(agent, item(benchmark_id="8"), range(50)) != options_labels[:50]


def test_random_refuses_an_option_question_without_options() -> None:
    with pytest.raises(ValueError, match="without options"):
        answer(RandomAgent(), item(options=[]))


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
    with pytest.raises(KeyError, match="gtex"):
        answer(agent, item("gtex"))


def recorded() -> pd.DataFrame:
    steps = [
        {"index": 0, "action": "crop", "box": [1, 2, 3, 4], "level": 1},
        {"index": 1, "action": "answer"},
    ]
    return pd.DataFrame(
        {
            "benchmark_name": ["tcga", "tcga", "gtex"],
            "benchmark_id": ["7", "7", "7"],
            "run_index": [0, 1, 0],
            "answer_text": ['{"answer": 1}', '{"answer": 3}', "Liver"],
            "trajectory_json": [json.dumps(steps), "", ""],
        }
    )


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_replay_reads_every_format_keyed_by_benchmark_id_and_run(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"rec{suffix}"
    frame = recorded()
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    elif suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True)
    else:
        frame.to_parquet(path)
    agent = ReplayAgent(path)
    first = answer(agent, item(), 0)
    assert first.text == '{"answer": 1}' and first.steps[0].box == [1, 2, 3, 4] and len(first.steps) == 2
    assert answer(agent, item(), 1).text == '{"answer": 3}'
    assert answer(agent, item(), 2).text == '{"answer": 1}'  # no run 2 recorded: run 0 answers
    assert answer(agent, item("gtex"), 0).text == "Liver"
    with pytest.raises(KeyError, match="tcga/99"):
        answer(agent, item(benchmark_id="99"))


def test_replay_without_benchmark_or_run_columns(tmp_path: Path) -> None:
    path = tmp_path / "plain.csv"
    path.write_text("benchmark_id,prediction\n7,2\n")
    agent = ReplayAgent(path)
    assert answer(agent, item(), 4).text == "2" and answer(agent, item("gtex"), 0).text == "2"


def test_recorded_file_errors_name_file_and_columns(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="missing.csv"):
        read_recorded(tmp_path / "missing.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("id,label\n1,2\n")
    with pytest.raises(ValueError, match=r"bad.csv.*benchmark_id.*\['id', 'label'\]"):
        read_recorded(bad)
    (tmp_path / "x.txt").write_text("")
    with pytest.raises(ValueError, match="x.txt.*'.txt'"):
        read_recorded(tmp_path / "x.txt")
