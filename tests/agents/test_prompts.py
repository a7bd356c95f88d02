"""Prompt files: ``giant-prompts import`` on a fixture repository in the official repository's shape
(our own texts), the imported texts sent at the loopback server, and the prompts in ``config_hash``."""

from __future__ import annotations

import asyncio
import textwrap
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from giant_assets.agents.pricing import ModelPrice, PriceTable
from giant_assets.agents.prompt_import import CLAUDE_AGENT, GPT_AGENT, main
from giant_assets.agents.registry import make_agent
from giant_assets.demo.scripted import Reply, ScriptedModelServer, answer_reply
from giant_assets.experiments.prompts import BUILT_IN, load_prompt_file
from giant_assets.experiments.spec import Experiment
from giant_assets.runs.agent_api import AgentItem
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.slides import write_pyramidal_slide

ROOT = Path(__file__).resolve().parents[2]
# A module in the shape of the official GPT agent: module-level prompt constants with the official
# placeholders, the texts built inside the agent's methods. Running it would leave a marker file.
GPT_SOURCE = '''\
import pathlib
pathlib.Path(__file__ + ".ran").write_text("executed")
import a_module_that_does_not_exist

SYSTEM_PROMPT_MULTI_STEP = """Fixture navigator {{sic}}. Slide {w0} by {h0}.
Budget {steps_remaining}, zooms {analysis_steps}.{context_limitation}{note_tool_guidance}
<report>findings{note_reminder}</report><response>answer</response>
"""

SYSTEM_PROMPT_SINGLE_STEP = """Fixture single look {w0}x{h0}: <report>..</report><response>..</response>"""


class FixtureAgent:
    def __init__(self):
        self.tools = [{
            "type": "function", "name": "slide_zoom", "description": "Fixture zoom {sic}.",
            "parameters": {"type": "object", "properties": {
                "x0": {"type": "integer", "description": "fx0"},
                "y0": {"type": "integer", "description": "fy0"},
                "w": {"type": "integer", "description": "fw"},
                "h": {"type": "integer", "description": "fh"},
            }, "required": ["x0", "y0", "w", "h"]},
        }]
        self.tools.append({
            "type": "function", "name": "note", "description": "Fixture note.",
            "parameters": {
                "type": "object", "properties": {"observation": {"type": "string", "description": "fo"}}
            },
        })

    def _initialize_conversation(self):
        context_limitation = ""
        if self.max_images_in_context is not None:
            context_limitation = f"\\nKEEP: overview + {self.max_images_in_context - 1} latest."
        note_tool_guidance = ""
        note_reminder = ""
        if self.enable_note_tool:
            note_tool_guidance = "\\nNOTES: use note."
            if self.max_images_in_context is not None:
                note_tool_guidance += " Pruned images: notes matter."
            note_reminder = "\\n- cite notes"

    def serve(self, args, observation, call_id):
        out = {"type": "function_call_output", "call_id": call_id, "output": f"Kept: {observation}"}
        steps_remaining = self.MAX_ITERS - 1
        w0_full, h0_full = self.slide.dimensions
        reminder_text = (
            f"Fixture region ({args['x0']},{args['y0']}) {args['w']}x{args['h']}. "
            f"Slide {w0_full} by {h0_full}. Calls left {steps_remaining}."
        )
        if self.notes:
            reminder_text += f"\\n\\nNotes ({len(self.notes)}):\\n"
            for i, note in enumerate(self.notes, 1):
                reminder_text += f"{i}) {note['observation']}\\n"
        try:
            pass
        except Exception as e:
            out = {"type": "function_call_output", "call_id": call_id, "output": f"Oops: {str(e)}"}
        return out, reminder_text
'''
CLAUDE_SOURCE = '''\
raise SystemExit("never run")
SYSTEM_PROMPT_MULTI_STEP = """Fixture navigator, one call a turn. Slide {w0} by {h0}.\
 {steps_remaining}/{analysis_steps}{context_limitation}{note_tool_guidance}{note_reminder}"""


def reject(tool_use_id):
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": "Fixture: extra call ignored."}
'''


def fixture_repo(root: Path, gpt: str = GPT_SOURCE, claude: str | None = CLAUDE_SOURCE) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / GPT_AGENT).write_text(gpt)
    if claude is not None:
        (root / CLAUDE_AGENT).write_text(claude)
    return root


