"""``giant-run`` as a subprocess against the loopback model: thumbnail, patch and giant modes, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from giant_assets.demo.scripted import Reply, ScriptedModelServer, crop_reply, demo_policy
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.slides import write_pyramidal_slide

GIANT_RUN = Path(sys.executable).parent / "giant-run"
OPTIONS = ["Low", "Medium", "High", "Cannot determine"]
KEY = "sk-cli-test-SECRET-0123456789abcdef"


@pytest.fixture(scope="module")
def slide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("cli") / "slide.tiff", ONE_LESION_DESIGN, levels=4)


def giant_run(*args: str, key: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    if key:
        env["CLI_TEST_KEY"] = KEY
    return subprocess.run(
        [str(GIANT_RUN), *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def tail(result: subprocess.CompletedProcess[str]) -> tuple[str, str]:
    lines = result.stdout.strip().splitlines()
    return lines[-2], lines[-1]


def test_thumbnail_over_chat_completions(slide: Path, tmp_path: Path) -> None:
    out = tmp_path / "t" / "trajectory.json"
    with ScriptedModelServer(script=[Reply('Mitoses are rare. {"answer": 1}', usage=(900, 30))]) as server:
        result = giant_run(
            str(slide),
            "--question", "What is the level of mitotic activity?",
            "--options", *OPTIONS,
            "--provider", "openai", "--api", "chat", "--model", "gpt-5",
            "--base-url", server.openai_base_url,
            "--api-key-env", "CLI_TEST_KEY",
            "--mode", "thumbnail", "--thumbnail-size", "800",
            "--out", str(out),
            key=True,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert tail(result) == ('answer: Mitoses are rare. {"answer": 1}', "label: 1")
    step_line = result.stdout.splitlines()[0]
    # 4096/800 = 5.12 x 0.85 = 4.35 -> level 2; 800 x 600; gpt-5 at $1.25 / $10 per M tokens
    assert step_line.startswith("step 0  answer  box 0,0,4096,3072  level 2  image 800x600")
    assert "tokens 900 in / 30 out" in step_line and "$0.001425" in step_line
    (request,) = server.requests
    assert request.wire == "chat" and [im.size for im in request.images] == [(800, 600)]
    assert "4. Cannot determine" in request.text and '{"answer": N}' in request.text  # rendered with options
    assert request.headers.get("authorization") == f"Bearer {KEY}"
    doc = json.loads(out.read_text())
    assert doc["label"] == 1 and doc["error"] is None and doc["settings"]["agent"] == "thumbnail"
    assert [s["action"] for s in doc["steps"]] == ["answer"] and doc["steps"][0]["level"] == 2
    assert KEY not in out.read_text() and KEY not in result.stdout + result.stderr


def test_patch_over_anthropic_messages(slide: Path, tmp_path: Path) -> None:
    replies = [Reply('{"answer": 3}')] * 20 + [Reply("It looks like option 2.")] * 10
    with ScriptedModelServer(script=replies) as server:
        result = giant_run(
            str(slide),
            "--question", "What is the level of mitotic activity?",
            "--options", *OPTIONS,
            "--provider", "anthropic", "--model", "claude-sonnet-4-5",
            "--base-url", server.base_url, "--mode", "patch",
            "--out", str(tmp_path / "p.json"),
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert tail(result) == ('answer: {"answer": 3}', "label: 3")
    assert len(server.requests) == 30 and {r.wire for r in server.requests} == {"messages"}
    assert all([im.size for im in r.images] == [(224, 224)] for r in server.requests)
    patch_lines = [line for line in result.stdout.splitlines() if "  patch  " in line]
    assert len(patch_lines) == 30 and all("level 0  image 224x224" in line for line in patch_lines)
    doc = json.loads((tmp_path / "p.json").read_text())
    assert sum(s["action"] == "patch" for s in doc["steps"]) == 30


def test_giant_over_responses_with_tool_calls(slide: Path, tmp_path: Path) -> None:
    with ScriptedModelServer(rule=demo_policy) as server:
        result = giant_run(
            str(slide),
            "--question", "What is the level of mitotic activity?",
            "--options", *OPTIONS,
            "--provider", "openai", "--model", "gpt-5", "--base-url", server.openai_base_url,
            "--out", str(tmp_path / "g.json"),
        )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    answer_line, label_line = tail(result)
    assert answer_line.startswith("answer: ") and label_line in {f"label: {k}" for k in range(1, 5)}
    assert {r.wire for r in server.requests} == {"responses"} and len(server.requests) >= 2
    assert all(any(t.get("name") == "slide_zoom" for t in r.json.get("tools", [])) for r in server.requests)
    doc = json.loads((tmp_path / "g.json").read_text())
    crops = [s for s in doc["steps"] if s["action"] == "crop"]
    assert crops and all(s["box"] and s["level"] is not None for s in crops)
    assert max(server.requests[0].images[0].size) == 1000  # OpenAI's image size, guides included


def test_run_that_never_answers_fails_with_exit_1(slide: Path) -> None:
    with ScriptedModelServer(rule=lambda request: crop_reply(100, 100, 500, 500)) as server:
        result = giant_run(
            str(slide), "--question", "Which?", "--options", "A", "B",
            "--provider", "openai", "--model", "gpt-5", "--base-url", server.openai_base_url,
            "--max-steps", "2",
        )  # fmt: skip
    assert result.returncode == 1
    assert "failed: max_retries_exceeded" in result.stdout
    assert tail(result) == ("answer: ", "label: none")
    assert len(server.requests) == 8  # 4 attempts of 2 calls


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--question", "Q", "--provider", "openai"], "--model"),
        (["--question", "Q", "--provider", "anthropic", "--api", "chat", "--model", "m"], "messages"),
        (["--question", "Q", "--provider", "openai", "--model", "m", "--mode", "patch"], "--options"),
        (["--question", "Q", "--provider", "openai", "--model", "m", "--mode", "nope"], "invalid choice"),
        (["--question", "Q", "--provider", "openai", "--model", "m", "--max-steps", "0"], "max_steps"),
        # no key for a non-loopback URL: refused before any request, naming the variable
        (["--question", "Q", "--provider", "openai", "--model", "m", "--api-key-env", "NO_SUCH_KEY_VAR"],
         "NO_SUCH_KEY_VAR"),
    ],
)  # fmt: skip
def test_usage_errors_exit_2(slide: Path, args: list[str], message: str, capsys, monkeypatch) -> None:
    code, stderr = giant_run_in_process(monkeypatch, capsys, str(slide), *args)
    assert code == 2, stderr
    assert message in stderr


def test_missing_slide_is_a_usage_error(tmp_path: Path, capsys, monkeypatch) -> None:
    code, stderr = giant_run_in_process(
        monkeypatch,
        capsys,
        str(tmp_path / "nope.svs"),
        "--question",
        "Q",
        "--provider",
        "openai",
        "--model",
        "m",
    )
    assert code == 2 and "slide file not found" in stderr and "nope.svs" in stderr


def giant_run_in_process(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    """``giant-run``'s entry point in this process (a usage error ends before any import a subprocess
    would add): its exit status and stderr; any other exception than its exit fails the test."""
    from giant_assets.agents.run_cli import main

    for name in [k for k in os.environ if k.endswith("_API_KEY")]:
        monkeypatch.delenv(name)
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


def test_giant_with_a_prompt_file_the_note_tool_and_one_call_per_reply(slide: Path, tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.yaml"
    prompts.write_text(
        "multi_step_first_call: 'Slide {width} x {height}, {max_steps} steps.{note_guidance}'\n"
        "note_guidance: ' Notes help.'\nnote_recorded: 'ok: {observation}'\n"
    )
    script = [
        Reply(
            "two",
            calls=(("note", {"observation": "mitoses"}), ("slide_zoom", {"x0": 0, "y0": 0, "w": 8, "h": 8})),
        ),
        Reply('<report>r</report><response>{"answer": 2}</response>'),
    ]
    with ScriptedModelServer(script=script) as server:
        result = giant_run(
            str(slide), "--question", "Mitoses?", "--options", *OPTIONS,
            "--provider", "openai", "--model", "gpt-5", "--base-url", server.openai_base_url,
            "--max-steps", "3", "--prompt-file", str(prompts), "--note-tool", "--serve-calls", "first",
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1].startswith("step 1  note  ") and "note: mitoses" in result.stdout
    first, second = server.requests
    assert first.json["input"][0]["content"] == "Slide 4096 x 3072, 3 steps. Notes help."
    assert first.tools == ["slide_zoom", "note"]
    note, ignored = [t.texts[0] for t in second.turns if t.role == "tool"]
    assert note == "ok: mitoses" and ignored.startswith("Error: only one tool call per turn")
    bad = tmp_path / "bad.yaml"
    bad.write_text("tool_result: '{nope}'\n")
    result = giant_run(str(slide), "--question", "Q?", "--provider", "openai", "--model", "gpt-5",
                       "--base-url", "http://127.0.0.1:9/v1", "--prompt-file", str(bad))  # fmt: skip
    assert result.returncode == 2 and "bad.yaml: tool_result has unknown placeholder {nope}" in result.stderr
