"""``giant-prompts import``: the official GIANT prompts, read from a local clone, into a prompt file.

The official repository has no licence, so its texts are not shipped; a user who has a clone turns
them into a prompt file (``prompts.PromptSet`` fields as YAML) that an experiment names in
``prompt_file``. The agent modules are parsed with ``ast`` and never imported or run. Read:

- the module-level constants ``SYSTEM_PROMPT_MULTI_STEP`` and ``SYSTEM_PROMPT_SINGLE_STEP`` of the GPT
  agent, and ``SYSTEM_PROMPT_MULTI_STEP`` of the Claude agent (the variant that serves one call);
- inside the agent: the tool-result reminder (``reminder_text = f"..."``), the notes appended to it
  (``reminder_text += ...``), the texts assigned to ``context_limitation``, ``note_tool_guidance`` and
  ``note_reminder``, the note tool's reply (``f"...{observation}"``), the error reply
  (``f"...{str(e)}"``), the Claude agent's reply to an ignored extra call, and the descriptions of the
  ``slide_zoom`` and ``note`` tools and of their parameters (their dict literals);
- the path-review script's ``REVIEW_PROMPT`` (``path_review``), sent as is (the script never formats it).

From the benchmark script (``scripts/run_benchmark.py``, when the clone has it): the first user turn
of tcga_slidebench and tcga_expert_vqa (``TCGA_SLIDEBENCH_PROMPT``, ``TCGA_EXPERT_VQA_PROMPT``; their
``{question}`` and ``{options}`` kept), so that an imported run asks those questions as officially.

The official placeholders become the platform's (``{w0}`` -> ``{width}``, ``{steps_remaining}`` ->
``{max_steps}``, ``args['x0']`` -> ``{x0}``, ...), so the agent fills them with the same values.

A clone is untrusted input: only the two agent modules are read, each only when it is a regular file
inside the clone (a symlink is followed only to a file inside the clone: never a FIFO, a device such
as ``/dev/zero`` or a file elsewhere), at most ``MAX_MODULE_BYTES``; a module nested too deep to parse,
or a tool definition of another shape, is a clear ``ImportFailed`` naming the file.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import os
import stat
import string
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from giant_assets.core.helptext import plain
from giant_assets.experiments.prompts import PLACEHOLDERS, check_template

MAX_MODULE_BYTES = 1 << 20  # the official agent modules are ~28 KB each
GPT_AGENT = "pathology_agent_streaming_image_tool_manual_context.py"
CLAUDE_AGENT = "pathology_agent_streaming_image_tool_manual_context_claude.py"
PATH_REVIEW_SCRIPT = "scripts/run_benchmark_path_review.py"  # REVIEW_PROMPT: sent as is, never formatted
BENCHMARK_SCRIPT = "scripts/run_benchmark.py"
# the benchmark script's first-user-turn templates -> prompt-file fields (placeholders kept as they are)
QUESTION_TEMPLATES = {
    "TCGA_SLIDEBENCH_PROMPT": "tcga_slidebench_prompt",
    "TCGA_EXPERT_VQA_PROMPT": "tcga_expert_vqa_prompt",
}
QUESTION_NAMES = {"question": "question", "options": "options"}
# official ``str.format`` placeholders of the system prompts -> the platform's
FORMAT_NAMES = {
    "w0": "width",
    "h0": "height",
    "steps_remaining": "max_steps",
    "analysis_steps": "analysis_steps",
    "context_limitation": "context_limitation",
    "note_tool_guidance": "note_guidance",
    "note_reminder": "note_reminder",
}
# official f-string expressions (as ``ast.unparse`` writes them) -> the platform's placeholders
EXPRESSIONS = {
    **{f"args['{k}']": k for k in ("x0", "y0", "w", "h")},
    **{k: k for k in ("x0", "y0", "w", "h")},
    "w0_full": "width",
    "h0_full": "height",
    "w0": "width",
    "h0": "height",
    "steps_remaining": "calls_left",
    "self.max_images_in_context - 1": "images_kept",
    "len(self.notes)": "count",
    "i": "index",
    "note['observation']": "observation",
    "observation": "observation",
    "str(e)": "error",
    "e": "error",
}


class ImportFailed(ValueError):
    """The clone lacks a text, or a text has a placeholder with no platform equivalent."""


def read_module(repo: Path, name: str) -> bytes:
    """The bytes of ``repo/name`` if it is a regular file inside the clone of at most MAX_MODULE_BYTES;
    else ImportFailed saying why. Opened without blocking (a FIFO) and checked on the open file."""
    path = repo / name
    try:
        root = repo.resolve(strict=True)
        real = path.resolve(strict=True)
    except (OSError, RuntimeError) as exc:  # missing, or a symlink loop
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ImportFailed(f"{path}: cannot be read ({why}); is --repo a clone?") from None
    if not real.is_relative_to(root):
        raise ImportFailed(f"{path}: a link to {real}, outside the clone {root}: not read")
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise ImportFailed(f"{path}: cannot be read ({exc.strerror or exc})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ImportFailed(f"{path}: not a regular file (a FIFO, device or directory): not read")
    with os.fdopen(fd, "rb") as fh:
        if info.st_size > MAX_MODULE_BYTES:
            raise ImportFailed(
                f"{path}: {info.st_size:,} bytes, more than an agent module's {MAX_MODULE_BYTES:,}"
            )
        data = fh.read(MAX_MODULE_BYTES + 1)
    if len(data) > MAX_MODULE_BYTES:  # grew while read
        raise ImportFailed(f"{path}: more than an agent module's {MAX_MODULE_BYTES:,} bytes")
    return data


@dataclass(frozen=True)
class Source:
    path: Path
    tree: ast.Module
    text: str
    data: bytes

    @classmethod
    def read(cls, repo: Path, name: str) -> Source:
        path = repo / name
        data = read_module(repo, name)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ImportFailed(f"{path}: not UTF-8 text (byte {exc.start})") from None
        try:
            return cls(path, ast.parse(text, filename=str(path)), text, data)
        except SyntaxError as exc:
            line = f":{exc.lineno}" if exc.lineno else ""
            raise ImportFailed(f"{path}{line}: not valid Python ({exc.msg})") from None
        except (RecursionError, MemoryError, ValueError) as exc:  # nested too deep; a NUL byte
            raise ImportFailed(f"{path}: cannot be parsed ({type(exc).__name__}: {exc})") from None

    def constant(self, name: str, names: dict[str, str] | None = None) -> str:
        """A module-level ``NAME = "..."`` string, its placeholders renamed (by ``names``, default the
        system prompts' ``FORMAT_NAMES``)."""
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets
            ):
                if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                    where = f"{self.path}:{node.lineno} {name}"
                    return _rename_format(node.value.value, where, FORMAT_NAMES if names is None else names)
                raise ImportFailed(f"{self.path}:{node.lineno}: {name} is not a plain string constant")
        raise ImportFailed(f"{self.path}: no module-level string constant {name}")

    def verbatim(self, name: str) -> str:
        """A module-level string constant the official code sends without formatting it: every brace
        escaped, so the template gives back the text exactly (its ``{{`` included)."""
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets
            ):
                if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                    return _escape(node.value.value)
                raise ImportFailed(f"{self.path}:{node.lineno}: {name} is not a plain string constant")
        raise ImportFailed(f"{self.path}: no module-level string constant {name}")

    def assigned(self, name: str, augmented: bool = False) -> list[str]:
        """Every non-empty text assigned (``=``, or ``+=`` when ``augmented``) to ``name``, in order."""
        kind = ast.AugAssign if augmented else ast.Assign
        found = []
        for node in ast.walk(self.tree):
            if not isinstance(node, kind):
                continue
            targets = [node.target] if isinstance(node, ast.AugAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                text = self._text(node.value, name)
                if text:
                    found.append((node.lineno, text))
        return [t for _, t in sorted(found)]

    def dict_texts(self, key: str) -> list[tuple[ast.Dict, ast.expr]]:
        """(dict, value) of every dict literal with ``key``, in source order."""
        out = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values, strict=True):
                    if isinstance(k, ast.Constant) and k.value == key:
                        out.append((node, v))
        return sorted(out, key=lambda kv: kv[1].lineno)

    def fstring_with(self, expression: str) -> str | None:
        """The first tool reply (an ``output``/``content`` f-string) formatting ``expression``."""
        for key in ("output", "content"):
            for _, value in self.dict_texts(key):
                if isinstance(value, ast.JoinedStr) and any(
                    isinstance(v, ast.FormattedValue) and ast.unparse(v.value) == expression
                    for v in value.values
                ):
                    return self._text(value, key)
        return None

    def plain_tool_result(self) -> str | None:
        """The text of a ``{"type": "tool_result", "content": "..."}`` literal (an ignored extra call)."""
        for node, value in self.dict_texts("type"):
            if isinstance(value, ast.Constant) and value.value == "tool_result":
                pairs = zip(node.keys, node.values, strict=True)
                content = {k.value: v for k, v in pairs if isinstance(k, ast.Constant)}
                text = content.get("content")
                if isinstance(text, ast.Constant) and isinstance(text.value, str):
                    return _escape(text.value)
        return None

    def tool(self, name: str) -> dict[str, str]:
        """The fields describing tool ``name`` (its dict literal, ``{"name": name, ...}``)."""
        for node, value in self.dict_texts("name"):
            if isinstance(value, ast.Constant) and value.value == name:
                where = f"{self.path}:{node.lineno}: tool {name!r}"
                try:
                    spec = ast.literal_eval(node)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    raise ImportFailed(f"{where} is not a literal") from None
                schema = spec.get("parameters") or spec.get("input_schema") or {}
                params = _mapping(schema, f"{where}: its parameters").get("properties", {})
                params = _mapping(params, f"{where}: its parameters' properties")
                prefix = "zoom" if name == "slide_zoom" else name
                found = {f"{prefix}_description": spec.get("description")}
                found |= {
                    f"{prefix}_{k}": _mapping(v or {}, f"{where}: parameter {k!r}").get("description")
                    for k, v in params.items()
                }
                return {k: _escape(v) for k, v in found.items() if isinstance(v, str)}
        return {}

    def _text(self, node: ast.expr, what: str) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return _escape(node.value)
        if isinstance(node, ast.JoinedStr):
            return _rename_fstring(node, f"{self.path}:{node.lineno} {what}")
        return ""


