"""The shell commands of the README, docs/*.md and docs/design/*.md: every ```bash / sh / shell fence, split
as bash parses it.

Fences follow CommonMark (https://spec.commonmark.org/0.31.2/#fenced-code-blocks) for top-level blocks: a
fence opens only at line start after at most 3 spaces, a backtick fence's info string holds no backtick
(so inline ```` ```json ```` in prose opens nothing), and it closes with a fence of the same character, at
least as long, and nothing after it but spaces; a fence never closed runs to the end of the file.

A block becomes a list of commands: ``\\`` continuations joined, comments dropped, and lines grouped
until bash accepts them as complete (``bash -n``), so a function, a loop or a quoted multi-line string is
one command. ``export`` lines are kept as the environment of the commands after them in the block.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

SHELL_FENCES = {"bash", "sh", "shell"}
OPENING = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
CLOSING = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")


@dataclass(frozen=True)
class Fence:
    """A fenced code block: the line of its opening fence, its info string and its content lines."""

    line: int
    info: str
    lines: tuple[str, ...]

    @property
    def lang(self) -> str:
        return self.info.split(maxsplit=1)[0].lower() if self.info else ""


def fences(text: str) -> list[Fence]:
    """The top-level fenced code blocks of Markdown ``text`` (CommonMark's rules, see above)."""
    found: list[Fence] = []
    opening: tuple[int, int, str, str] | None = None  # line, indent, fence, info
    body: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if opening is None:
            match = OPENING.match(line)
            if match and not (match.group(2)[0] == "`" and "`" in match.group(3)):
                opening, body = (number, len(match.group(1)), match.group(2), match.group(3).strip()), []
            continue
        at, indent, fence, info = opening
        close = CLOSING.match(line)
        if close and close.group(1)[0] == fence[0] and len(close.group(1)) >= len(fence):
            found.append(Fence(at, info, tuple(body)))
            opening = None
        else:  # the content loses up to as many leading spaces as the opening fence had
            body.append(line[min(indent, len(line) - len(line.lstrip(" "))) :])
    if opening is not None:
        found.append(Fence(opening[0], opening[3], tuple(body)))
    return found


@dataclass(frozen=True)
class Command:
    file: str  # relative to the repository, e.g. docs/experiments.md
    line: int  # 1-based line of its first source line
    text: str  # one logical command, comments dropped, continuations joined

    @property
    def is_export(self) -> bool:
        return self.text.startswith("export ")

    def where(self) -> str:
        return f"{self.file}:{self.line}: {self.text}"


@dataclass(frozen=True)
class Block:
    file: str
    line: int  # line of the opening fence
    commands: tuple[Command, ...]

    @property
    def key(self) -> str:
        return f"{self.file}:{self.line}"


def strip_comment(line: str) -> str:
    """``line`` without its ``#`` comment (a ``#`` that starts a word outside quotes)."""
    quote, escaped = None, False
    for i, ch in enumerate(line):
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t;"):
            return line[:i].rstrip()
    return line.rstrip()


def _complete(text: str) -> bool:
    return subprocess.run(["bash", "-n", "-c", text], capture_output=True).returncode == 0


def split_block(file: str, first_line: int, lines: list[str]) -> list[Command]:
    """Commands of one fenced block whose first content line is ``first_line``."""
    logical: list[tuple[int, str]] = []  # continuations joined
    pending, start = "", 0
    for number, raw in enumerate(lines, first_line):
        text = strip_comment(raw) if not pending else raw.rstrip()
        if not pending:
            start = number
        if text.endswith("\\"):
            pending += text[:-1].rstrip() + " "
            continue
        text = strip_comment(pending + text) if pending else text
        pending = ""
        if text.strip():
            logical.append((start, text.strip()))
    commands, group, at = [], [], 0
    for number, text in logical:
        if not group:
            at = number
        group.append(text)
        joined = "\n".join(group)
        if _complete(joined):
            commands.append(Command(file, at, joined))
            group = []
    if group:
        raise ValueError(f"{file}:{at}: the block ends inside an unfinished command: {' '.join(group)}")
    return commands


def blocks_in(path: Path, root: Path) -> list[Block]:
    """The shell blocks of one Markdown file."""
    rel = path.relative_to(root).as_posix()
    return [
        Block(rel, f.line, tuple(split_block(rel, f.line + 1, list(f.lines))))
        for f in fences(path.read_text(encoding="utf-8"))
        if f.lang in SHELL_FENCES
    ]


# The short path a newcomer reads in an hour (its word budget: tests/docs/test_docs_structure.py)
SHORT_PATH = ("README.md", "docs/getting-started.md")


def docs_files(root: Path) -> list[Path]:
    """The pages whose commands the docs test runs: the short path first, in reading order (its commands
    fetch and check the slides that later pages' commands find in place), then the others by name."""
    first = [root / page for page in SHORT_PATH]
    rest = sorted([*(root / "docs").glob("*.md"), *(root / "docs" / "design").glob("*.md")])
    return [*first, *(p for p in rest if p not in first)]


def all_blocks(root: Path) -> list[Block]:
    return [block for path in docs_files(root) for block in blocks_in(path, root)]
