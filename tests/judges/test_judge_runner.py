"""run_judge / run_judge_on_cases / giant-judge-run with real subprocess judges, well- and ill-behaved."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from giant_assets.judges.runner import (
    JudgeCrashError,
    JudgeNotFoundError,
    JudgeOutputError,
    JudgeTimeoutError,
    main,
    run_judge,
    run_judge_on_cases,
)

BIN = Path(sys.executable).parent
SPEC = Path("/work/shared/spec/002_198f4ec75554eb76.txt")
PAYLOAD = {"candidate_answer": {"bbox": [0, 0, 10, 10]}, "reference_answer": {"bbox": [5, 5, 15, 15]}}


def script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text("import json, os, sys, time\n" + body)
    return path


HANG = 3600  # s a hung judge or an escaped child sleeps: a runner that waited for one never returns,
# and pytest-timeout (HANG_GUARD_S) fails the test; no assertion here depends on the machine's speed
HANG_GUARD_S = 120


def wait_dead(*pids: int) -> None:
    """Until every pid is gone (the runner killed them: SIGKILL lands within moments)."""
    while any(alive(pid) for pid in pids):
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:  # a zombie still answers kill(0)
        return fh.read().split(") ")[1][0] != "Z"


def test_runs_installed_judge_and_module_and_py_path():
    for command in ([str(BIN / "giant-judge-iou")], [sys.executable, "-m", "giant_assets.judges.bbox_iou"]):
        res = run_judge(command, PAYLOAD)
        assert res.score == pytest.approx(25 / 175) and res.misses == ["IoU below threshold: 0.143 < 0.5"]
        assert res.reasoning == "Bounding box IoU = 0.143" and res.duration_s > 0


def test_runs_the_spec_reference_judge_script(tmp_path):
    """The spec's own IoU code_judge (extracted from the spec text) gives the same IoU as ours."""
    code = re.search(
        r"### Basic IoU Evaluator \(Python\)\s*```python\n(.*?)```", SPEC.read_text(), re.S
    ).group(1)
    path = tmp_path / "iou_evaluator.py"
    path.write_text(code)
    payload = {"candidate_answer": {"bbox": [1, 2, 30, 40]}, "reference_answer": {"bbox": [10, 5, 25, 50]}}
    theirs = run_judge(path, payload)
    ours = run_judge([str(BIN / "giant-judge-iou")], payload)
    assert theirs.score == pytest.approx(ours.score, abs=1e-15)
    assert (theirs.hits, theirs.misses, theirs.reasoning) == (ours.hits, ours.misses, ours.reasoning)


@pytest.mark.timeout(HANG_GUARD_S)
def test_timeout_kills_the_judge_and_its_children(tmp_path):
    pids = tmp_path / "pids"
    hang = script(
        tmp_path,
        "hang.py",
        "import subprocess\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep({HANG})'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
        f"time.sleep({HANG})\n",
    )
    with pytest.raises(JudgeTimeoutError, match=r"timed out after 1\.5 s and was killed"):
        run_judge(hang, PAYLOAD, timeout_s=1.5)
    wait_dead(*map(int, pids.read_text().split()))


@pytest.mark.timeout(HANG_GUARD_S)
def test_a_grandchild_in_a_new_session_cannot_hang_the_runner(tmp_path):
    """Fault 7: a judge whose child calls setsid and keeps stdout open used to hang past --timeout."""
    pids, sid = tmp_path / "pids", tmp_path / "sid"
    grandchild = (
        f"import os, time; os.setsid(); open({str(sid)!r}, 'w').write(str(os.getsid(0))); time.sleep({HANG})"
    )
    escape = script(
        tmp_path,
        "escape.py",
        "import subprocess\n"
        f"child = subprocess.Popen([sys.executable, '-c', {grandchild!r}])\n"
        f"while not os.path.exists({str(sid)!r}): time.sleep(0.01)\n"  # escaped before the timeout
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
        f"time.sleep({HANG})\n",
    )
    with pytest.raises(JudgeTimeoutError, match=r"timed out after 1 s"):
        run_judge(escape, PAYLOAD, timeout_s=1)  # returns although the grandchild holds stdout
    parent, child = map(int, pids.read_text().split())
    assert int(sid.read_text()) == child  # it really left the judge's session (its own session id)
    wait_dead(parent, child)


