"""The texts the GIANT agent sends: system prompts, tool-result reminders, note-tool replies.

A ``PromptSet`` holds every text as a ``str.format`` template. The built-in set gives the released
protocol's instructions in the platform's own words; ``giant-prompts import`` writes a prompt file
(YAML, one key per field) with the official texts read from a local clone of the official repository,
and an experiment names it in ``prompt_file``. Placeholders per field (``{{``/``}}`` are braces):

- ``multi_step`` / ``multi_step_first_call`` (the latter when only the first tool call of a reply is
  served): ``{width}`` ``{height}`` (level-0 slide size), ``{max_steps}`` (T), ``{analysis_steps}``
  (T-1), ``{image_size}``, ``{context_limitation}``, ``{note_guidance}``, ``{note_reminder}``;
- ``single_step`` (T = 1, no tool offered): ``{width}`` ``{height}`` ``{image_size}``;
- ``tool_result``: ``{x0}`` ``{y0}`` ``{w}`` ``{h}`` (the region asked for), ``{width}`` ``{height}``,
  ``{calls_left}`` (T - step - 1, as the official code counts);
- ``context_limitation``: ``{images_kept}`` (zoomed images kept besides the overview);
- ``notes_header``: ``{count}``; ``note_line``: ``{index}`` ``{observation}``; ``note_recorded``:
  ``{observation}``; ``tool_error``: ``{error}``; the others none;
- ``zoom_*`` and ``note_*``: the ``slide_zoom`` and ``note`` tools' descriptions and their parameters';
- ``path_review``: the path-review agent's first user turn (instead of the question), none; empty means
  the built-in ``PATH_REVIEW_PROMPT`` (hashed only when set, so adding it changed no existing hash).
- ``tcga_slidebench_prompt`` / ``tcga_expert_vqa_prompt``: the first user turn of those benchmarks, whose
  CSV prompt is only the question: ``{question}`` ``{options}`` (the numbered options, a newline after
  each). Empty (built in): the item's prompt as loaded, the platform's own wording
  (``multipathqa.prompts.render_prompt``), which is not the official benchmark script's text.
"""

from __future__ import annotations

import hashlib
import json
import string
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import yaml

from giant_assets.multipathqa.prompts import OPTIONS_PLACEHOLDER, format_options, render_prompt

PLACEHOLDERS: dict[str, frozenset[str]] = {
    "multi_step": frozenset(
        {
            "width",
            "height",
            "max_steps",
            "analysis_steps",
            "image_size",
            "context_limitation",
            "note_guidance",
            "note_reminder",
        }
    ),  # fmt: skip
    "single_step": frozenset({"width", "height", "image_size"}),
    "tool_result": frozenset({"x0", "y0", "w", "h", "width", "height", "calls_left"}),
    "context_limitation": frozenset({"images_kept"}),
    "note_guidance": frozenset(),
    "note_guidance_pruned": frozenset(),
    "note_reminder": frozenset(),
    "notes_header": frozenset({"count"}),
    "note_line": frozenset({"index", "observation"}),
    "note_recorded": frozenset({"observation"}),
    "extra_call_ignored": frozenset(),
    "tool_error": frozenset({"error"}),
    **dict.fromkeys(
        (
            "zoom_description",
            "zoom_x0",
            "zoom_y0",
            "zoom_w",
            "zoom_h",
            "note_description",
            "note_observation",
        ),
        frozenset(),
    ),  # fmt: skip
}
PLACEHOLDERS["multi_step_first_call"] = PLACEHOLDERS["multi_step"]
# benchmarks whose CSV prompt is only the question: their first user turn is a template of its own
QUESTION_BENCHMARKS = ("tcga_slidebench", "tcga_expert_vqa")
PLACEHOLDERS |= {f"{b}_prompt": frozenset({"question", "options"}) for b in QUESTION_BENCHMARKS}
PLACEHOLDERS["path_review"] = frozenset()
HASHED_WHEN_SET = ("path_review",)  # fields added later: an empty one leaves the hash as it was