def _mapping(value: object, what: str) -> dict:
    if not isinstance(value, dict):
        raise ImportFailed(f"{what} is a {type(value).__name__}, not a mapping")
    return value


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _rename_format(text: str, where: str, names: dict[str, str]) -> str:
    """A ``str.format`` template with the official placeholder names replaced by the platform's."""
    out = []
    for literal, name, spec, conversion in string.Formatter().parse(text):
        out.append(_escape(literal))
        if name is None:
            continue
        if name not in names:
            raise ImportFailed(f"{where}: placeholder {{{name}}} has no platform equivalent")
        conv = f"!{conversion}" if conversion else ""
        out.append("{" + names[name] + conv + (f":{spec}" if spec else "") + "}")
    return "".join(out)


def _rename_fstring(node: ast.JoinedStr, where: str) -> str:
    """An f-string as a ``str.format`` template over the platform's placeholder names."""
    out = []
    for part in node.values:
        if isinstance(part, ast.Constant):
            out.append(_escape(str(part.value)))
            continue
        assert isinstance(part, ast.FormattedValue)
        expression = ast.unparse(part.value)
        if expression not in EXPRESSIONS or part.format_spec is not None or part.conversion != -1:
            raise ImportFailed(f"{where}: {{{expression}}} has no platform placeholder")
        out.append("{" + EXPRESSIONS[expression] + "}")
    return "".join(out)