def test_import_reads_the_fixture_clone_without_running_it(tmp_path: Path, capsys) -> None:
    repo = fixture_repo(tmp_path / "GIANT")
    out = tmp_path / "prompts" / "official.yaml"
    assert main(["import", "--repo", str(repo), "--out", str(out)]) == 0
    assert not list(repo.glob("*.ran"))  # parsed, never executed
    assert "prompt_file: " in capsys.readouterr().out
    p = load_prompt_file(out)
    assert p.multi_step == (
        "Fixture navigator {{sic}}. Slide {width} by {height}.\n"
        "Budget {max_steps}, zooms {analysis_steps}.{context_limitation}{note_guidance}\n"
        "<report>findings{note_reminder}</report><response>answer</response>\n"
    )
    assert p.single_step == "Fixture single look {width}x{height}: <report>..</report><response>..</response>"
    assert p.multi_step_first_call == (
        "Fixture navigator, one call a turn. Slide {width} by {height}. {max_steps}/{analysis_steps}"
        "{context_limitation}{note_guidance}{note_reminder}"
    )
    assert p.tool_result == (
        "Fixture region ({x0},{y0}) {w}x{h}. Slide {width} by {height}. Calls left {calls_left}."
    )
    assert (p.notes_header, p.note_line) == ("\n\nNotes ({count}):\n", "{index}) {observation}\n")
    assert p.context_limitation == "\nKEEP: overview + {images_kept} latest."
    assert p.note_guidance == "\nNOTES: use note."
    assert p.note_guidance_pruned == " Pruned images: notes matter."
    assert p.note_reminder == "\n- cite notes"
    assert (p.note_recorded, p.tool_error) == ("Kept: {observation}", "Oops: {error}")
    assert p.extra_call_ignored == "Fixture: extra call ignored."
    assert (p.zoom_description, p.zoom_x0, p.zoom_y0, p.zoom_w, p.zoom_h) == (
        "Fixture zoom {{sic}}.", "fx0", "fy0", "fw", "fh"
    )  # fmt: skip
    assert (p.note_description, p.note_observation) == ("Fixture note.", "fo")
    # again: refused without --force, written with it
    assert main(["import", "--repo", str(repo), "--out", str(out)]) == 2
    assert main(["import", "--repo", str(repo), "--out", str(out), "--force"]) == 0


def test_imported_prompts_are_what_the_agent_sends(tmp_path: Path) -> None:
    out = tmp_path / "official.yaml"
    assert main(["import", "--repo", str(fixture_repo(tmp_path / "GIANT")), "--out", str(out)]) == 0
    slide = write_pyramidal_slide(tmp_path / "s.tiff", ONE_LESION_DESIGN, levels=4)
    script = [
        Reply("n", calls=(("note", {"observation": "glands"}),)),
        Reply("z", crop=(0, 0, 1024, 1024)),
        answer_reply("1"),
    ]
    with ScriptedModelServer(script) as srv:
        exp = Experiment(
            name="imp", agent="giant", model="scripted-vlm", base_url=srv.openai_base_url, max_steps=4,
            prompt_file=str(out), note_tool=True, max_images_in_context=3, reasoning_effort=None,
        )  # fmt: skip
        agent = make_agent(exp, pd.DataFrame(), None)
        agent.prices = PriceTable({"scripted-vlm": ModelPrice(1.0, 1.0)})

        async def go():
            try:
                return await agent.answer(AgentItem("tcga", "1", "Q?", None, str(slide)), 0)
            finally:
                await agent.aclose()

        ans = asyncio.run(go())
    assert ans.error is None
    assert srv.requests[0].json["input"][0] == {
        "role": "system",
        "type": "message",
        "content": "Fixture navigator {sic}. Slide 4096 by 3072.\nBudget 4, zooms 3.\nKEEP: overview + 2 "
        "latest.\nNOTES: use note. Pruned images: notes matter.\n<report>findings\n- cite notes</report>"
        "<response>answer</response>\n",
    }
    zoom, note = srv.requests[0].json["tools"]
    assert (zoom["name"], zoom["description"], note["description"]) == (
        "slide_zoom",
        "Fixture zoom {sic}.",
        "Fixture note.",
    )
    assert [zoom["parameters"]["properties"][k]["description"] for k in ("x0", "y0", "w", "h")] == [
        "fx0", "fy0", "fw", "fh"
    ]  # fmt: skip
    assert note["parameters"]["properties"]["observation"]["description"] == "fo"
    tools = [t.texts for t in srv.requests[2].turns if t.role == "tool"]
    assert tools == [
        ("Kept: glands",),
        ("Fixture region (0,0) 1024x1024. Slide 4096 by 3072. Calls left 1.\n\nNotes (1):\n1) glands\n",),
    ]