_ROLE = (
    "You are a pathologist who examines tissue slides with great care. Aim for the most complete "
    "picture of this slide that you can get.\n\n"
)
_FORMAT = """\
<report>
A full pathology report:
- the tissue's overall architecture and organisation
- the cells: their morphology and features
- every abnormality, lesion or pathological change you found
- which regions you examined and what each showed
- how your observations lead to your diagnosis{note_reminder}
</report>

<response>
Your answer to the user's question, drawn from the whole examination.
</response>
"""
_MULTI = (
    _ROLE
    + """\
COORDINATES: at full resolution the slide measures {width} × {height} pixels. Every coordinate you \
give refers to that full resolution, and the labelled guide lines on each image show full-resolution \
pixel positions.

PLAN: you have {max_steps} steps in all. Spend up to {analysis_steps} of them examining the slide with \
slide_zoom and keep the last step for your report.
{context_limitation}{one_call_rule}
EXAMINATION (steps 1 to {analysis_steps}):
- Most important: use as many of your steps as you can to study the slide thoroughly
- Look at many regions, at several magnifications, in a systematic order
- Check the architecture of the tissue, the details of the cells and any pathological change
- Return to interesting areas more than once, at different scales
- Take your time: do not hurry on before you understand a region
- Keep going until your understanding is complete or you reach step {analysis_steps}
{note_guidance}
REPORT (last step): answer with exactly these XML tags:

"""
    + _FORMAT
    + """
Keep in mind: thoroughness matters more than speed. Use every step you have for the examination \
before you write your report and answer.
"""
)
_ONE_CALL_RULE = (
    "\nONE TOOL CALL PER TURN: only the first tool call of a reply is carried out; any further calls "
    "in the same reply are ignored. Examine one region at a time.\n"
)


