"""What the official code sends, item by item of issue 29, at the recording loopback model server.

Each test declares an experiment with its defaults (``registry.make_agent`` / ``make_chat_model``), runs
it against ``ScriptedModelServer`` and checks the recorded request field by field against the value
the official code (KianWeihrauch/GIANT: its agents, ``scripts/run_benchmark.py`` and ``util.py``) sends,
written out here independently: the benchmark script's option loop, ``max_tokens=30000``,
``summary: "detailed"``, the SDKs' 600 s and 1 + 2 attempts, ``read_region`` at ``round(w / ds)`` and
``convert("RGB")``, the Claude agent's pruning of top-level user images only, ``max_tokens=4096``.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import numpy as np
import openslide
import pandas as pd
import pytest
import tifffile
from PIL import Image

from giant_assets.agents.baselines import ThumbnailAgent
from giant_assets.agents.pricing import ModelPrice, PriceTable
from giant_assets.agents.prompt_import import BENCHMARK_SCRIPT
from giant_assets.agents.prompt_import import main as prompts_main
from giant_assets.agents.providers import make_chat_model
from giant_assets.agents.registry import make_agent
from giant_assets.demo.scripted import Reply, ScriptedModelServer, answer_reply, crop_reply
from giant_assets.eval.scoring import write_results_json
from giant_assets.experiments.prompts import prompt_provenance
from giant_assets.experiments.spec import Experiment
from giant_assets.multipathqa.benchmarks import BENCHMARKS
from giant_assets.multipathqa.loading import parse_items
from giant_assets.runs.agent_api import AgentAnswer
from giant_assets.runs.runner import agent_item
from giant_assets.slides.guides import draw_guides
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.agents.test_prompts import fixture_repo
from tests.support.slides import write_pyramidal_slide

PRICES = PriceTable(
    {m: ModelPrice(1.0, 1.0) for m in ("scripted-vlm", "gpt-5", "gpt-4o", "claude-sonnet-4-5")}
)
OPTIONS = ["Low", "Medium", "High", "Cannot determine"]
QUESTION = "What is the level of mitotic activity in the abnormal tissue?"
# a benchmark script in the official file's layout, in our own words (the official text is not shipped)
SCRIPT_SOURCE = '''\
raise SystemExit("parsed, never run")
TCGA_SLIDEBENCH_PROMPT = """Fixture asks: {question}

Fixture choices:
{options}
Fixture wants {{"answer": K}}, K from the list.
"""

TCGA_EXPERT_VQA_PROMPT = """Expert fixture: {question}
{options}
Reply {{"answer": K}}."""
'''


def official_options(options: list[str]) -> str:
    """The benchmark script's ``{options}``: one ``N. option`` line per option, each with its newline."""
    text = ""
    for i, option in enumerate(options):
        text += f"{i + 1}. {option}\n"
    return text


@pytest.fixture(scope="module")
def slide_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("official") / "s.tiff", ONE_LESION_DESIGN, levels=4)


def experiment(srv: ScriptedModelServer, provider: str = "openai", **fields) -> Experiment:
    base = srv.base_url if provider == "anthropic" else srv.openai_base_url
    fields.setdefault("model", "claude-sonnet-4-5" if provider == "anthropic" else "gpt-5")
    return Experiment(
        name="o", agent=fields.pop("agent", "giant"), provider=provider, base_url=base, **fields
    )


def run(exp: Experiment, item) -> AgentAnswer:
    agent = make_agent(exp, pd.DataFrame(), None)
    agent.prices = PRICES

    async def go():
        try:
            return await agent.answer(item, 0)
        finally:
            await agent.aclose()

    return asyncio.run(go())


def item_row(slide: Path, benchmark: str, prompt: str, options: list[str] | None) -> dict:
    """One benchmark_items row as the loader makes it from a MultiPathQA CSV row."""
    raw = pd.DataFrame(
        [{
            "benchmark_name": benchmark, "benchmark_id": "q-1", "image_path": slide.name,
            "answer": "2", "options": repr(options) if options else "",
            "metric_type": BENCHMARKS[benchmark].metric_type, "prompt": prompt,
            "csv_row": 2,
        }]
    ).astype(str)  # fmt: skip
    items, errors = parse_items(raw, "fixture.csv")
    assert errors == []
    return items.iloc[0].to_dict() | {"wsi_path": str(slide)}


