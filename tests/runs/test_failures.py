"""The failed share of a batch: model failures (agent_error, timeout) over runs with a slide; slides
that could not be found or read are counted apart, answers without a label are not failures."""

from __future__ import annotations

from giant_assets.runs.failures import failure_report


def row(kind: str | None, error: str | None = None) -> dict:
    return {"error_kind": kind, "error": error}


def test_slides_apart_answers_not_failures_and_first_distinct_messages() -> None:
    rows = [
        row(None),
        row("no_answer", "no label could be extracted"),
        row("max_retries_exceeded", "no answer within 20 steps"),
        row("slide_unavailable", "not found under the WSI root"),
        row("agent_error", "slide unavailable: reading /s/a.svs failed: bad tile"),  # GIANT's read error
        row("agent_error", "model call failed at step 1: HTTP 401"),
        row("agent_error", "model call failed at step 1: HTTP 401"),
        row("timeout", "no answer within 900.0s"),
    ]
    report = failure_report(rows, max_share=0.5)
    assert (report.runs, report.failed, report.slide_unavailable) == (6, 3, 2)
    assert report.kinds == {"agent_error": 2, "timeout": 1} and report.share == 0.5 and not report.over
    assert report.first == ["model call failed at step 1: HTTP 401", "no answer within 900.0s"]
    assert failure_report(rows, max_share=0.49).over
    assert report.summary().startswith("3 of 6 runs with a slide failed (50%; max_failed_share 0.5)")


def test_no_failure_is_never_over_even_at_share_zero() -> None:
    assert not failure_report([row(None)], max_share=0.0).over
    assert not failure_report([row("slide_unavailable", "gone")], max_share=0.0).over
    assert failure_report([row(None), row("timeout", "t")], max_share=0.0).over
