"""Hostile replies from a local OpenAI-format server on loopback, through the real SDK: a clear error or
a reported step, never a traceback or a silent misreading."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from giant_assets.agents.providers.local import text_tool_calls
from giant_assets.demo.scripted import RecordedRequest, Reply, ScriptedModelServer
from giant_assets.runs.extraction import extract_label
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.agents.test_local_servers import local_agent, run
from tests.support.slides import write_pyramidal_slide

DEPTH = 100_000
DEEP_CALL = (
    '<tool_call>{"name": "slide_zoom", "arguments": '
    + '{"x0": ' * DEPTH
    + "1"
    + "}" * DEPTH
    + "}</tool_call>\nI think option 1 fits."
)


@pytest.fixture(scope="module")
def slide_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "slide.tiff"
    return write_pyramidal_slide(path, ONE_LESION_DESIGN, levels=3)


@pytest.mark.parametrize(
    "body",
    [
        b'\xff\xfe{"id": "x"}',  # a UTF-16 byte-order mark on an odd number of bytes
        b'{"id": "chatcmpl-1", "choices": [{"message": {"content": "lung\xff"}}]}',  # a Latin-1 byte
        b'{"id": "chatcmpl-1", "choices": [{"message": {"content": "caf\xc3"}}]}',  # cut mid-character
    ],
    ids=["utf16-bom", "latin1-byte", "cut-utf8"],
)
def test_giant_run_reports_a_body_that_is_not_utf8(slide_path: Path, body: bytes) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    reply = Reply(body=body, headers={"Content-Type": "application/json"})
    with ScriptedModelServer(rule=lambda _: reply) as srv:
        result = subprocess.run(
            [str(Path(sys.executable).parent / "giant-run"), str(slide_path),
             "--question", "Which organ?", "--options", "Lung", "Liver",
             "--provider", "openai", "--server", "vllm", "--model", "Qwen/Qwen3-VL-8B-Instruct",
             "--base-url", srv.openai_base_url, "--image-size", "256", "--max-steps", "3"],
            capture_output=True, text=True, env=env, timeout=120, check=False,
        )  # fmt: skip
        requests = len(srv.requests)
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.returncode == 1
    assert "the body is not UTF-8 JSON" in result.stdout and "label: none" in result.stdout
    assert requests == 1  # a malformed 2xx body is not retried (the request was served and billed)


def test_a_tool_call_nested_too_deep_is_one_unusable_call_not_an_answer() -> None:
    calls = text_tool_calls(DEEP_CALL, {"slide_zoom"})
    assert len(calls) == 1 and calls[0].name == "slide_zoom" and calls[0].arguments is None
    block = DEEP_CALL.removeprefix("<tool_call>").split("</tool_call>")[0]
    assert calls[0].raw_arguments.startswith(f"unreadable <tool_call> block of {len(block):,} characters")
    assert [c.name for c in text_tool_calls("<tool_call>not json at all", {"slide_zoom"})] == ["(unnamed)"]
    # arguments as a JSON string nested too deep for json.loads
    deep_string = json.dumps({"name": "slide_zoom", "arguments": "[" * DEPTH + "]" * DEPTH})
    (call,) = text_tool_calls(f"<tool_call>{deep_string}</tool_call>", {"slide_zoom"})
    assert call.arguments is None


def test_the_agent_reports_the_deep_call_to_the_model_and_scores_the_final_answer(slide_path: Path) -> None:
    def rule(request: RecordedRequest) -> Reply:
        if request.assistant_turns == 0:
            return Reply(DEEP_CALL)
        return Reply("Liver architecture.", answer={"answer": 2})

    with ScriptedModelServer(rule=rule) as srv:
        ans = run(local_agent(srv, max_steps=4), slide_path)
        second = srv.requests[1].text
    errors = [s.error for s in ans.steps if s.error]
    assert len(errors) == 1
    assert errors[0].startswith("unusable tool call slide_zoom(unreadable <tool_call> block")
    assert "are not a JSON object" in second  # the model was told, in the tool result
    assert ans.error is None
    label = extract_label(ans.text, benchmark_name="tcga", options=["Lung", "Liver", "Skin"]).label
    assert label == 2


def test_a_deep_call_at_the_last_step_is_no_answer_not_option_one(slide_path: Path) -> None:
    with ScriptedModelServer(rule=lambda _: Reply(DEEP_CALL)) as srv:
        ans = run(local_agent(srv, max_steps=2, max_attempts=1), slide_path)
    assert ans.text == "" and ans.error is not None and "no answer" in ans.error
