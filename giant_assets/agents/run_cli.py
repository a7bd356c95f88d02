"""``giant-run``: one question about one slide from the shell, with any agent mode, printed step by step.

    giant-run SLIDE --question TEXT [--options A B ...] [--benchmark NAME]
              --provider openai|anthropic|azure|openrouter|bedrock|vertex|gemini
              [--api responses|chat] --model M [--base-url URL] [--api-key-env NAME]
              [--azure-endpoint URL [--api-version V]] [--deployment NAME] [--region R] [--project P]
              [--server vllm|sglang|ollama|llamacpp [--server-image-limit N]]
              [--mode giant|thumbnail|patch|random_patch] [--max-steps T] [--out trajectory.json]
              [--deadline SECONDS]
              [--reasoning-effort none|minimal|low|medium|high] [--thinking-budget N]

Prints one line per step (box, level, tokens, cost), then ``answer: <text>`` and ``label: <N or none>``
as its last lines, and writes the trajectory as JSON with ``--out``. Exit status: 0 answered, 1 the run
failed (the reason is printed, e.g. ``max_retries_exceeded``, or ``timeout`` past ``--deadline``, which
bounds the whole run), 2 usage errors (``--out`` is checked before the first call; if writing it still
fails, the answer is printed all the same and the exit status is 1). The question with
``--options`` is rendered as the platform renders a question-only prompt (``multipathqa.prompts``).
The API key is read from the environment variable ``--api-key-env`` names (none is needed for a loopback
base URL), stripped of surrounding whitespace, and redacted from everything printed or written.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from giant_assets.core.money import usd_text
from giant_assets.experiments.spec import AZURE_API_VERSION, PROVIDER_APIS, Experiment
from giant_assets.multipathqa.prompts import render_prompt
from giant_assets.runs.agent_api import AgentAnswer, AgentItem, Step
from giant_assets.runs.extraction import PANDA, extract_label
from giant_assets.slides.access import SlideError, open_slide

MODES = ("giant", "thumbnail", "patch", "random_patch")
DEFAULT_BENCHMARK = "cli"  # not a MultiPathQA benchmark: options are numbered, labels are option numbers


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="giant-run", description="Ask one question about one whole-slide image and print the trajectory."
    )
    p.add_argument(
        "slide",
        type=Path,
        help="whole-slide image: a file OpenSlide opens (.svs, .tiff, .ndpi, .mrxs, ...) or a DICOM folder",
    )
    p.add_argument("--question", required=True, help="the question (a template with {options} is filled in)")
    p.add_argument("--options", nargs="+", metavar="OPTION", help="answer options, numbered from 1")
    p.add_argument(
        "--benchmark", default=None, help="benchmark whose answer rules apply (panda: ISUP grade 0..5)"
    )
    p.add_argument("--provider", required=True, choices=tuple(PROVIDER_APIS))
    p.add_argument("--azure-endpoint", default="", help="azure: https://RESOURCE.openai.azure.com")
    p.add_argument("--api-version", help=f"azure: api-version (default {AZURE_API_VERSION})")
    p.add_argument("--deployment", default="", help="azure deployment / bedrock or vertex model id")
    p.add_argument("--region", default="", help="bedrock, vertex: the cloud region; gemini: via Vertex AI")
    p.add_argument("--project", default="", help="vertex, gemini on Vertex AI: the Google Cloud project")
    p.add_argument("--api", choices=("responses", "chat"), help="OpenAI wire format (default responses)")
    p.add_argument("--model", required=True, help="model id as the provider knows it")
    p.add_argument("--base-url", default="", help="SDK base URL, e.g. http://127.0.0.1:8000/v1 for OpenAI")
    p.add_argument(
        "--server",
        choices=("vllm", "sglang", "ollama", "llamacpp"),
        help="a local OpenAI-compatible server (with --provider openai): docs/open-models.md",
    )
    p.add_argument("--server-image-limit", type=int, help="the server's images per request (vLLM limit-mm)")
    p.add_argument("--api-key-env", default="", help="environment variable holding the API key")
    p.add_argument("--mode", choices=MODES, default="giant", help="agent (default giant)")
    p.add_argument("--max-steps", type=int, default=20, help="model calls per attempt, answer included")
    p.add_argument("--image-size", type=int, help="long side of every image (default 1000 / 500)")
    p.add_argument("--thumbnail-size", type=int, default=1024, help="thumbnail mode: the slide's long side")
    p.add_argument("--n-patches", type=int, default=30, help="patch mode: patches per question")
    p.add_argument("--seed", type=int, default=0, help="seed of random patches and crops")
    p.add_argument("--prompt-file", default="", help="prompt file, e.g. from giant-prompts import")
    p.add_argument("--note-tool", action="store_true", help="offer the official note tool")
    p.add_argument(
        "--serve-calls", choices=("all", "first"), help="tool calls served per reply (default: per provider)"
    )
    p.add_argument(
        "--reasoning-effort",
        choices=("none", "minimal", "low", "medium", "high"),
        default="high",
        help="OpenAI reasoning effort (default high; none: send no reasoning options). Never sent to a "
        "model without reasoning (gpt-4o, gpt-4.1, ...)",
    )
    p.add_argument(
        "--thinking-budget",
        type=int,
        default=1024,
        help="Anthropic thinking tokens (default 1024, at least 1024; 0: thinking off)",
    )
    p.add_argument("--out", type=Path, help="write the trajectory JSON here")
    p.add_argument(
        "--deadline",
        type=float,
        default=Experiment.model_fields["item_timeout_s"].default,
        help="seconds the whole run may take, all attempts (default: item_timeout_s's, 3900)",
    )
    return p


def experiment_from_args(args: argparse.Namespace) -> Experiment:
    """The run configuration the arguments describe (raises ValidationError for incoherent ones)."""
    fields: dict[str, Any] = {
        "name": "giant-run",
        "agent": args.mode,
        "provider": args.provider,
        "api": args.api,
        "model": args.model,
        "base_url": args.base_url,
        "azure_endpoint": args.azure_endpoint,
        "api_version": args.api_version,
        "deployment": args.deployment,
        "region": args.region,
        "project": args.project,
        "server": args.server,
        "server_image_limit": args.server_image_limit,
        "api_key_env": args.api_key_env,
        "max_steps": args.max_steps,
        "image_size": args.image_size,
        "thumbnail_size": args.thumbnail_size,
        "n_patches": args.n_patches,
        "seed": args.seed,
        "prompt_file": args.prompt_file,
        "note_tool": args.note_tool,
        "serve_calls": args.serve_calls,
        "reasoning_effort": None if args.reasoning_effort == "none" else args.reasoning_effort,
        "thinking_budget": args.thinking_budget,
    }
    return Experiment(**fields)


def format_step(step: Step) -> str:
    """One printed line: index, action, box, level, image size, tokens, cost, and any error."""
    parts = [f"step {step.index}", step.action]
    if step.attempt > 1:
        parts.append(f"attempt {step.attempt}")
    if step.box is not None:
        parts.append("box " + ",".join(str(v) for v in step.box))
    if step.level is not None:
        parts.append(f"level {step.level}")
    if step.image_size is not None:
        parts.append(f"image {step.image_size[0]}x{step.image_size[1]}")
    parts.append(f"tokens {step.input_tokens} in / {step.output_tokens} out")
    parts.append(usd_text(step.cost_usd, 6))
    if step.note:
        parts.append(f"note: {step.note}")
    if step.error:
        parts.append(f"error: {step.error}")
    parts += [f"provider note: {note}" for note in step.provider_notes]
    return "  ".join(parts)


def label_of(text: str, benchmark: str, options: list[str] | None) -> int | None:
    """The extracted label, or None (also when there is nothing to extract against)."""
    if benchmark != PANDA and not options:
        return None
    return extract_label(text, benchmark_name=benchmark, options=options).label


def trajectory_doc(
    exp: Experiment, item: AgentItem, answer: AgentAnswer, label: int | None, question: str
) -> dict[str, Any]:
    """What ``--out`` holds: the settings (no key), the question, every step, the answer and its label."""
    return {
        "slide": item.wsi_path,
        "slide_size": [item.width, item.height],
        "benchmark": item.benchmark_name,
        "question": question,
        "options": item.options,
        "prompt": item.prompt,
        "settings": exp.answer_settings(),
        "config_hash": exp.config_hash(),
        "answer": answer.text,
        "label": label,
        "error": answer.error,
        "error_kind": answer.error_kind,
        "attempts": answer.attempts,
        "input_tokens": answer.input_tokens,
        "output_tokens": answer.output_tokens,
        "cost_usd": answer.cost_usd,
        "steps": answer.steps_as_dicts(),
    }


async def _run(exp: Experiment, item: AgentItem, deadline_s: float) -> AgentAnswer:
    # imported here: the SDKs take seconds to import, and usage errors should not wait for them
    from giant_assets.agents.registry import make_agent
    from giant_assets.runs.ratelimit import make_rate_limiter

    limiter = make_rate_limiter(exp.provider, exp.model, exp.api_key_env, exp.requests_per_minute)
    agent = make_agent(exp, None, limiter)  # giant, thumbnail or patch (MODES): no truth labels needed
    try:
        async with asyncio.timeout(deadline_s):
            return await agent.answer(item, 0)
    except TimeoutError:
        message = f"no answer within --deadline {deadline_s:g}s; raise --deadline for slow models"
        return AgentAnswer(text="", error=message, error_kind="timeout")
    finally:
        await agent.aclose()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    options = list(args.options) if args.options else None
    benchmark = args.benchmark or DEFAULT_BENCHMARK
    if args.mode == "patch" and benchmark != PANDA and not options:
        parser.error("--mode patch votes over labels: give --options, or --benchmark panda")
    try:
        exp = experiment_from_args(args)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in exc.errors()
        )
        parser.error(problems)
    try:
        exp.answer_settings()  # reads and checks the prompt file
    except ValueError as exc:
        parser.error(str(exc))
    try:
        with open_slide(args.slide) as slide:
            width, height = (int(v) for v in slide.dimensions)
    except SlideError as exc:
        parser.error(str(exc))
    if not args.deadline > 0:
        parser.error("--deadline must be a positive number of seconds")
    if args.out is not None and (problem := out_problem(args.out)):
        parser.error(problem)  # before the first (paid) call
    prompt = render_prompt(args.question, options)
    item = AgentItem(
        benchmark, "giant-run", prompt, options, str(args.slide), width, height, question=args.question
    )
    from giant_assets.agents.providers import BadCABundle, MissingAPIKey, UnsafeEndpoint
    from giant_assets.core.secrets import redact_secrets

    try:
        answer = asyncio.run(_run(exp, item, args.deadline))
    except (BadCABundle, MissingAPIKey, UnsafeEndpoint) as exc:
        parser.error(str(exc))
    for step in answer.steps:
        print(redact_secrets(format_step(step)))
    label = label_of(answer.text, benchmark, options) if answer.error is None else None
    status = 0 if answer.error is None else 1
    if args.out is not None:
        doc = trajectory_doc(exp, item, answer, label, args.question)
        try:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(redact_secrets(json.dumps(doc, indent=2, default=str)))
        except OSError as exc:
            print(f"error: --out {args.out}: cannot be written ({exc.strerror or exc}); the answer follows")
            status = 1
    if answer.error is not None:
        print(redact_secrets(f"failed: {answer.error_kind or 'agent_error'}: {answer.error}"))
    print(f"total: {len(answer.steps)} steps, {usd_text(answer.cost_usd, 6)}")
    print(redact_secrets(f"answer: {' '.join(answer.text.split())}"))  # one line, whatever the layout
    print(f"label: {'none' if label is None else label}")
    return status


def out_problem(out: Path) -> str | None:
    """Why ``--out`` cannot take the trajectory (a directory, an unwritable folder), or None."""
    if out.is_dir():
        return f"--out {out} is a directory; give a file name such as {out / 'trajectory.json'}"
    folder = next((p for p in out.parents if p.exists()), Path("."))
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        return f"--out {out}: cannot create a file under {folder}; choose a writable path"
    return None


if __name__ == "__main__":
    sys.exit(main())
