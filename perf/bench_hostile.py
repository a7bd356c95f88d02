"""Degenerate model replies of about 1 MB, timed: the agent's tag scan and the JSON scan of model text
(target < 1 s each; the old regex took minutes on the tag loop, the plain JSON scan is quadratic). The
unit tests bound the same scans by counts (tests/agents/test_hostile_replies.py)."""

from __future__ import annotations

from giant_assets.agents.giant import split_answer
from giant_assets.core.jsonscan import json_objects
from perf.timing import best_of

TARGET_S = 1.0
TAG_LOOPS = ("<response>" * 100_000, "<report>" * 100_000 + "<response>2</response>")
JSON_LOOPS = ("{" * 1_000_000, '{"' * 300_000, '{"a":' * 200_000, '{"a": "' * 100_000)


def main() -> None:
    for name, scan, texts in (
        ("split_answer", split_answer, TAG_LOOPS),
        ("json_objects", json_objects, JSON_LOOPS),
    ):
        for text in texts:
            seconds, _ = best_of(lambda t=text, f=scan: f(t), repeats=3)
            verdict = "ok" if seconds < TARGET_S else f"SLOW (target < {TARGET_S} s)"
            print(f"{name}({text[:12]!r} x {len(text):,} chars): {seconds:.3f} s  {verdict}")


if __name__ == "__main__":
    main()