def read_official(repo: Path) -> dict[str, str]:
    """The prompt-file fields found in ``repo`` (the Claude agent's texts when that file is there)."""
    try:
        return _read_official(repo)
    except RecursionError:  # ast.unparse or a walk over an expression nested too deep
        raise ImportFailed(f"{repo}: an agent module nests an expression too deep to read") from None


def _read_official(repo: Path) -> dict[str, str]:
    gpt = Source.read(repo, GPT_AGENT)
    fields = {
        "multi_step": gpt.constant("SYSTEM_PROMPT_MULTI_STEP"),
        "single_step": gpt.constant("SYSTEM_PROMPT_SINGLE_STEP"),
    }
    reminder = gpt.assigned("reminder_text")
    if not reminder:
        raise ImportFailed(f"{gpt.path}: no tool-result reminder (reminder_text = f'...') found")
    fields["tool_result"] = reminder[0]
    appended = gpt.assigned("reminder_text", augmented=True)
    optional = {
        "notes_header": appended[0] if appended else None,
        "note_line": appended[1] if len(appended) > 1 else None,
        "context_limitation": next(iter(gpt.assigned("context_limitation")), None),
        "note_guidance": next(iter(gpt.assigned("note_tool_guidance")), None),
        "note_guidance_pruned": next(iter(gpt.assigned("note_tool_guidance", augmented=True)), None),
        "note_reminder": next(iter(gpt.assigned("note_reminder")), None),
        "note_recorded": gpt.fstring_with("observation"),
        "tool_error": gpt.fstring_with("str(e)"),
    }
    for tool in ("slide_zoom", "note"):
        optional |= {k: v for k, v in gpt.tool(tool).items() if k in PLACEHOLDERS}
    if os.path.lexists(repo / CLAUDE_AGENT):
        claude = Source.read(repo, CLAUDE_AGENT)
        optional["multi_step_first_call"] = claude.constant("SYSTEM_PROMPT_MULTI_STEP")
        optional["extra_call_ignored"] = claude.plain_tool_result()
    if os.path.lexists(repo / PATH_REVIEW_SCRIPT):
        optional["path_review"] = Source.read(repo, PATH_REVIEW_SCRIPT).verbatim("REVIEW_PROMPT")
    if os.path.lexists(repo / BENCHMARK_SCRIPT):
        script = Source.read(repo, BENCHMARK_SCRIPT)
        for constant, field in QUESTION_TEMPLATES.items():
            optional[field] = script.constant(constant, QUESTION_NAMES)
    fields |= {k: v for k, v in optional.items() if v is not None}
    for key, value in fields.items():
        check_template(value, key, f"official prompts in {repo}")
    return fields