@pytest.mark.timeout(HANG_GUARD_S)
def test_a_judge_that_answers_but_leaves_a_daemon_holding_stdout(tmp_path):
    """The verdict is used; the escaped child holding stdout is killed after a short grace, not awaited."""
    pids = tmp_path / "pids"
    daemon = script(
        tmp_path,
        "daemon.py",
        "import subprocess\n"
        "child = subprocess.Popen([sys.executable, '-c', "
        f"'import os, time; os.setsid(); time.sleep({HANG})'])\n"
        f"open({str(pids)!r}, 'w').write(str(child.pid))\n"
        "print(json.dumps({'score': 0.25, 'hits': [], 'misses': ['m']}), flush=True)\n",
    )
    res = run_judge(daemon, PAYLOAD, timeout_s=HANG)  # the verdict, not the daemon's end (an hour away)
    assert res.score == 0.25
    wait_dead(int(pids.read_text()))


def test_agentv_script_grader_output_is_accepted(tmp_path):
    judge = script(
        tmp_path,
        "agentv.py",
        "print(json.dumps({'pass': False, 'score': 0.4, 'reason': 'partly', 'checks': ["
        "{'text': 'box 1 ok', 'pass': True}, {'text': 'box 2 missed', 'pass': False, 'score': 0}]}))\n",
    )
    res = run_judge(judge, PAYLOAD)
    assert (res.score, res.passed, res.reasoning) == (0.4, False, "partly")
    assert (res.hits, res.misses) == (["box 1 ok"], ["box 2 missed"])
    bad = script(
        tmp_path, "bad_checks.py", "print(json.dumps({'pass': True, 'score': 1, 'checks': [{'x': 1}]}))\n"
    )
    with pytest.raises(JudgeOutputError, match="'checks' must be a list of"):
        run_judge(bad, PAYLOAD)


def test_nonpositive_limits_are_refused():
    with pytest.raises(ValueError, match="timeout_s must be a positive"):
        run_judge("giant-judge-iou", PAYLOAD, timeout_s=0)
    with pytest.raises(ValueError, match="max_output_bytes must be positive"):
        run_judge("giant-judge-iou", PAYLOAD, max_output_bytes=-1)


def test_garbage_output(tmp_path):
    with pytest.raises(JudgeOutputError, match=r"judge output is not JSON .*'hello, I am a judge"):
        run_judge(script(tmp_path, "garbage.py", "print('hello, I am a judge')\n"), PAYLOAD)
    with pytest.raises(JudgeOutputError, match="wrote nothing to stdout"):
        run_judge(script(tmp_path, "silent.py", "pass\n"), PAYLOAD)


def test_crash_reports_exit_code_and_stderr_tail(tmp_path):
    crash = script(tmp_path, "crash.py", "sys.stdin.read()\nraise RuntimeError('boom at step 3')\n")
    with pytest.raises(
        JudgeCrashError, match=r"exited with code 1; stderr tail:\n(.|\n)*RuntimeError: boom at step 3"
    ):
        run_judge(crash, PAYLOAD)
    killed = script(tmp_path, "killed.py", "os.kill(os.getpid(), 9)\n")
    with pytest.raises(JudgeCrashError, match="killed by signal 9"):
        run_judge(killed, PAYLOAD)


