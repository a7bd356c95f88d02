"""``giant-prompts import`` on a hostile clone: only regular files inside the clone are read, bounded in
size and depth; each refusal is one clear line naming the file, exit 1, no traceback and no hang.

The command runs in a child process under a 1 GiB address-space limit and a timeout, so a regression
(reading /dev/zero, blocking on a FIFO) fails this test instead of the machine."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from giant_assets.agents.prompt_import import CLAUDE_AGENT, GPT_AGENT, MAX_MODULE_BYTES
from tests.agents.test_prompts import GPT_SOURCE, fixture_repo

COMMAND = str(Path(sys.executable).parent / "giant-prompts")


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def run_import(repo: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [COMMAND, "import", "--repo", str(repo), "--out", str(out)],
        capture_output=True, text=True, timeout=60, preexec_fn=_limit_memory, check=False,
    )  # fmt: skip


def replace_gpt(make: Callable[[Path], None]) -> Callable[[Path], None]:
    def arrange(repo: Path) -> None:
        (repo / GPT_AGENT).unlink()
        make(repo / GPT_AGENT)

    return arrange


def tool(definition: str) -> str:
    """The fixture's GPT module with one more slide_zoom tool definition, written first."""
    return f"TOOLS = [{definition}]\n" + GPT_SOURCE


CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "fifo": (replace_gpt(os.mkfifo), "not a regular file (a FIFO, device or directory)"),
    "dev-zero-link": (
        replace_gpt(lambda p: p.symlink_to("/dev/zero")),
        "a link to /dev/zero, outside the clone",
    ),
    "link-out-of-the-clone": (
        lambda repo: (
            (repo / CLAUDE_AGENT).unlink(),
            (repo / CLAUDE_AGENT).symlink_to(repo.parent / "secret.py"),
        ),
        "outside the clone",
    ),
    "directory": (replace_gpt(os.mkdir), "not a regular file"),
    "link-loop": (replace_gpt(lambda p: p.symlink_to(p)), "cannot be read"),
    "huge": (
        lambda repo: (repo / GPT_AGENT).write_text(GPT_SOURCE + "#" * MAX_MODULE_BYTES),
        f"more than an agent module's {MAX_MODULE_BYTES:,}",
    ),
    "nested-unary": (
        lambda repo: (repo / GPT_AGENT).write_text(GPT_SOURCE + "x = " + "-" * 100_000 + "1\n"),
        "cannot be parsed (MemoryError",
    ),
    "nested-sum": (
        lambda repo: (repo / GPT_AGENT).write_text(GPT_SOURCE + "x = 1" + "+1" * 100_000 + "\n"),
        "cannot be parsed (RecursionError",
    ),
    "deep-f-string": (
        lambda repo: (repo / GPT_AGENT).write_text("y = {'output': f'{" + "1+" * 600 + "1}'}\n" + GPT_SOURCE),
        "an agent module nests an expression too deep to read",
    ),
    "nul-byte": (
        lambda repo: (repo / GPT_AGENT).write_text(GPT_SOURCE + "\0"),
        "context.py: not valid Python (source code string cannot contain null bytes)",
    ),
    "not-utf8": (
        lambda repo: (repo / GPT_AGENT).write_bytes(GPT_SOURCE.encode() + b"\xff"),
        "not UTF-8 text",
    ),
    "parameters-a-list": (
        lambda repo: (repo / GPT_AGENT).write_text(tool('{"name": "slide_zoom", "parameters": [1, 2]}')),
        "tool 'slide_zoom': its parameters is a list, not a mapping",
    ),
    "properties-a-string": (
        lambda repo: (repo / GPT_AGENT).write_text(
            tool('{"name": "slide_zoom", "parameters": {"properties": "x0"}}')
        ),
        "its parameters' properties is a str, not a mapping",
    ),
    "parameter-a-number": (
        lambda repo: (repo / GPT_AGENT).write_text(
            tool('{"name": "slide_zoom", "parameters": {"properties": {"x0": 5}}}')
        ),
        "parameter 'x0' is a int, not a mapping",
    ),
    "tool-not-a-literal": (
        lambda repo: (repo / GPT_AGENT).write_text(tool('{"name": "slide_zoom", "description": open("x")}')),
        "tool 'slide_zoom' is not a literal",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_clone_is_refused_with_one_clear_line(tmp_path: Path, case: str) -> None:
    arrange, message = CASES[case]
    (tmp_path / "secret.py").write_text('SYSTEM_PROMPT_MULTI_STEP = "not the clone\'s"\n')
    repo = fixture_repo(tmp_path / "GIANT")
    arrange(repo)
    out = tmp_path / "prompts.yaml"
    result = run_import(repo, out)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("giant-prompts: ") and message in result.stderr, result.stderr
    assert not out.exists()


def test_a_link_inside_the_clone_is_read(tmp_path: Path) -> None:
    """A symlink to a regular file inside the clone (e.g. a vendored copy) is followed."""
    repo = fixture_repo(tmp_path / "GIANT")
    (repo / "src").mkdir()
    (repo / GPT_AGENT).rename(repo / "src" / "agent.py")
    (repo / GPT_AGENT).symlink_to(Path("src") / "agent.py")
    result = run_import(repo, tmp_path / "prompts.yaml")
    assert result.returncode == 0, result.stderr