@dataclass(frozen=True)
class PromptSet:
    """Every text template the GIANT agent sends (see the module docstring for the placeholders)."""

    multi_step: str = _MULTI.replace("{one_call_rule}", "")
    multi_step_first_call: str = _MULTI.replace("{one_call_rule}", _ONE_CALL_RULE)
    single_step: str = _ROLE + "Answer with exactly these XML tags:\n\n" + _FORMAT.format(note_reminder="")
    tool_result: str = (
        "This is the region whose top-left corner is at ({x0},{y0}), {w}×{h} pixels in size. "
        "Note: the slide is {width} × {height} pixels at full resolution, and every coordinate refers to "
        "that resolution. Function calls left: {calls_left}."
    )
    context_limitation: str = (
        "\nLIMITED CONTEXT: besides the overview you keep only the {images_kept} most recently zoomed "
        "images in view; older images are taken out of the conversation, their text stays."
    )
    note_guidance: str = (
        "\nNOTES: record important observations, abnormalities, suspicious areas and other significant "
        "findings with the 'note' tool as soon as you make them, so that you have them at hand for the "
        "report, above all when you look at many regions."
    )
    note_guidance_pruned: str = (
        " Older images leave your context, so notes are the only way to keep what they showed."
    )
    note_reminder: str = "\n- what your recorded notes say"
    notes_header: str = "\n\nYour notes so far ({count}):\n"
    note_line: str = "{index}. {observation}\n"
    note_recorded: str = "Noted: {observation}"
    extra_call_ignored: str = (
        "Error: only one tool call per turn is carried out, and this one was not. Make one call at a time."
    )
    tool_error: str = "Error: {error}"
    # the tools' descriptions (sent in every request's tool list)
    zoom_description: str = (
        "Show a rectangular region of the whole-slide image at higher magnification. Coordinates are "
        "level-0 pixels: x grows from left to right, y from top to bottom; x0, y0 is the region's "
        "top-left corner."
    )
    zoom_x0: str = "x of the left edge (x runs left to right)"
    zoom_y0: str = "y of the top edge (y runs top to bottom)"
    zoom_w: str = "the region's width in pixels"
    zoom_h: str = "the region's height in pixels"
    note_description: str = (
        "Write down a finding to keep for the final report: an important feature, an abnormality, a "
        "suspicious or cancerous area, a location, any key observation."
    )
    note_observation: str = "the finding to keep"
    path_review: str = ""  # the path-review agent's request; empty: PATH_REVIEW_PROMPT
    # the first user turn of the question-only benchmarks; empty: the item's prompt (the platform's words)
    tcga_slidebench_prompt: str = ""
    tcga_expert_vqa_prompt: str = ""

    def first_turn(
        self, benchmark: str, prompt: str, question: str | None, options: Sequence[str] | None
    ) -> str:
        """The question as the first user turn sends it, from the CSV's prompt ``question`` (``prompt``,
        the item's prompt as loaded, when that is unknown): a question-only benchmark's template of this
        set filled with the question and the numbered options, else ``render_prompt`` (as loaded today,
        so a table of items loaded by an older version cannot send an older text)."""
        if question is None:
            return prompt
        template = getattr(self, f"{benchmark}_prompt", "") if benchmark in QUESTION_BENCHMARKS else ""
        if template and options and OPTIONS_PLACEHOLDER not in question:
            return template.format(question=question, options=format_options(options))
        return render_prompt(question, options)

    def sha256(self) -> str:
        """Content hash of every template (what ``config_hash`` records)."""
        texts = {k: v for k, v in asdict(self).items() if v or k not in HASHED_WHEN_SET}
        blob = json.dumps(texts, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()

    @property
    def review_request(self) -> str:
        """The path-review agent's first user turn: the prompt file's, else the built-in."""
        return (self.path_review or PATH_REVIEW_PROMPT).format()


BUILT_IN = PromptSet()
FIELDS = tuple(f.name for f in fields(PromptSet))


def check_template(text: str, field: str, where: str) -> str:
    """``text`` if it is a valid template for ``field``; else ValueError naming ``where`` and the problem."""
    allowed = PLACEHOLDERS[field]
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as exc:
        raise ValueError(
            f"{where}: {field} is not a valid template ({exc}); write literal braces as {{{{ }}}}"
        ) from exc
    for name in names:
        if name not in allowed:
            usable = ", ".join("{" + p + "}" for p in sorted(allowed)) or "none"
            raise ValueError(
                f"{where}: {field} has unknown placeholder {{{name}}}; usable: {usable} "
                "(literal braces as {{ }})"
            )
    return text


def load_prompt_file(path: str | Path) -> PromptSet:
    """A prompt file (YAML mapping of ``PromptSet`` fields; a missing field keeps the built-in text).

    Raises ValueError naming the file and the field for an unknown key, a non-text value or a bad
    placeholder.
    """
    path = Path(path).expanduser()
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"prompt_file {path}: cannot be read ({exc.strerror or exc})") from exc
    except yaml.YAMLError as exc:
        raise ValueError(f"prompt_file {path}: not valid YAML ({exc})") from exc
    if not isinstance(doc, dict):
        raise ValueError(f"prompt_file {path}: expected a mapping of prompt fields, got {type(doc).__name__}")
    values: dict[str, str] = {}
    for key, value in doc.items():
        if key == "source":  # provenance written by the importer
            continue
        if key not in FIELDS:
            raise ValueError(f"prompt_file {path}: unknown field {key!r}; fields: {', '.join(FIELDS)}")
        if not isinstance(value, str):
            raise ValueError(f"prompt_file {path}: field {key!r} must be text, got {type(value).__name__}")
        values[key] = check_template(value, key, f"prompt_file {path}")
    if "multi_step" in values and "multi_step_first_call" not in values:
        values["multi_step_first_call"] = values["multi_step"]
    return replace(BUILT_IN, **values)


def load_prompt_template(path: str | Path) -> str:
    """A plain-text multi-step system prompt (``prompt_path``), checked against its placeholders."""
    path = Path(path).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"prompt_path {path}: cannot be read ({exc.strerror or exc})") from exc
    return check_template(text, "multi_step", f"prompt_path {path}")


def resolve_prompts(prompt_file: str = "", prompt_path: str = "") -> PromptSet:
    """The prompt set an experiment sends: the file's (or the built-in) set, with ``prompt_path``'s
    template, when given, as both multi-step system prompts."""
    prompts = load_prompt_file(prompt_file) if prompt_file else BUILT_IN
    if prompt_path:
        template = load_prompt_template(prompt_path)
        prompts = replace(prompts, multi_step=template, multi_step_first_call=template)
    return prompts