def image_bytes(request) -> list[bytes]:
    """The encoded images of a recorded request, in order, as sent."""
    return [b for turn in request.turns for b in turn.images]


def first_turn_text(srv: ScriptedModelServer) -> str:
    (user,) = [t for t in srv.requests[0].turns if t.role == "user"]
    (text,) = user.texts
    return text


# ---- 1. the first user turn


def test_template_benchmarks_list_the_options_as_the_benchmark_script(slide_path: Path) -> None:
    """gtex/tcga: the CSV template filled as the script fills it (a newline after every option)."""
    template = (
        'Which organ?\n\nSelect from the following options:\n{options}\n\nAnswer ```{{"answer": N}}```\n'
    )
    row = item_row(slide_path, "tcga", template, OPTIONS)
    assert row["prompt"] == template.format(options=official_options(OPTIONS))
    # an items table loaded by an older version (options joined without the last newline) sends the same
    stale = row | {"prompt": template.format(options="\n".join(official_options(OPTIONS).splitlines()))}
    for loaded in (row, stale):
        with ScriptedModelServer([answer_reply("2")]) as srv:
            assert run(experiment(srv), agent_item(loaded)).error is None
        assert first_turn_text(srv) == template.format(options=official_options(OPTIONS))
        assert "4. Cannot determine\n\n\nAnswer" in first_turn_text(srv)


def test_question_benchmarks_use_the_imported_script_templates(slide_path: Path, tmp_path: Path) -> None:
    """tcga_slidebench / tcga_expert_vqa: with a prompt file that ``giant-prompts import`` wrote from a
    clone, the script's template filled with the CSV's question and options; built in, the item's
    prompt in the platform's words, and the leaderboard's provenance says which."""
    repo = fixture_repo(tmp_path / "GIANT")
    (repo / BENCHMARK_SCRIPT).parent.mkdir(parents=True)
    (repo / BENCHMARK_SCRIPT).write_text(SCRIPT_SOURCE)
    out = tmp_path / "official.yaml"
    assert prompts_main(["import", "--repo", str(repo), "--out", str(out)]) == 0
    consts: dict[str, str] = {}
    exec(SCRIPT_SOURCE.split("\n", 1)[1], {}, consts)  # our fixture's constants: the oracle's templates
    for benchmark, constant in (
        ("tcga_slidebench", "TCGA_SLIDEBENCH_PROMPT"),
        ("tcga_expert_vqa", "TCGA_EXPERT_VQA_PROMPT"),
    ):
        row = item_row(slide_path, benchmark, QUESTION, OPTIONS)
        with ScriptedModelServer([answer_reply("2"), answer_reply("2")]) as srv:
            assert run(experiment(srv, prompt_file=str(out)), agent_item(row)).error is None
            assert run(experiment(srv), agent_item(row)).error is None
        imported, built_in = (
            [t.texts[0] for t in r.turns if t.role == "user"][0] for r in srv.requests
        )  # fmt: skip
        assert imported == consts[constant].format(question=QUESTION, options=official_options(OPTIONS))
        assert built_in == row["prompt"] and built_in.startswith(QUESTION + "\n\nOptions:\n1. Low\n")
    sources = {"imported": prompt_provenance(str(out)), "built-in": prompt_provenance()}
    (path,) = write_results_json(
        pd.DataFrame({"experiment": ["imported"], "benchmark_name": ["tcga_slidebench"]}),
        pd.DataFrame({"prompt": [QUESTION]}),
        tmp_path / "results",
        tmp_path / "bindings",
        prompts=sources,
    )
    said = json.loads(path.read_text())["provenance"]["prompts"]["first_user_turn"]
    assert said["tcga_slidebench"].startswith("official, from giant-prompts import of ")
    assert sources["built-in"]["first_user_turn"] == {
        "tcga_slidebench": "built in: the platform's own words, not the official text",
        "tcga_expert_vqa": "built in: the platform's own words, not the official text",
    }


