"""The demo's own declarations (demo/overlay.py), the scripted model's answer to the demo's lesion
question: plain Python, no demo run."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest
import yaml
from PIL import Image

from giant_assets.demo.overlay import compose, overlay_path
from giant_assets.demo.scripted import demo_policy
from giant_assets.demo.scripted.recorded import RecordedRequest
from giant_assets.experiments.declared import load_benchmarks, load_experiments

REPO = Path(__file__).resolve().parents[2]
OVERLAID = ("demo-two-model", "demo-steps-1", "demo-steps-2", "demo-steps-5")


def given_file(tmp_path: Path, port: int = 51234, extra: str = "") -> Path:
    """The repo's experiments.yaml with the demo's model on another port, plus ``extra`` YAML lines."""
    text = (REPO / "experiments.yaml").read_text().replace(":47321/v1", f":{port}/v1")
    path = tmp_path / "given" / "experiments.yaml"
    path.parent.mkdir()
    path.write_text(text + extra)
    return path


def test_the_demo_runs_on_the_given_file_plus_its_own_declarations(tmp_path: Path) -> None:
    given = given_file(tmp_path)
    before = given.read_text()
    out = compose(given, tmp_path / "data" / "demo-experiments.yaml")
    assert given.read_text() == before  # the given file is never changed
    mine, theirs = load_experiments(out), load_experiments(given)
    assert set(mine) == set(theirs) | set(OVERLAID)
    for name in theirs:  # the given declarations keep their identity (config hash)
        assert mine[name].config_hash() == theirs[name].config_hash(), name
    for name in OVERLAID:  # the demo's model: demo-giant's port and key variable in the given file
        assert mine[name].base_url == "http://127.0.0.1:51234/v1"
        assert mine[name].api_key_env == "GIANT_DEMO_API_KEY"
    assert [mine[f"demo-steps-{n}"].max_steps for n in (1, 2, 5)] == [1, 2, 5]
    assert {mine[f"demo-steps-{n}"].runs_per_item for n in (1, 2, 5)} == {1}
    (lesion,) = load_benchmarks(out).values()
    assert lesion.name == "demo-lesion" and Path(lesion.items) == overlay_path().parent / "lesion_items.csv"


def test_a_relative_items_path_of_the_given_file_still_points_at_its_file(tmp_path: Path) -> None:
    extra = "\nbenchmarks:\n  mine:\n    items: cohort/items.csv\n    answer: label\n    metric: accuracy\n"
    given = given_file(tmp_path, extra=extra)
    out = compose(given, tmp_path / "elsewhere" / "demo-experiments.yaml")
    assert Path(load_benchmarks(out)["mine"].items) == given.parent / "cohort" / "items.csv"


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ("  demo-steps-2:\n    agent: random\n", "experiment(s) ['demo-steps-2']"),
        ("benchmarks:\n  demo-lesion: {items: x.csv, answer: label, metric: accuracy}\n", "['demo-lesion']"),
    ],
)
def test_a_name_the_demo_declares_itself_is_refused_naming_both_files(
    tmp_path: Path, extra: str, said: str
) -> None:
    given = given_file(tmp_path, extra="\n" + extra if extra.startswith("bench") else extra)
    with pytest.raises(SystemExit) as refused:
        compose(given, tmp_path / "out.yaml")
    message = str(refused.value)
    assert str(given) in message and said in message and str(overlay_path()) in message
    assert not (tmp_path / "out.yaml").exists()


def test_a_given_file_without_demo_giant_says_so(tmp_path: Path) -> None:
    given = tmp_path / "experiments.yaml"
    given.write_text(yaml.safe_dump({"experiments": {"random": {"agent": "random"}}}))
    with pytest.raises(SystemExit, match="declares no 'demo-giant' experiment"):
        compose(given, tmp_path / "out.yaml")


def _lesion_request(image: Image.Image) -> RecordedRequest:
    """The plug-in's answering request (Chat Completions): the lesion question and one crop."""
    question = (REPO / "giant_assets" / "demo" / "lesion_items.csv").read_text().splitlines()[1]
    text = question.split('"')[1] + "\n\nSelect from the following options:\n1. yes\n2. no\n"
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    content = [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": url}}]
    body = {"model": "m", "messages": [{"role": "user", "content": content}]}
    return RecordedRequest("/v1/chat/completions", {}, json.dumps(body).encode(), 0.0)


@pytest.mark.parametrize(
    ("dark_rows", "answer"),
    [(0, 2), (6, 2), (10, 1), (50, 1)],  # of 100 rows: 0 %, 6 % (under the 8 % bar), 10 %, 50 % -> yes = 1
)
def test_the_lesion_question_is_answered_yes_only_when_a_lesion_fills_the_view(
    dark_rows: int, answer: int
) -> None:
    """A 100 x 100 view of tissue-grey (luma 180) with ``dark_rows`` rows of lesion-dark (luma 65)."""
    image = Image.new("L", (100, 100), 180)
    image.paste(65, (0, 0, 100, dark_rows))
    reply = demo_policy(_lesion_request(image.convert("RGB")))
    assert reply.answer == answer