# ---- the path review (agents/path_review.py): the request sent instead of the question, in the
# platform's own words; the released script's text comes only through `giant-prompts import`. The JSON
# shape (field names) is the released one, so replies to either text parse the same (eval/path_review.py)
PATH_REVIEW_PROMPT = """\
Examine this whole-slide image as thoroughly as you can and decide whether the tissue is normal or \
cancerous. While you explore, keep track of the regions that matter for that decision. In the end, name \
the organ the tissue comes from and give your diagnosis.

Your steps are limited: send the JSON below before your last step is used up, and keep that last step \
for it. An examination that runs out of steps has no result.

When you are done, describe the 5 regions you examined that mattered most for your answer, in one JSON \
object of exactly this shape (coordinates in level-0 pixels, x and y the top-left corner):
```json
{{
  "regions": [
    {{
      "region_number": 1,
      "bbox": {{"x": <int>, "y": <int>, "width": <int>, "height": <int>}},
      "why_zoomed": "<what made you look at this region>",
      "observations": "<what you saw there>",
      "diagnostic_relevance": "<what it means for the diagnosis>"
    }}
  ],
  "answer": {{
    "organ_type": "<the organ>",
    "diagnosis": "<normal, or the specific cancer type>",
    "confidence": "<high, medium or low>",
    "key_findings": "<the main findings behind the diagnosis, in brief>"
  }}
}}
```
List all 5 regions in "regions", numbered 1 to 5. Keep count of your steps: the JSON must come before \
they run out."""


def prompt_provenance(prompt_file: str = "", prompt_path: str = "") -> dict[str, Any]:
    """Where an experiment's texts come from, for the leaderboard's provenance: the system prompt and
    tool texts, and each question-only benchmark's first user turn (official when a prompt file that
    ``giant-prompts import`` wrote gives it, else the platform's own words: not the official text)."""
    prompts = resolve_prompts(prompt_file, prompt_path)
    own = "built in: the platform's own words, not the official text"
    source = _import_source(prompt_file) if prompt_file else None
    if source is not None:
        given = f"official, from giant-prompts import of {source.get('repo')} @ {source.get('commit') or '?'}"
    else:
        given = f"the user's prompt file {prompt_file or prompt_path}"
    texts = given if (prompt_file or prompt_path) else own
    questions = {b: given if getattr(prompts, f"{b}_prompt") else own for b in QUESTION_BENCHMARKS}
    return {"system_and_tool_texts": texts, "first_user_turn": questions}


def _import_source(prompt_file: str) -> dict[str, Any] | None:
    """The ``source`` block ``giant-prompts import`` writes into a prompt file; None without one."""
    try:
        doc = yaml.safe_load(Path(prompt_file).expanduser().read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    source = doc.get("source") if isinstance(doc, dict) else None
    return source if isinstance(source, dict) else None


# ---- the random-region ablation (agents/random_regions.py): its texts, in the platform's own words
RANDOM_REGION_TOOL_DESCRIPTION = (
    "Show a region of the slide's tissue chosen at random: a square of at least 1000 level-0 pixels. "
    "It takes no arguments; you cannot choose where it is or how large. Every call shows another region."
)

RANDOM_REGION_PROMPT = """\
You are a pathologist examining a whole-slide image of {width} x {height} pixels at full resolution \
(level 0) to answer a question about it. You first see an overview of the whole slide; green guide \
lines, four per axis, are labelled with level-0 coordinates on every image you get.

You cannot choose where to look. Each call of the view_random_region tool shows you another region of \
the tissue picked at random, a square of at least 1000 level-0 pixels, as an image of at most \
{image_size} pixels on its long side. You have {max_steps} turns in all, the final answer included, so \
up to {analysis_steps} random regions. Use as many of them as you can: do not answer early, a broad \
sample of the tissue matters more than speed.

When you are ready, reply without calling the tool: first a report of what you saw (the architecture, \
the cells, any abnormal findings, your reasoning) in <report>...</report>, then the answer alone, \
exactly in the format the question asks for, in <response>...</response>."""

RANDOM_REGION_RESULT = (
    "Random region x0={x0}, y0={y0}, {w} x {h} level-0 pixels; the whole slide is {width} x {height}. "
    "Function calls left: {calls_left}. Random regions left to view: {regions_left}."
)
NO_REGIONS_LEFT = "No random regions are left to show. Give your final report and answer."


def texts_sha256() -> str:
    """Hash of every text this ablation sends (prompt, tool, results): a changed text is a new result set."""
    blob = "\x00".join(
        (RANDOM_REGION_PROMPT, RANDOM_REGION_TOOL_DESCRIPTION, RANDOM_REGION_RESULT, NO_REGIONS_LEFT)
    )
    return hashlib.sha256(blob.encode()).hexdigest()
