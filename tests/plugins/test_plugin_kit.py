"""A plug-in built by ``registry.make_agent`` runs against the loopback scripted model on a real
pyramidal slide: the images it sends are GIANT's (the viewer re-renders them byte for byte), its steps
carry the tokens and cost of the replies, and what it raises fails its run only, recorded."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from giant_assets.agents.cell import CellFailed, run_cell
from giant_assets.agents.registry import make_agent
from giant_assets.demo.scripted import RecordedRequest, Reply, ScriptedModelServer, demo_policy
from giant_assets.experiments.plugins import PluginError
from giant_assets.experiments.spec import Experiment
from giant_assets.report.sent_images import render_sent_images
from giant_assets.report.trajectory_images import draw_run
from giant_assets.report.viewer.overlays import run_overlays
from giant_assets.runs.agent_api import AgentAnswer, AgentItem
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.slides import write_pyramidal_slide

PACKAGES = Path(__file__).parent / "packages"
QUESTION = 'Which organ?\n1. Lung\n2. Liver\n3. Skin\nAnswer as JSON {"answer": N}.'
PRICE = {"input_per_mtok": 3.0, "output_per_mtok": 7.0}


@pytest.fixture(autouse=True)
def plugin_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PACKAGES))


@pytest.fixture(scope="module")
def slide_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("lab") / "slide.tiff", ONE_LESION_DESIGN, levels=4)


def experiment(server: ScriptedModelServer, agent: str = "lab_agent:make_agent", **fields) -> Experiment:
    return Experiment(
        name="lab", agent=agent, model="scripted-lab", base_url=server.openai_base_url, prices=PRICE,
        image_size=640, **fields,
    )  # fmt: skip


def answer(exp: Experiment, item: AgentItem) -> AgentAnswer:
    async def go() -> AgentAnswer:
        agent = make_agent(exp, pd.DataFrame(), None)
        try:
            return await agent.answer(item, 0)
        finally:
            await agent.aclose()

    return asyncio.run(go())


def test_a_plugins_views_are_giants_and_its_steps_are_accounted(slide_path: Path, tmp_path: Path) -> None:
    item = AgentItem("tcga", "1", QUESTION, ["Lung", "Liver", "Skin"], str(slide_path))
    with ScriptedModelServer(rule=demo_policy) as server:
        exp = experiment(server)
        result = answer(exp, item)
        requests = list(server.requests)
    assert result.error is None and '"action": "answer"' in result.text
    assert [s.action for s in result.steps] == ["thumbnail", "crop", "answer"]
    # the images the server received are the ones the steps record (digests of the bytes on the wire)
    received = [hashlib.sha256(b).hexdigest() for r in requests for t in r.turns for b in t.images]
    overview, crop = result.steps[0], result.steps[1]
    # the second request repeats the overview, then holds the crop
    assert received == [overview.image_sha256[0], overview.image_sha256[0], crop.image_sha256[0]]
    # GIANT's long side and guides: the overview's long side is image_size, the box the whole slide
    assert max(overview.image_size) == 640 and overview.box == [0, 0, 4096, 3072]
    assert crop.box is not None and crop.box[2] > 0 and max(crop.image_size) <= 640
    # the viewer re-renders them through GIANT's code and finds the same bytes
    steps = result.steps_as_dicts()
    rendered = render_sent_images(exp, str(slide_path), [steps])[0]
    assert [(r.step, r.kind, r.verified) for r in rendered] == [(0, "thumbnail", True), (1, "crop", True)]
    pictures = draw_run(str(slide_path), steps, tmp_path / "pictures", experiment=exp)
    sent = [(p["kind"], p["step"], p.get("sha256"), p.get("verified")) for p in pictures[1:]]
    assert sent == [
        ("thumbnail", 0, overview.image_sha256[0], True), ("crop", 1, crop.image_sha256[0], True)
    ]  # fmt: skip
    # each model call's step: tokens as the server reported them, cost at the experiment's price
    calls = [s for s in result.steps if s.input_tokens]
    assert len(calls) == 2 == len(requests)
    for step in calls:
        assert step.cost_usd == pytest.approx((3.0 * step.input_tokens + 7.0 * step.output_tokens) / 1e6)
        assert step.http_attempts == 1 and step.latency_s > 0


@pytest.mark.parametrize(
    ("option", "recorded"),
    [
        ("raise_on", "raised RuntimeError: lab agent refuses item 1 (at "),
        ("exit_on", "raised SystemExit: 3 (at "),
        ("return_none_on", "answer() returned NoneType, not an AgentAnswer"),
    ],
)
def test_what_a_plugin_raises_fails_its_run_only(slide_path: Path, option: str, recorded: str) -> None:
    item = AgentItem("tcga", "1", QUESTION, ["Lung", "Liver", "Skin"], str(slide_path))
    with ScriptedModelServer(rule=demo_policy) as server:
        result = answer(experiment(server, agent_options={option: ["1"]}), item)
    assert result.error is not None and result.error.startswith("plug-in lab_agent:make_agent: ")
    assert recorded in result.error and result.text == "" and result.error_kind is None
    if option != "return_none_on":
        assert "lab_agent/__init__.py:" in result.error  # where it raised


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        ("lab_agent:broken_factory", "its factory raised ValueError: the lab factory is broken on purpose"),
        ("lab_agent:not_an_agent", "the factory returned str, which has no answer(item, run_index)"),
    ],
)
def test_a_factory_that_fails_is_refused_naming_the_plugin(agent: str, message: str) -> None:
    with ScriptedModelServer(rule=demo_policy) as server, pytest.raises(PluginError) as err:
        make_agent(experiment(server, agent=agent), pd.DataFrame(), None)
    assert f"plug-in {agent!r}: {message}" in str(err.value)


def test_a_cell_whose_plugin_factory_fails_is_refused_before_any_call(tmp_path: Path) -> None:
    with ScriptedModelServer(rule=demo_policy) as server:
        exp = experiment(server, agent="lab_agent:broken_factory")
        items = pd.DataFrame(columns=["benchmark_name", "benchmark_id", "prompt", "truth_label", "wsi_path"])
        with pytest.raises(CellFailed) as err:
            run_cell(exp, items, "tcga", tmp_path / "data", experiments_file="x.yaml", log=lambda _: None)
        assert server.requests == []
    source = PACKAGES / "lab_agent" / "__init__.py"
    line = next(n for n, text in enumerate(source.read_text().splitlines(), 1) if "broken on purpose" in text)
    assert str(err.value) == (
        "x.yaml: experiment 'lab': plug-in 'lab_agent:broken_factory': its factory raised ValueError: "
        f"the lab factory is broken on purpose (at {source}:{line})"
    )


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PROPOSED = [[2500, 900, 600, 500], [400, 1800, 800, 600]]  # level-0 boxes inside the 4096 x 3072 slide


def two_proposals(request: RecordedRequest) -> Reply:
    """The proposer (``scripted-lab``) crops PROPOSED one after the other; the answerer answers 2."""
    if request.json["model"] != "scripted-lab":
        return Reply('{"answer": 2}')
    x, y, w, h = PROPOSED[request.assistant_turns]
    return Reply(json.dumps({"action": "crop", "x": x, "y": y, "w": w, "h": h}))


def test_a_plugins_run_opens_in_deep_zoom_with_its_crops_in_step_order(
    slide_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """examples/two_model_agent run on the loopback model: the viewer's overlays of its steps are its two
    crops, numbered 1 and 2 in step order with the boxes proposed; its overview is no overlay."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    item = AgentItem("tcga", "1", QUESTION, ["Lung", "Liver", "Skin"], str(slide_path))
    with ScriptedModelServer(rule=two_proposals) as server:
        options = {"answerer": "scripted-answerer", "regions": 2}
        result = answer(experiment(server, "two_model_agent:make_agent", agent_options=options), item)
    assert result.error is None and result.text == '{"answer": 2}'
    steps = result.steps_as_dicts()
    assert [s["action"] for s in steps] == ["thumbnail", "crop", "crop", "answer"]
    assert run_overlays(steps, []) == [
        {"kind": "crop", "n": 1, "step": 1, "box": [2500.0, 900.0, 600.0, 500.0]},
        {"kind": "crop", "n": 2, "step": 2, "box": [400.0, 1800.0, 800.0, 600.0]},
    ]