def write_prompt_file(repo: Path, out: Path) -> list[str]:
    """Write the prompt file; returns the fields not found (those keep the built-in texts)."""
    fields = read_official(repo)
    files = [
        p
        for p in (GPT_AGENT, CLAUDE_AGENT, BENCHMARK_SCRIPT, PATH_REVIEW_SCRIPT)
        if os.path.lexists(repo / p)
    ]
    source = {
        "repo": str(repo.resolve()),
        "commit": _commit(repo),
        "files": {p: hashlib.sha256(read_module(repo, p)).hexdigest() for p in files},
    }
    doc = {"source": source, **fields}
    out.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.dump(doc, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=1000)
    header = f"# written by giant-prompts import from {repo}; the official texts, not for redistribution\n"
    out.write_text(header + text, encoding="utf-8")
    from giant_assets.experiments.prompts import FIELDS, load_prompt_file

    load_prompt_file(out)  # what the agent will read back
    return [f for f in FIELDS if f not in fields]


def _commit(repo: Path) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


class _BlockDumper(yaml.SafeDumper):
    """Multi-line texts as literal blocks, so the prompt file reads like the prompts."""


def _str_block(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str_block)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="giant-prompts", description=plain(__doc__.splitlines()[0]))
    sub = parser.add_subparsers(dest="command", required=True)
    imp = sub.add_parser("import", help="read the official prompts from a local clone into a prompt file")
    imp.add_argument("--repo", required=True, type=Path, help="local clone of KianWeihrauch/GIANT")
    imp.add_argument("--out", required=True, type=Path, help="prompt file to write (YAML)")
    imp.add_argument("--force", action="store_true", help="overwrite an existing --out")
    args = parser.parse_args(argv)
    if args.out.exists() and not args.force:
        print(f"giant-prompts: {args.out} exists; pass --force to overwrite it", file=sys.stderr)
        return 2
    try:
        missing = write_prompt_file(args.repo, args.out)
    except ValueError as exc:
        print(f"giant-prompts: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}")
    if missing:
        print(f"not in the clone, the built-in texts are used: {', '.join(missing)}")
    print(f"use it with: prompt_file: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
