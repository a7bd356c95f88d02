"""What the model is asked: the CSV's prompt with its options, in every one of the CSV's two formats.

gtex, tcga and panda prompts are complete ``str.format`` templates: ``{options}`` becomes the numbered
option list, each line ended by a newline as the official benchmark script writes it, and ``{{``/``}}``
become ``{``/``}``. tcga_slidebench and tcga_expert_vqa prompts hold only the question (no ``{options}``,
no answer format): those are wrapped, in the platform's own words (not the official benchmark script's
templates, which ``giant-prompts import`` brings: ``experiments.prompts``), as the question, a blank
line, the numbered options and an instruction to answer with the option number as JSON ``{"answer": N}``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_TEMPLATE_TOKEN = re.compile(r"\{\{|\}\}|\{options\}")
OPTIONS_PLACEHOLDER = "{options}"


def format_options(options: Sequence[str]) -> str:
    """Options as the numbered list the model answers from: ``1. Esophagus`` and a newline per option,
    as the official benchmark script builds ``{options}``."""
    return "".join(f"{i}. {opt}\n" for i, opt in enumerate(options, start=1))


def answer_instruction(n_options: int) -> str:
    """How a question-only prompt asks for its answer: the option number as JSON."""
    return (
        f"Reply with the number of the one correct option, an integer from 1 to {n_options}, as a JSON "
        'object of the form {"answer": N}; for example {"answer": 2} if the second option is correct.'
    )


def substitute(template: str, options: Sequence[str] | None) -> str:
    """Replace ``{options}``, turn ``{{``/``}}`` into ``{``/``}``; leave any other brace text as it is."""
    listing = format_options(options or [])

    def token(match: re.Match[str]) -> str:
        return {"{{": "{", "}}": "}"}.get(match.group(0), listing)

    return _TEMPLATE_TOKEN.sub(token, template)


def render_prompt(template: str, options: Sequence[str] | None) -> str:
    """The prompt as sent: a template is filled in; a bare question gets its options and answer format."""
    if options and OPTIONS_PLACEHOLDER not in template:
        question = substitute(template, None).strip()
        listing = format_options(options).rstrip("\n")
        return f"{question}\n\nOptions:\n{listing}\n\n{answer_instruction(len(options))}"
    return substitute(template, options)


def asked_question(template: str) -> str:
    """The question as the dataset asks it, for a reader who sees the options apart: the CSV's prompt
    without the option list (``{options}`` left empty) and without anything the platform appends."""
    return re.sub(r"\n{3,}", "\n\n", substitute(template, None)).strip()


def missing_options(prompt: str, options: Sequence[str] | None) -> list[int]:
    """1-based numbers of the options the rendered prompt does not show as ``N. text``."""
    shown = [] if options is None else options
    return [i for i, opt in enumerate(shown, start=1) if f"{i}. {opt}" not in prompt]