# ---- 2, 5. request options


def test_claude_asks_30000_tokens_and_gpt5_a_detailed_summary(slide_path: Path) -> None:
    row = item_row(slide_path, "tcga_expert_vqa", QUESTION, OPTIONS)
    with ScriptedModelServer([answer_reply("1")]) as srv:
        assert run(experiment(srv, "anthropic"), agent_item(row)).error is None
    body = srv.requests[0].json
    assert body["max_tokens"] == 30000 and body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    with ScriptedModelServer([answer_reply("1")]) as srv:
        assert run(experiment(srv), agent_item(row)).error is None
    body = srv.requests[0].json
    assert body["reasoning"] == {"effort": "high", "summary": "detailed"}
    assert "max_output_tokens" not in body  # the official GPT agent sends none


# ---- 3. per-request timeout and attempts


@pytest.mark.parametrize(("attempts", "sent"), [(None, 3), (2, 2)])
def test_timeout_and_attempts_per_request(slide_path: Path, attempts: int | None, sent: int) -> None:
    """Every call failing 503: the SDKs' 1 + 2 attempts, each with the SDKs' 600 s timeout."""
    fail = Reply(status=503, headers={"retry-after-ms": "1"}, text="overloaded (scripted)")
    row = item_row(slide_path, "tcga_expert_vqa", QUESTION, OPTIONS)
    extra = {} if attempts is None else {"request_attempts": attempts}
    with ScriptedModelServer([fail] * 5) as srv:
        answer = run(experiment(srv, **extra), agent_item(row))
    assert answer.error is not None and "503" in answer.error
    assert len(srv.requests) == sent
    assert {r.headers["x-stainless-read-timeout"] for r in srv.requests} == {"600.0"}


# ---- 4. pixels read above level 0


def official_view(slide: Path, box: tuple[int, int, int, int], level: int, target: int) -> bytes:
    """``util.crop_to_image_with_guides`` as the official code computes it: ``read_region`` of
    ``round(w / ds)`` x ``round(h / ds)``, ``convert("RGB")``, resized to ``round(side x target /
    long side)`` only when larger than the target; then our guides (identical, checked elsewhere)."""
    with openslide.OpenSlide(str(slide)) as s:
        ds = float(s.level_downsamples[level])
        size = (max(1, round(box[2] / ds)), max(1, round(box[3] / ds)))
        read = s.read_region(box[:2], level, size).convert("RGB")
    if max(read.size) > target:
        scale = target / max(read.size)
        read = read.resize(
            (max(1, round(read.width * scale)), max(1, round(read.height * scale))), Image.Resampling.LANCZOS
        )
    image, _ = draw_guides(read, box)
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=75)
    return buf.getvalue()


def test_a_level_1_crop_reads_the_official_pixels(slide_path: Path) -> None:
    """Claude (500 px): the box 1177 x 787 is read at level 1 as 588 x 394 (the ceiling read 589 x 394)
    and shown at 500 x 335 (scaled from the box itself: 500 x 334)."""
    box = (1000, 600, 1177, 787)
    row = item_row(slide_path, "tcga_expert_vqa", QUESTION, OPTIONS)
    with ScriptedModelServer([crop_reply(*box), answer_reply("1")]) as srv:
        answer = run(experiment(srv, "anthropic"), agent_item(row))
    assert answer.error is None and answer.steps[1].level == 1 and answer.steps[1].image_size == [500, 335]
    crop = image_bytes(srv.requests[1])[-1]
    assert crop == official_view(slide_path, box, 1, 500)


# ---- 6. Claude's pruning