@pytest.mark.parametrize(
    ("verdict", "message"),
    [
        ({"score": 1.5, "hits": [], "misses": []}, r"'score' is 1\.5, outside \[0, 1\]"),
        ({"score": -0.1, "hits": [], "misses": []}, "outside"),
        ({"score": "1", "hits": [], "misses": []}, "'score' must be a finite number"),
        ({"score": 0.5, "hits": []}, r"missing field\(s\) \['misses'\]"),
        ({"score": 0.5, "hits": "all", "misses": []}, "'hits' must be a list of strings"),
        ({"score": 0.5, "hits": [], "misses": [], "reasoning": 3}, "'reasoning' must be a string"),
        ([0.5], "must be a JSON object, got list"),
    ],
)
def test_invalid_verdicts(tmp_path, verdict, message):
    judge = script(tmp_path, "bad.py", f"print(json.dumps({verdict!r}))\n")
    with pytest.raises(JudgeOutputError, match=message):
        run_judge(judge, PAYLOAD)


def test_reasoning_is_optional_and_judges_may_ignore_stdin(tmp_path):
    judge = script(tmp_path, "lazy.py", "print(json.dumps({'score': 1, 'hits': ['ok'], 'misses': []}))\n")
    res = run_judge(judge, {"candidate_answer": {"blob": "x" * 2_000_000}, "reference_answer": {}})
    assert (res.score, res.hits, res.reasoning) == (1.0, ["ok"], "")


def test_output_over_the_cap_kills_the_judge(tmp_path):
    flood = script(tmp_path, "flood.py", "while True:\n    sys.stdout.write('x' * 65536)\n")
    with pytest.raises(JudgeOutputError, match="exceeds 100000 bytes"):
        run_judge(flood, PAYLOAD, max_output_bytes=100_000, timeout_s=20)


def test_missing_or_unusable_judge(tmp_path):
    with pytest.raises(JudgeNotFoundError, match="not found: 'no-such-judge-xyz'"):
        run_judge("no-such-judge-xyz --flag", PAYLOAD)
    plain = tmp_path / "judge.sh"
    plain.write_text("#!/bin/sh\necho {}\n")
    with pytest.raises(JudgeNotFoundError, match="is not executable"):
        run_judge(plain, PAYLOAD)
    plain.chmod(0o755)
    with pytest.raises(JudgeOutputError, match="missing field"):
        run_judge(plain, PAYLOAD)


def write_cases(tmp_path: Path) -> Path:
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "a_perfect.json").write_text(
        json.dumps({"candidate_answer": {"bbox": [0, 0, 4, 4]}, "reference_answer": {"bbox": [0, 0, 4, 4]}})
    )
    (cases / "b_half.json").write_text(
        json.dumps({"candidate_answer": {"bbox": [0, 0, 4, 4]}, "reference_answer": {"bbox": [0, 0, 4, 2]}})
    )
    (cases / "c_broken.json").write_text("{oops")
    (cases / "d_malformed.json").write_text(json.dumps({"candidate_answer": {}, "reference_answer": {}}))
    (cases / "notes.txt").write_text("ignored")
    return cases


def test_cases_directory_each_failure_is_its_own_row(tmp_path):
    df = run_judge_on_cases([str(BIN / "giant-judge-iou")], write_cases(tmp_path), workers=2)
    assert df.case_id.tolist() == ["a_perfect", "b_half", "c_broken", "d_malformed"]
    assert df.score.tolist()[:2] == [1.0, 0.5] and df.score.isna().tolist()[2] and df.score[3] == 0.0
    assert df.error.isna().tolist() == [True, True, False, True]
    assert "c_broken.json: invalid JSON" in df.error[2]
    assert df.misses[3] == ["Missing bounding box data"] and df["pass"].tolist() == [True, True, None, False]


def test_jsonl_cases_with_a_misbehaving_judge(tmp_path):
    cases = tmp_path / "cases.jsonl"
    lines = [
        json.dumps({"id": "first", "candidate_answer": {"n": 0.25}, "reference_answer": {}}),
        "",
        json.dumps({"candidate_answer": {"n": 7}, "reference_answer": {}}),
        "not json",
    ]
    cases.write_text("\n".join(lines) + "\n")
    echo = script(
        tmp_path,
        "echo.py",
        "n = json.load(sys.stdin)['candidate_answer']['n']\n"
        "print(json.dumps({'score': n, 'hits': [], 'misses': []}))\n",
    )
    df = run_judge_on_cases(echo, cases)
    assert df.case_id.tolist() == ["first", "line-3", "line-4"]
    assert df.score[0] == 0.25
    assert df.error[1].startswith("JudgeOutputError: ") and "outside [0, 1]" in df.error[1]
    assert "line 4: invalid JSON" in df.error[2]


