"""Each installed judge as a real subprocess speaking the spec's stdin/stdout protocol."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def run(command: list[str], stdin: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60)


def test_echo_pipe_into_installed_iou_judge():
    payload = '{"candidate_answer": {"bbox": [0, 0, 10, 10]}, "reference_answer": {"bbox": [0, 5, 10, 15]}}'
    proc = subprocess.run(
        f"echo '{payload}' | {BIN / 'giant-judge-iou'}",
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out == {
        "score": pytest.approx(50 / 150),
        "hits": [],
        "misses": ["IoU below threshold: 0.333 < 0.5"],
        "reasoning": "Bounding box IoU = 0.333",
        "pass": False,
        "reason": "Bounding box IoU = 0.333",
        "checks": [{"text": "IoU below threshold: 0.333 < 0.5", "pass": False}],
    }
    module = run([sys.executable, "-m", "giant_assets.judges.bbox_iou"], payload)
    assert json.loads(module.stdout) == out


@pytest.mark.parametrize(
    ("script", "payload", "score"),
    [
        (
            "giant-judge-match",
            {
                "candidate_answer": {"boxes": [[0, 0, 10, 10], [50, 50, 60, 60]]},
                "reference_answer": {"boxes": [[0, 0, 10, 10]]},
            },
            2 / 3,
        ),
        (
            "giant-judge-distance",
            {"candidate_answer": {"point": [6, 8]}, "reference_answer": {"point": [0, 0]}},
            1.0,
        ),
        (
            "giant-judge-polygon",
            {
                "candidate_answer": {"polygon": [[0, 0], [4, 0], [0, 4]]},
                "reference_answer": {"polygon": [[0, 0], [2, 0], [2, 2], [0, 2]]},
            },
            0.5,
        ),
        (
            "giant-judge-rotated-iou",
            {"candidate_answer": {"rbox": [0, 0, 2, 2, 0]}, "reference_answer": {"rbox": [0, 0, 2, 2, 90]}},
            1.0,
        ),
        (
            "giant-judge-map",
            {
                "candidate_answer": {
                    "detections": [{"image_id": 1, "category_id": 3, "bbox": [0, 0, 5, 5], "score": 0.3}]
                },
                "reference_answer": {
                    "ground_truths": [{"image_id": 1, "category_id": 3, "bbox": [0, 0, 5, 5]}]
                },
            },
            1.0,
        ),
    ],
)
def test_each_console_script(script, payload, score):
    proc = run([str(BIN / script)], json.dumps(payload))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["score"] == pytest.approx(score)


def test_malformed_input_exits_zero_but_invalid_json_does_not():
    bad = run(
        [str(BIN / "giant-judge-polygon")],
        '{"candidate_answer": {"polygon": [[0, 0]]}, "reference_answer": {}}',
    )
    assert bad.returncode == 0 and json.loads(bad.stdout)["score"] == 0.0
    broken = run([str(BIN / "giant-judge-polygon")], '{"candidate_answer": ')
    assert broken.returncode == 2 and broken.stdout == ""
    assert broken.stderr.startswith("invalid JSON on stdin:")