@pytest.mark.parametrize(("prune", "images"), [(None, [1, 2, 3, 4]), (True, [1, 2, 2, 2])])
def test_claude_pruning_keeps_tool_result_images(slide_path: Path, prune: bool | None, images: list) -> None:
    """max_images_in_context 2: the official Claude agent counts only top-level user images (the
    overview), so no crop ever leaves; ``prune_tool_images: true`` prunes as the GPT agent."""
    row = item_row(slide_path, "tcga_expert_vqa", QUESTION, OPTIONS)
    script = [crop_reply(0, 0, 1024, 1024), crop_reply(1024, 0, 1024, 1024), crop_reply(0, 1024, 512, 512)]
    with ScriptedModelServer([*script, answer_reply("1")]) as srv:
        exp = experiment(srv, "anthropic", max_images_in_context=2, prune_tool_images=prune)
        assert run(exp, agent_item(row)).error is None
    assert [len(r.images) for r in srv.requests] == images
    assert "only the 1 most recently zoomed" in srv.requests[0].json["system"][0]["text"]


# ---- 7. the Chat Completions baseline, transparent areas


def test_chat_thumbnail_baseline_asks_4096_tokens(slide_path: Path) -> None:
    row = item_row(slide_path, "tcga_expert_vqa", QUESTION, OPTIONS)
    with ScriptedModelServer([Reply('{"answer": 2}')]) as srv:
        exp = experiment(srv, agent="thumbnail", api="chat", model="gpt-4o")
        agent = ThumbnailAgent(make_chat_model(exp, None), exp, PRICES)

        async def go():
            try:
                return await agent.answer(agent_item(row), 0)
            finally:
                await agent.aclose()

        assert asyncio.run(go()).error is None
    body = srv.requests[0].json
    assert body["max_tokens"] == 4096 and "max_completion_tokens" not in body