def test_unreadable_case_files_are_rows_not_batch_losses(tmp_path):
    """Fault 7: one non-UTF-8 or very deeply nested case file used to lose the whole batch."""
    cases = write_cases(tmp_path)
    (cases / "e_latin1.json").write_bytes(b'{"candidate_answer": {"bbox": [0, 0, 1, 1]}, "note": "caf\xe9"}')
    (cases / "f_deep.json").write_text('{"candidate_answer": ' + "[" * 100_000 + "]" * 100_000 + "}")
    df = run_judge_on_cases("giant-judge-iou", cases)
    assert df.case_id.tolist() == ["a_perfect", "b_half", "c_broken", "d_malformed", "e_latin1", "f_deep"]
    assert df.score.tolist()[:2] == [1.0, 0.5]
    assert "e_latin1.json: not UTF-8 text (byte 0xe9 at offset 57)" in df.error[4]
    assert "f_deep.json: JSON nested 100001 levels deep; the limit is 64" in df.error[5]
    jsonl = tmp_path / "cases.jsonl"
    good = json.dumps(
        {"candidate_answer": {"bbox": [0, 0, 4, 4]}, "reference_answer": {"bbox": [0, 0, 4, 4]}}
    )
    jsonl.write_bytes(
        good.encode()
        + b"\n"
        + b'{"x": "\xff"}\n'
        + ("[" * 5000 + "]" * 5000).encode()
        + b"\n"
        + good.encode()
    )
    rows = run_judge_on_cases("giant-judge-iou", jsonl)
    assert rows.case_id.tolist() == ["line-1", "line-2", "line-3", "line-4"]
    assert rows.score[0] == rows.score[3] == 1.0
    assert "line 2: not UTF-8" in rows.error[1] and "line 3: JSON nested 5000 levels" in rows.error[2]


def test_cli_summary_and_results_file(tmp_path):
    cases, out = write_cases(tmp_path), tmp_path / "results.jsonl"
    proc = subprocess.run(
        [str(BIN / "giant-judge-run"), "giant-judge-iou", str(cases), "--out", str(out), "--timeout", "20"],
        capture_output=True,
        text=True,
        env=os.environ | {"PATH": f"{BIN}"},
    )
    assert proc.returncode == 1, proc.stderr  # one case errored
    assert "cases: 4  scored: 3  errors: 1  mean score: 0.5000" in proc.stdout
    assert "error in c_broken:" in proc.stdout
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["score"] for r in rows] == [1.0, 0.5, None, 0.0]
    missing = subprocess.run(
        [str(BIN / "giant-judge-run"), "giant-judge-iou", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        env=os.environ | {"PATH": f"{BIN}"},
    )
    assert missing.returncode == 2 and "neither a directory nor a file" in missing.stderr


def test_cli_resolves_bundled_judges_without_the_venv_on_path(tmp_path):
    """Fault 9: the README's `giant-judge-run giant-judge-iou cases/` failed unless the venv was on PATH."""
    cases = write_cases(tmp_path)
    proc = subprocess.run(
        [str(BIN / "giant-judge-run"), "giant-judge-iou", str(cases)],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "PATH"} | {"PATH": "/nonexistent"},
    )
    assert proc.returncode == 1, proc.stderr
    assert "cases: 4  scored: 3  errors: 1" in proc.stdout


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--timeout", "0"),
        ("--timeout", "-3"),
        ("--timeout", "nan"),
        ("--max-output-bytes", "0"),
        ("--workers", "0"),
    ],
)
def test_cli_limits_must_be_positive(tmp_path, capsys, flag, value):
    with pytest.raises(SystemExit) as exit_info:
        main(["giant-judge-iou", str(tmp_path), flag, value])
    assert exit_info.value.code == 2 and f"argument {flag}:" in capsys.readouterr().err