def test_the_prompts_sent_are_in_the_config_hash(tmp_path: Path) -> None:
    out = tmp_path / "a" / "official.yaml"
    assert main(["import", "--repo", str(fixture_repo(tmp_path / "GIANT")), "--out", str(out)]) == 0
    base = Experiment(name="h", agent="giant", model="gpt-5")
    imported = base.model_copy(update={"prompt_file": str(out)})
    assert imported.config_hash() != base.config_hash()
    assert imported.answer_settings()["prompts_sha256"] == load_prompt_file(out).sha256()
    assert base.answer_settings()["prompts_sha256"] == BUILT_IN.sha256()
    moved = tmp_path / "b" / "renamed.yaml"
    moved.parent.mkdir()
    moved.write_bytes(out.read_bytes())
    assert base.model_copy(update={"prompt_file": str(moved)}).config_hash() == imported.config_hash()
    out.write_text(out.read_text().replace("Fixture region", "Fixture area"))  # same path, new text
    assert imported.config_hash() != base.model_copy(update={"prompt_file": str(moved)}).config_hash()
    # the official tool-call serving per provider is part of the settings too
    claude = Experiment(name="c", agent="giant", provider="anthropic", model="claude-sonnet-4-5")
    assert claude.answer_settings()["serve_calls"] == "first"
    assert base.answer_settings()["serve_calls"] == "all"
    assert claude.model_copy(update={"serve_calls": "first"}).config_hash() == claude.config_hash()
    assert claude.model_copy(update={"serve_calls": "all"}).config_hash() != claude.config_hash()
    assert base.model_copy(update={"note_tool": True}).config_hash() != base.config_hash()
    # the time limits decide no answer: not in the hash
    assert base.model_copy(update={"attempt_timeout_s": 60.0}).config_hash() == base.config_hash()


def test_import_errors_name_the_file_and_what_is_missing(tmp_path: Path, capsys) -> None:
    out = tmp_path / "p.yaml"
    no_single = GPT_SOURCE.replace("SYSTEM_PROMPT_SINGLE_STEP =", "OTHER =")
    repo = fixture_repo(tmp_path / "r1", no_single)
    assert main(["import", "--repo", str(repo), "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and GPT_AGENT in err and "SYSTEM_PROMPT_SINGLE_STEP" in err
    odd = GPT_SOURCE.replace("Slide {w0} by {h0}.", "Slide {w0} at {magnification}.")
    assert main(["import", "--repo", str(fixture_repo(tmp_path / "r2", odd)), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "SYSTEM_PROMPT_MULTI_STEP" in err and "{magnification} has no platform equivalent" in err
    assert main(["import", "--repo", str(tmp_path / "nowhere"), "--out", str(out)]) == 1
    assert "cannot be read" in capsys.readouterr().err and not out.exists()
    # without the Claude agent the one-call variant is the multi-step prompt itself
    assert main(["import", "--repo", str(fixture_repo(tmp_path / "r3", claude=None)), "--out", str(out)]) == 0
    p = load_prompt_file(out)
    assert p.multi_step_first_call == p.multi_step and p.extra_call_ignored == BUILT_IN.extra_call_ignored
    assert "extra_call_ignored" in capsys.readouterr().out  # said to be the built-in text


def test_prompt_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("tool_result: 'left {calls_left}, {budget}'\n")
    with pytest.raises(ValueError, match=r"bad.yaml: tool_result has unknown placeholder \{budget\}"):
        load_prompt_file(bad)
    bad.write_text("system: hello\n")
    with pytest.raises(ValueError, match="bad.yaml: unknown field 'system'"):
        load_prompt_file(bad)
    with pytest.raises(ValueError, match="prompt_file .*no.yaml: cannot be read"):
        Experiment(name="x", agent="giant", model="m", prompt_file=str(tmp_path / "no.yaml")).config_hash()


def test_the_command_is_installed() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["giant-prompts"] == "giant_assets.agents.prompt_import:main"


def test_built_in_prompts_give_the_official_instructions() -> None:
    """The platform's own words carry what the official multi-step prompt demands."""
    text = BUILT_IN.multi_step.format(
        width=4096, height=3072, max_steps=20, analysis_steps=19, image_size=1000,
        context_limitation="", note_guidance="", note_reminder="",
    )  # fmt: skip
    demands = ("4096 × 3072", "20 steps", "up to 19", "as many of your steps as you can", "do not hurry",
               "thoroughness matters more than speed", "<report>", "<response>")  # fmt: skip
    for demand in demands:
        assert demand in text, demand
    assert "ONE TOOL CALL PER TURN" in BUILT_IN.multi_step_first_call
    assert textwrap.dedent(BUILT_IN.single_step).count("{") == 0  # nothing to fill: no size, no budget


def test_experiments_check_reads_the_prompt_files(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")  # the check also refuses an unset key
    from giant_assets.platform import experiments_cli

    prompts = tmp_path / "official.yaml"
    declared = tmp_path / "experiments.yaml"
    declared.write_text(
        "experiments:\n  mine: {agent: giant, provider: openai, model: gpt-5, budget_usd: 5, "
        f"prompt_file: '{prompts}'}}\n"
    )
    assert experiments_cli.main(["check", "--file", str(declared)]) == 1
    err = capsys.readouterr().err
    assert f"{declared}: experiment 'mine': prompt_file {prompts}: cannot be read" in err
    prompts.write_text("tool_result: 'Region {x0},{y0}; {calls_left} left.'\n")
    assert experiments_cli.main(["check", "--file", str(declared)]) == 0