@pytest.fixture(scope="module")
def sparse_slide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pyramid whose first tile of every level is absent (offset and byte count 0): OpenSlide reads it
    as transparent."""
    path = write_pyramidal_slide(tmp_path_factory.mktemp("sparse") / "s.tiff", ONE_LESION_DESIGN, levels=4)
    with tifffile.TiffFile(path, mode="r+b") as tif:
        for page in tif.pages:
            for tag in ("TileOffsets", "TileByteCounts"):
                values = list(page.tags[tag].value)
                values[0] = 0
                page.tags[tag].overwrite(values)
    return path


def test_transparent_areas_are_black_as_officially(sparse_slide: Path) -> None:
    """The crop over the missing tile is the official read (``convert("RGB")``): black there."""
    box = (0, 0, 2048, 2048)  # read at level 1 (ds 2): its missing tile is the image's top-left 125 px
    row = item_row(sparse_slide, "tcga_expert_vqa", QUESTION, OPTIONS)
    with ScriptedModelServer([crop_reply(*box), answer_reply("1")]) as srv:
        answer = run(experiment(srv, "anthropic"), agent_item(row))
    assert answer.error is None and answer.steps[1].level == 1
    crop = image_bytes(srv.requests[1])[-1]
    assert crop == official_view(sparse_slide, box, 1, 500)
    pixels = np.asarray(Image.open(io.BytesIO(crop)).convert("L"), dtype=np.float64)
    assert pixels[30:90, 30:90].mean() < 20  # black, not white (between the guides and the label)
    assert pixels[200:240, 200:240].mean() > 60  # the tiles that are there


def test_guide_labels_round_as_the_official_code() -> None:
    """``add_position_guides`` takes ``w_full = width x down`` first, then ``int(frac x w_full)``:
    for a 1390 px box shown at 1000 px, 3/5 of the way is 3255 (``int(0.6 x 1000 x 1.39)`` is 3254)."""
    box, shown = (2421, 209, 1390, 1237), (1000, 890)
    _, guides = draw_guides(Image.new("RGB", shown), box)
    down = max(box[2:]) / max(shown)
    w_full, h_full = shown[0] * down, shown[1] * down
    fracs = (0.2, 0.4, 0.6, 0.8)
    assert (
        [g.level0 for g in guides.x] == [box[0] + int(f * w_full) for f in fracs] == [2699, 2977, 3255, 3533]
    )
    assert [g.level0 for g in guides.y] == [box[1] + int(f * h_full) for f in fracs]


def test_message_items_and_text_results_are_shaped_as_officially(slide_path: Path) -> None:
    """Responses: the system and user items carry ``"type": "message"``; Messages: a text-only tool
    result (the ignored extra call) is a string, a crop's result a list of text and image."""
    row = item_row(slide_path, "tcga_expert_vqa", QUESTION, OPTIONS)
    with ScriptedModelServer([answer_reply("1")]) as srv:
        assert run(experiment(srv), agent_item(row)).error is None
    system, user = srv.requests[0].json["input"][:2]
    assert (system["role"], system["type"], user["role"], user["type"]) == (
        "system",
        "message",
        "user",
        "message",
    )
    assert isinstance(system["content"], str)
    two = Reply("Two.", calls=(("slide_zoom", {"x0": 0, "y0": 0, "w": 900, "h": 900}),) * 2)
    with ScriptedModelServer([two, answer_reply("1")]) as srv:
        assert run(experiment(srv, "anthropic"), agent_item(row)).error is None
    results = [b for b in srv.requests[1].json["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert [type(r["content"]).__name__ for r in results] == ["list", "str"]
    assert [b["type"] for b in results[0]["content"]] == ["text", "image"]


# ---- issue 38: the last differences (docs/agent-protocol.md's table)


def test_claude_reply_blocks_go_back_as_the_api_sent_them(slide_path: Path) -> None:
    """The official Claude agent appends ``response.content`` (the SDK's blocks) to its conversation,
    which the SDK sends back with every field the API set (``exclude_unset``), ``citations: null``
    included; so do we: the assistant turn of the next request is the reply's content, verbatim."""
    blocks = [
        {"type": "thinking", "thinking": "look closer", "signature": "c2lnLTE="},
        {"type": "text", "text": "Let me zoom.", "citations": None},
        {"type": "tool_use", "id": "toolu_01", "name": "slide_zoom",
         "input": {"x0": 0, "y0": 0, "w": 2048, "h": 1536}},
    ]  # fmt: skip
    first = {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
             "content": blocks, "stop_reason": "tool_use", "stop_sequence": None,
             "usage": {"input_tokens": 900, "output_tokens": 30}}  # fmt: skip
    row = item_row(slide_path, "tcga_expert_vqa", QUESTION, OPTIONS)
    with ScriptedModelServer([Reply(body=json.dumps(first).encode()), answer_reply("1")]) as srv:
        assert run(experiment(srv, "anthropic"), agent_item(row)).error is None
    turns = srv.requests[1].json["messages"]
    (assistant,) = [t for t in turns if t["role"] == "assistant"]
    assert assistant["content"] == blocks


def azure_giant(srv: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch, **fields) -> Experiment:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-key-SECRET-0123456789abcdef0123456789")
    return Experiment(name="az", agent="giant", provider="azure", azure_endpoint=srv.base_url,
                      model="gpt-5", deployment="my-gpt5", **fields)  # fmt: skip


def test_giant_over_azure_sends_reasoning_unless_asked_for_the_official_azure_request(
    slide_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The official GPT agent builds ``{input, model, tools}`` and adds ``reasoning: {effort: high,
    summary: detailed}`` only for the names of its OpenAI list, which it never sends to Azure: over Azure
    it sends no reasoning. Our default sends it (as over OpenAI: a row of the table);
    ``reasoning_effort: null`` is the official Azure request (plus the wire-only ``store: false`` and
    ``prompt_cache_key``, rows of the table too), under another result set."""
    row = item_row(slide_path, "tcga_expert_vqa", QUESTION, OPTIONS)
    with ScriptedModelServer([answer_reply("1")]) as srv:
        default = azure_giant(srv, monkeypatch)
        assert run(default, agent_item(row)).error is None
    body = srv.requests[0].json
    assert body["reasoning"] == {"effort": "high", "summary": "detailed"}
    with ScriptedModelServer([answer_reply("1")]) as srv:
        official = azure_giant(srv, monkeypatch, reasoning_effort=None)
        assert run(official, agent_item(row)).error is None
    (request,) = srv.requests
    assert (request.path, request.query) == ("/openai/responses", {"api-version": "2025-03-01-preview"})
    assert set(request.json) == {"input", "model", "tools", "store", "prompt_cache_key"}
    assert request.json["model"] == "my-gpt5" and request.json["store"] is False
    assert official.config_hash() != default.config_hash()
