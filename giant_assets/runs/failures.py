"""When a batch failed: the share of its runs with a slide that ended without an answer from the model.

A run *failed* when its error kind is in ``RETRYABLE`` (``agent_error``: the model unreachable, a
refused or malformed request, an agent bug; ``timeout``). A run whose slide could not be found or read
(``slide_unavailable``, or an ``agent_error`` whose message starts with ``slide unavailable``) is not a
failure of the model: it is counted apart. Runs that answered without a label (``no_answer``,
``max_retries_exceeded``) are the model's answers, scored wrong, not failures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from giant_assets.runs.records import RETRYABLE, SLIDE_UNAVAILABLE

SLIDE_PREFIX = "slide unavailable"
FIRST_MESSAGES = 3


@dataclass
class FailureReport:
    """Failed runs of one batch against its ``max_failed_share``."""

    runs: int = 0  # runs with a slide
    failed: int = 0
    slide_unavailable: int = 0
    max_share: float = 0.2
    kinds: dict[str, int] = field(default_factory=dict)
    first: list[str] = field(default_factory=list)  # the first distinct failure messages

    @property
    def share(self) -> float:
        return self.failed / self.runs if self.runs else 0.0

    @property
    def over(self) -> bool:
        return self.failed > 0 and self.share > self.max_share

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.kinds.items())) or "none"
        return (
            f"{self.failed} of {self.runs} runs with a slide failed ({self.share:.0%}; max_failed_share "
            f"{self.max_share:g}): {kinds}; {self.slide_unavailable} runs without a readable slide apart"
        )


def is_slide_unavailable(row: dict[str, Any]) -> bool:
    kind, error = row.get("error_kind"), row.get("error") or ""
    return kind == SLIDE_UNAVAILABLE or (kind in RETRYABLE and error.startswith(SLIDE_PREFIX))


def failure_report(rows: Sequence[dict[str, Any]], max_share: float) -> FailureReport:
    """Count the failed runs of ``rows`` (journal/record dicts), their kinds and first messages."""
    report = FailureReport(max_share=max_share)
    kinds: Counter[str] = Counter()
    for row in rows:
        if is_slide_unavailable(row):
            report.slide_unavailable += 1
            continue
        report.runs += 1
        if row.get("error_kind") in RETRYABLE:
            kinds[row["error_kind"]] += 1
            message = " ".join(str(row.get("error") or "").split())[:400]
            if message not in report.first and len(report.first) < FIRST_MESSAGES:
                report.first.append(message)
    report.failed = sum(kinds.values())
    report.kinds = dict(kinds)
    return report
