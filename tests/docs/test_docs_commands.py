"""Every shell command of the README and docs/*.md runs here as written, or is listed with the reason it
cannot (issue 23, section 4): a command in neither table fails the first test, naming file, line and text.

The commands run for real in a sandbox laid out like a clone (``.venv`` -> this venv, ``dagster_home``,
``experiments.yaml``, ``data/``), in three bash scripts side by side (see FIRST below). Each block runs in
its own subshell, so its ``export`` lines are the environment of its later commands only. Where a command
needs the network, a GPU or a paid API, a named substitution (``subs`` of its entry in RUNS; SANDBOX for
the environment) points it at a loopback server, a fixture or an offline experiment instead. Each command
must exit 0 and print what its entry expects; the last test checks the files, tables and queued runs left.
The scripts' transcripts are kept in the sandbox as ``docs-commands-*.log``, each command's wall seconds,
slowest first, in ``docs-commands-seconds.txt``.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest
import yaml

from giant_assets.demo.scripted import ScriptedModelServer, demo_policy
from giant_assets.demo.ui import create_storage
from giant_assets.multipathqa.loading import parse_items, read_csv_strings
from giant_assets.multipathqa.sample import CORRUPT_SLIDE, ensure_sample_slides, sample_csv_path
from giant_assets.multipathqa.schema import WSI_OK
from giant_assets.multipathqa.wsi import TCGA_BENCHMARKS, SlideTree, resolve_slide
from tests.agents.test_prompts import fixture_repo
from tests.docs.commands import Command, all_blocks
from tests.support.gdc_server import GdcServer, ServedFile
from tests.support.hf_server import HubServer

# one worker builds the sandbox once for all; ~80 CPU-seconds of real commands, so a loaded machine needs time
pytestmark = [pytest.mark.xdist_group("docs_commands"), pytest.mark.timeout(600)]
REPO = Path(__file__).resolve().parents[2]
BLOCKS = all_blocks(REPO)
COMMANDS = [c for b in BLOCKS for c in b.commands if not c.is_export]
HF_REPO, HF_FILE = "tbuckley/MultiPathQA", "MultiPathQA.csv"
SUCCESS = r"RUN_SUCCESS - Finished execution of run"
CHECKED = (
    r"\| all\s+\|\s+{n_rows} \|",
    r"every slide is there and readable\n\n0 row\(s\) written to missing\.csv",
)


@dataclass(frozen=True)
class Run:
    """A command run in the sandbox: its pattern, what its output must show, substitutions made."""

    pattern: str  # re.search on the command's text
    expect: tuple[str, ...] = ()  # regexes its output must match ({names} from the sandbox's context)
    subs: tuple[tuple[str, str, str], ...] = ()  # (text as written, text run, why)
    block_output: bool = False  # a background command: look in the whole transcript
    after_first: bool = False  # reads what FIRST makes: waits for it (its block may start before)
    check: Callable[[Command, str], None] | None = None
    file: str = ""  # only this page's commands (the same command on two pages may expect different output)


@dataclass(frozen=True)
class NotRun:
    pattern: str
    reason: str
    covered_by: str = ""  # tests/...py::test_name that exercises it instead
    file: str = ""


def _synopsis_options_exist(command: Command, output: str) -> None:
    """Every --option of a usage synopsis is an option of the installed command."""
    options = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", command.text))
    missing = {o for o in options if not re.search(rf"{re.escape(o)}(?![\w-])", output)}
    assert options and not missing, f"{command.where()}: {sorted(missing)} not in the command's --help"


GIANT = "gpt5-giant calls the paid OpenAI API; {offline} is an offline experiment of experiments.yaml"
SANDBOX = {  # the substitutions made for every command, beside the per-command ones in RUNS
    "the clone": "a temp directory laid out as the repository: .venv -> the test's venv, dagster_home/"
    "dagster.yaml and experiments.yaml copied, data/sample_wsi generated as ingest would; DAGSTER_HOME="
    "<sandbox>/dagster_home as the Makefile sets it; the venv's bin first on PATH (for bare commands)",
    "HF_ENDPOINT": "the HuggingFace Hub -> tests/support/hf_server.py on loopback, serving MultiPathQA.csv "
    "(the bundled sample's rows whose slides exist)",
    "experiments.yaml": "vllm-qwen3vl-giant's base_url -> the scripted model on loopback (no GPU here), as "
    "tests/platform/test_local_server_run.py does",
}

FETCH_SUB = (
    "--wsi-root $GIANT_WSI_ROOT",
    "--wsi-root $GIANT_WSI_ROOT --base-url {gdc}",
    "the GDC API -> tests/support/gdc_server.py on loopback",
)
FIRST_ROW = (("gpt5-giant", "random", "gpt5-giant's cell is only queued here: random's, which FIRST scored"),)

RUNS: tuple[Run, ...] = (
    # README.md, docs/getting-started.md and docs/reproduce-table1.md (the short path first: docs_files)
    Run(
        r"duckdb -readonly data/giant\.duckdb \"select experiment, benchmark_name",
        (r"│ random\s+│ tcga\s+│", r"│ random\s+│ gtex\s+│"),
    ),
    Run(r"duckdb -readonly data/giant\.duckdb \"select \* from leaderboard", (r"│ random\s+│",)),
    Run(r"^\.venv/bin/hf download tbuckley/MultiPathQA", (r"data/MultiPathQA\.csv",)),
    Run(r"^export GIANT_WSI_ROOT=/data/wsi$", subs=(("/data/wsi", "{wsi}", "the sandbox's WSI root"),)),
    Run(
        r"giant-fetch-slides --csv \$GIANT_CSV_PATH", (r"downloaded {n_tcga}, .*failed 0",), subs=(FETCH_SUB,)
    ),
    Run(r"giant-check-data --csv \$GIANT_CSV_PATH", CHECKED),
    Run(
        r"^\.venv/bin/giant-experiments check gpt5-giant gpt5-giant-x5 gpt5-thumbnail gpt5-patch$",
        (
            r"^gpt5-giant, gpt5-giant-x5, gpt5-patch, gpt5-thumbnail: signs in with API key from "
            r"\$OPENAI_API_KEY$",
            r": 4 of \d+ experiment\(s\), 0 declared benchmark\(s\), all valid$",
        ),
    ),  # fmt: skip
    Run(
        r"^\.venv/bin/giant-experiments estimate gpt5-giant --csv \$GIANT_CSV_PATH$",
        (r"^priced: the CSV \S+/data/MultiPathQA\.csv with {n_rows} questions \(",),
    ),
    Run(r"^\.venv/bin/giant-experiments sync$", (r"experiment partition",)),
    Run(r"dagster asset materialize .* --select multipathqa_csv,benchmark_items$", (SUCCESS,)),
    Run(r"^\.venv/bin/giant-experiments estimate gpt5-giant$", (r"gpt5-giant: giant / gpt-5", r"\ntotal\s")),
    Run(r"^row\(\) \{"),
    Run(r"^ALL="),
    Run(r"^row gpt5", (r"Launched backfill job",)),
    Run(r"-j evaluate_cell --noprompt\s+--partitions \"tcga\|gpt5-giant\"$", (r"Launched backfill job",)),
    Run(
        r"^\.venv/bin/giant-sql \"select experiment, benchmark_name, paper_format, cost_usd_billed from",
        (r"\brandom\b.*\btcga\b.*±",),
        subs=FIRST_ROW,
    ),
    Run(
        r"^ls data/results/gpt5-giant ",
        (r"^results\.json$", r"^tcga\.parquet$"),
        subs=FIRST_ROW,
    ),
    Run(r"^\.venv/bin/giant-sql \"select \* from leaderboard\"$", (r"\brandom\b",), after_first=True),
    Run(
        r"^\.venv/bin/giant-sql \"select partition, status, reason, rerun from leaderboard_stale\"$",
        (r"^\(no rows\)$",),  # every result is over today's items: nothing set aside
        after_first=True,
    ),
    Run(r"^\.venv/bin/giant-experiments status$", (r"^gpt5-giant\b",), after_first=True),
    Run(r"^\.venv/bin/giant-experiments status gpt5-giant$", (r"of 5 cell\(s\)$",), after_first=True),
    # docs/agent-protocol.md
    Run(
        r"giant-prompts import --repo ~/src/GIANT",
        (r"prompt_file: ",),
        subs=(("~/src/GIANT", "{sandbox}/GIANT", "a fixture clone in the official layout (no network)"),),
    ),
    Run(
        r"--partition \"panda\|gpt5-giant\"$",
        (SUCCESS,),
        subs=(("panda|gpt5-giant", "panda|majority", GIANT.format(offline="majority")),),
    ),
    Run(
        r"^giant-run slide\.svs .*\[--api responses\|chat\]",
        check=_synopsis_options_exist,
        subs=(
            (
                "*",
                ".venv/bin/giant-run --help",
                "a synopsis ([options], a|b choices), not a command: "
                "its options are checked against giant-run --help",
            ),
        ),
    ),
    Run(
        r"^\.venv/bin/giant-scripted-model &$",
        (
            r"scripted model: http://127\.0\.0\.1:{model_port}/v1",
            r"scripted model: stopped after [1-9]\d* requests",
        ),
        block_output=True,
        subs=(
            (
                "giant-scripted-model",
                "giant-scripted-model --port {model_port}",
                "47321 may be taken by `make ui` or tests running beside this one",
            ),
        ),
    ),
    Run(
        r"giant-run data/sample_wsi/gtex/GTEX-1117F-0126\.tiff",
        (r"step 1  crop  box ", r"answer: \{\"answer\": \"[123]\"\}\nlabel: [123]\n"),
        subs=(("47321", "{model_port}", "the port the scripted model above serves on"),),
    ),
    Run(r"^kill %1$"),
    # docs/data-and-slides.md
    Run(
        r"^giant-check-data --csv data/MultiPathQA\.csv --wsi-root /data/wsi",
        CHECKED,
        subs=(("/data/wsi", "{wsi}", "the sandbox's WSI root"),),
    ),
    Run(
        r"^giant-fetch-slides --csv data/MultiPathQA\.csv --wsi-root /data/wsi",
        (r"downloaded 0, already complete 0, already under the root {n_tcga}, failed 0",),
        subs=(("/data/wsi", "{wsi} --base-url {gdc}", "the sandbox's WSI root; GDC on loopback"),),
    ),
    # docs/experiments.md
    Run(
        r"^for b in tcga gtex panda tcga_slidebench tcga_expert_vqa; do",
        (SUCCESS,),
        subs=(("$b|gpt5-giant", "$b|random", GIANT.format(offline="random")),),
    ),
    Run(r"--select leaderboard,leaderboard_long,leaderboard_stale,experiment_comparisons$", (SUCCESS,)),
    # docs/table1-recipes.md (examples/ linked into the sandbox)
    Run(
        r"^\.venv/bin/giant-experiments --file examples/table1/bedrock\.yaml check$",
        (
            r"^bedrock-claude-giant, bedrock-claude-giant-x5, bedrock-claude-patch, "
            r"bedrock-claude-thumbnail: signs in with AWS credential chain",
            r"bedrock\.yaml: 4 experiment\(s\), 0 declared benchmark",
        ),
    ),  # fmt: skip
    Run(
        r"bedrock\.yaml estimate bedrock-claude-giant --csv data/MultiPathQA\.csv$",
        (r"^bedrock-claude-giant: giant / claude-sonnet-4-5", r"^priced: the CSV \S+/data/MultiPathQA\.csv"),
    ),
    Run(r"--file examples/table1/bedrock\.yaml list$", (r"^bedrock-claude-giant-x5\tgiant\tbedrock\t",)),
    # docs/geometry-and-judges.md
    Run(
        r"\"reference_answer\": \{\"bbox\": \[5,5,15,15\]\}\}'\s*\|\s*\.venv/bin/giant-judge-iou$",
        (r"\"score\": 0\.142857",),
    ),
    Run(
        r"\"expected_output\": \{\"bbox\": \[0,0,10,10\]\}\}'\s*\|\s*\.venv/bin/giant-judge-iou$",
        (r"\"score\": 1\.0",),
    ),
    Run(
        r"giant-judge-run giant-judge-iou cases/ --out results\.jsonl$",
        (r"cases: 2  scored: 2  errors: 0  mean score: 0\.5714",),
    ),
    Run(
        r"giant-judge-run \./my_judge\.py cases\.jsonl --timeout 10 --workers 4$",
        (r"cases: 2  scored: 2  errors: 0  mean score: 0\.5000",),
    ),
    # docs/grading.md (submissions built from the sample's items in the sandbox)
    Run(r"giant-grade my_gtex\.csv --task gtex$", (r"Score: 100\.0 %",)),
    Run(r"giant-grade gtex__my_run\.csv$", (r"Score: {gtex_half} %",)),
    Run(r"giant-grade all\.jsonl$", (r"5/5 valid",)),
    Run(
        r"giant-grade runs/submission\.jsonl$",
        (r"Submission: runs/gtex\.csv\nScore: 100\.0 %", r"Submission: runs/panda\.csv\nScore: 100\.0 %"),
    ),
    # docs/open-models.md (experiments.yaml: see SANDBOX)
    Run(r"--partition \"panda\|vllm-qwen3vl-giant\"$", (SUCCESS,)),
)

SAME_AS_GETTING_STARTED = (
    "the same command, as written, runs from docs/getting-started.md in this sandbox first"
)

SYNC, INGEST = (
    r"^\.venv/bin/giant-experiments sync$",
    r"dagster asset materialize .* --select multipathqa_csv,benchmark_items$",
)
ESTIMATE = r"^\.venv/bin/giant-experiments estimate gpt5-giant$"
# commands written word for word as getting started's, which runs them in this sandbox before (the later
# pages' blocks wait for its ingest: INGESTED): run once, there
REPEATED = {
    "docs/reproduce-table1.md": (
        r"^\.venv/bin/hf download tbuckley/MultiPathQA",
        r"giant-fetch-slides --csv \$GIANT_CSV_PATH --wsi-root \$GIANT_WSI_ROOT$",
        r"giant-check-data --csv \$GIANT_CSV_PATH --wsi-root \$GIANT_WSI_ROOT --missing-out missing\.csv",
        SYNC,
        INGEST,
        ESTIMATE,
        r"^\.venv/bin/giant-experiments status gpt5-giant$",
        r"^\.venv/bin/giant-sql \"select \* from leaderboard\"$",
    ),
    "docs/experiments.md": (SYNC, INGEST, ESTIMATE),
    "docs/agent-protocol.md": (SYNC,),
    "docs/open-models.md": (SYNC,),
}

NOT_RUN: tuple[NotRun, ...] = (
    *(
        NotRun(pattern, SAME_AS_GETTING_STARTED, file=file)
        for file, patterns in REPEATED.items()
        for pattern in patterns
    ),
    NotRun(
        r"^make demo$",
        "the whole demo, about 90 s: its own test runs it",
        "tests/demo/test_demo.py::test_demo_materializes_everything_and_says_where_to_look",
    ),
    NotRun(r"^make test$", "the test suite itself: CI runs it"),
    NotRun(
        r"^make ui$",
        "a long-running server (webserver, daemon, scripted model)",
        "tests/demo/test_ui.py::test_make_ui_runs_the_launcher_with_the_viewer_address",
    ),
    NotRun(
        r"^make view$",
        "a long-running static server over data/viewer",
        "tests/report/test_viewer_assets.py::test_viewer_metadata_links_the_index_and_previews_escaped_rows",
    ),
    NotRun(r"^ssh -L ", "a tunnel to a remote host"),
    NotRun(
        r"^\.venv/bin/giant-qupath (export|import) ",
        "needs GIANT trajectories and a pathologist's QuPath files; the same commands run on a real GIANT "
        "materialization and hand-written QuPath exports",
        "tests/platform/test_roi_asset.py::test_qupath_export_then_a_pathologist_import_scored_by_roi_evaluation",
    ),
    NotRun(
        r"^\.venv/bin/giant-review (add-reviewer|prepare|serve)",
        "a review needs GIANT runs and a long-running server; the same steps run over HTTP and in Chromium",
        "tests/report/test_review_server.py::test_in_chromium_two_reviewers_rate_draw_reload_and_html_stays_inert",
    ),
    NotRun(
        r"--select pathologist_reviews,review_metrics$",
        "needs stored reviews; a real materialization of both runs over a stored review",
        "tests/platform/test_review_assets.py::test_agreement_matches_scikit_learn_and_krippendorff",
    ),
    NotRun(
        r"^git clone https://github\.com/KianWeihrauch/GIANT",
        "network; the import after it runs on a fixture clone",
        "tests/agents/test_prompts.py::test_import_reads_the_fixture_clone_without_running_it",
    ),
    NotRun(
        r"^\.venv/bin/dagster-daemon run .*&$",
        "a long-running daemon; the backfills after it only queue their runs here",
        "tests/demo/test_ui.py::test_ui_daemon_and_scripted_model_start_and_stop_together",
    ),
    NotRun(
        r"^vllm serve ",
        "needs a GPU and model weights; a loopback server with vLLM's quirks stands in",
        "tests/platform/test_local_server_run.py::test_declared_vllm_example_materializes",
    ),
    NotRun(
        r"^ollama (pull|serve)|ollama serve$",
        "needs Ollama and model weights (network)",
        "tests/agents/test_local_servers.py::test_declared_examples_run_the_released_protocol",
    ),
)

# Three scripts run side by side, blocks named by file and a pattern one of their commands matches (line
# numbers move as docs change). 1: once getting started's ingest (INGESTED) is done, FIRST (five cells, the
# leaderboard: what the others read), then AFTER_FIRST_1. 2: BESIDE_FIRST (its commands marked after_first
# wait for FIRST). 3: every other block in file order, then, once FIRST is done, AFTER_FIRST. The
# instance's databases exist before any of them.
FIRST = ("docs/experiments.md", r"^for b in tcga gtex panda")
AFTER_FIRST_1 = (
    ("README.md", r"duckdb -readonly data/giant\.duckdb"),
    ("docs/getting-started.md", r"^ls data/results/"),
)
INGESTED = ("docs/getting-started.md", INGEST)  # the sandbox's one sync and ingest (see REPEATED)
BESIDE_FIRST = (  # getting started's sync and ingest, then Reproduce Table 1's rows (which need the sync)
    ("docs/getting-started.md", r"--partitions \"tcga\|gpt5-giant\"$"),
    ("docs/reproduce-table1.md", r"^row\(\) \{"),
)
AFTER_FIRST = (
    ("docs/agent-protocol.md", r"--partition \"panda\|gpt5-giant\""),
    ("docs/open-models.md", r"--partition \"panda\|vllm-qwen3vl-giant\""),
    ("docs/experiments.md", r"^\.venv/bin/giant-experiments estimate gpt5-giant$"),
    ("docs/grading.md", r"giant-grade my_gtex\.csv"),
)
FIRST_DONE, INGEST_DONE = ".first-block-done", ".ingest-done"


def _wait(marker: str) -> str:
    """A bash line waiting (up to 5 min) for ``marker`` in the sandbox."""
    return f'for i in $(seq 1200); do [ -e "$SANDBOX/{marker}" ] && break; sleep 0.25; done'


def fill(text: str, context: dict[str, str], quote: Callable[[str], str] = str) -> str:
    """``text`` with each ``{name}`` of ``context`` replaced (other braces, e.g. regex ones, kept)."""
    return re.sub(
        r"\{(\w+)\}", lambda m: quote(context[m.group(1)]) if m.group(1) in context else m.group(0), text
    )


def block_key(file: str, pattern: str) -> str:
    """The key (file:line) of the one block of ``file`` with a command matching ``pattern``."""
    found = [b.key for b in BLOCKS if b.file == file and any(re.search(pattern, c.text) for c in b.commands)]
    assert len(found) == 1, (
        f"{file}: {len(found)} blocks match {pattern!r} (FIRST, AFTER_FIRST_1, BESIDE_FIRST, AFTER_FIRST)"
    )
    return found[0]


def entry_for(command: Command) -> Run | NotRun | None:
    for entry in (*NOT_RUN, *RUNS):
        if entry.file in ("", command.file) and re.search(entry.pattern, command.text):
            return entry
    return None


def test_every_docs_command_is_run_or_has_a_reason() -> None:
    assert len(COMMANDS) > 40, "the extraction lost the docs' commands"
    unknown = [c.where() for c in COMMANDS if entry_for(c) is None]
    assert not unknown, "docs commands neither run nor listed with a reason in NOT_RUN:\n" + "\n".join(
        unknown
    )
    used = {id(entry_for(c)) for c in COMMANDS} | {id(entry_for(c)) for b in BLOCKS for c in b.commands}
    stale = [e.pattern for e in (*RUNS, *NOT_RUN) if id(e) not in used]
    assert not stale, f"entries matching no docs command (remove them): {stale}"
    for entry in NOT_RUN:
        if entry.covered_by:
            path, name = entry.covered_by.split("::")
            tree = ast.parse((REPO / path).read_text())
            assert name in {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}, (
                entry.covered_by
            )
    for file, pattern in (FIRST, INGESTED, *AFTER_FIRST_1, *BESIDE_FIRST, *AFTER_FIRST):
        block_key(file, pattern)


def test_the_extraction_joins_continuations_and_keeps_compound_commands_whole() -> None:
    from tests.docs.commands import split_block, strip_comment

    lines = ["export A=1   # env", "f() { echo \"#x\"; }  # comment", "for i in 1 2; do", "  echo $i \\",
             "    done-not  # c", "done; wait", "echo 'a # b' \\", "  | cat"]  # fmt: skip
    got = [(c.line, c.text) for c in split_block("x.md", 10, lines)]
    assert got == [
        (10, "export A=1"),
        (11, 'f() { echo "#x"; }'),
        (12, "for i in 1 2; do\necho $i     done-not\ndone; wait"),
        (16, "echo 'a # b'   | cat"),
    ]
    assert strip_comment('echo "a \\" # b" # c') == 'echo "a \\" # b"'


# ---------------------------------------------------------------- the sandbox


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _published_csv(sample_wsi: Path, wsi: Path) -> tuple[bytes, list[ServedFile]]:
    """The sample's rows whose slide exists: GTEx/PANDA slides placed under ``wsi``, TCGA ones on GDC."""
    raw = read_csv_strings(sample_csv_path())
    tree = SlideTree.scan(sample_wsi)
    keep, served = [], {}
    for i, row in enumerate(raw.to_dict("records")):
        name = row["benchmark_name"]
        res = resolve_slide(sample_wsi, name, row["image_path"], row["file_id"], tree)
        if res.status != WSI_OK or res.path.resolve() == (sample_wsi / CORRUPT_SLIDE).resolve():
            continue
        keep.append(i)
        if name in TCGA_BENCHMARKS:
            served[row["file_id"]] = ServedFile(row["file_id"], row["image_path"], res.path.read_bytes())
        else:
            target = wsi / res.path.relative_to(sample_wsi)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(res.path, target)
    text = sample_csv_path().read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([rows[0], *(rows[i + 1] for i in keep)])
    return out.getvalue().encode(), list(served.values())


def _grading_files(root: Path) -> dict[str, str]:
    """Submissions for docs/grading.md from the sample's items: gtex all right, gtex half right, all tasks
    right (JSONL), a biomlbench run file of two tasks. Returns the expected gtex half-right score."""
    items, _ = parse_items(read_csv_strings(sample_csv_path()), "sample")
    gtex = items[items["benchmark_name"] == "gtex"]
    pd.DataFrame({"benchmark_id": gtex["benchmark_id"], "prediction": gtex["truth_label"]}).to_csv(
        root / "my_gtex.csv", index=False
    )
    truth = gtex["truth_label"].astype(int).tolist()
    half = [t if i % 2 == 0 else (1 if t != 1 else 2) for i, t in enumerate(truth)]
    pd.DataFrame({"benchmark_id": gtex["benchmark_id"], "prediction": half}).to_csv(
        root / "gtex__my_run.csv", index=False
    )
    rows = [{"task_id": r.benchmark_name, "benchmark_id": r.benchmark_id, "prediction": int(r.truth_label)}
            for r in items.itertuples()]  # fmt: skip
    (root / "all.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    runs = root / "runs"
    runs.mkdir()
    shutil.copyfile(root / "my_gtex.csv", runs / "gtex.csv")
    panda = items[items["benchmark_name"] == "panda"]
    pd.DataFrame({"benchmark_id": panda["benchmark_id"], "prediction": panda["truth_label"]}).to_csv(
        runs / "panda.csv", index=False
    )
    (runs / "submission.jsonl").write_text(
        json.dumps({"task_id": "gtex", "submission_path": "gtex.csv"}) + "\n"
        + json.dumps({"task_id": "panda", "submission_path": "panda.csv"}) + "\n"
    )  # fmt: skip
    from sklearn.metrics import balanced_accuracy_score

    with warnings.catch_warnings():  # the wrong labels need not be any item's truth
        warnings.simplefilter("ignore", UserWarning)
        return {"gtex_half": f"{100 * balanced_accuracy_score(truth, half):.1f}"}


def _judge_files(root: Path) -> None:
    cases = root / "cases"
    cases.mkdir()
    box = {"bbox": [0, 0, 10, 10]}
    (cases / "a.json").write_text(json.dumps({"candidate_answer": box, "reference_answer": box}))
    other = {"candidate_answer": box, "reference_answer": {"bbox": [5, 5, 15, 15]}}
    (cases / "b.json").write_text(json.dumps(other))
    (root / "cases.jsonl").write_text(json.dumps(other) + "\n" + json.dumps({"output": "x"}) + "\n")
    (root / "my_judge.py").write_text(
        "import json, sys\ncase = json.load(sys.stdin)\nok = 'candidate_answer' in case\n"
        "print(json.dumps({'score': float(ok), 'hits': ['has a candidate'] if ok else [], "
        "'misses': [] if ok else ['no candidate'], 'reasoning': 'presence'}))\n"
    )


def _script(commands: list[tuple[Command, str]], blocks: list[str]) -> str:
    """One bash script: each block in a subshell, each command between markers with its exit status and
    seconds; ``wait-first`` waits for FIRST to finish, ``first-done`` says it has, ``wait-ingested`` waits
    for INGESTED's command (after it, the script says so whatever its exit status)."""
    texts = {c.where(): t for c, t in commands}
    by_key = {b.key: b for b in BLOCKS}
    lines = []
    for key in blocks:
        if key in ("wait-first", "wait-ingested"):
            lines.append(_wait(FIRST_DONE if key == "wait-first" else INGEST_DONE))
            continue
        if key == "first-done":
            lines.append(f'touch "$SANDBOX/{FIRST_DONE}"')
            continue
        block = by_key[key]
        lines += [f"printf '\\n@@block {key}\\n'", "(", 'cd "$SANDBOX"']
        skipped = [
            c for c in block.commands if c.where() not in texts and re.search(f"{SYNC}|{INGEST}", c.text)
        ]
        if skipped and block.file != INGESTED[0]:  # a repeated sync or ingest not run: was it done before?
            lines.append(f'[ -e "$SANDBOX/{INGEST_DONE}" ] || printf "\\n@@before-ingest {key}\\n"')
        for command in block.commands:
            text = texts.get(command.where())
            if text is None:
                lines.append(f": not run: {shlex.quote(command.text)}")
            elif command.is_export:
                lines.append(text)
            else:
                at = f"{command.file}:{command.line}"
                if entry_for(command).after_first:
                    lines.append(_wait(FIRST_DONE))
                lines += [f"printf '\\n@@begin {at}\\n'", "SECONDS=0", text,
                          f"printf '\\n@@end {at} %s %s\\n' $? $SECONDS"]  # fmt: skip
                if command.file == INGESTED[0] and re.search(INGESTED[1], command.text):
                    lines.append(f'touch "$SANDBOX/{INGEST_DONE}"')
        lines += [")", f"printf '\\n@@endblock {key}\\n'"]
    return "\n".join(lines) + "\n"


def _substituted(command: Command, context: dict[str, str]) -> str | None:
    """The text to run for a command (None: not run)."""
    entry = entry_for(command)
    if command.is_export and entry is None:
        return command.text
    if not isinstance(entry, Run):
        return None
    text = command.text
    for old, new, _ in entry.subs:
        new = fill(new, context)
        text = new if old == "*" else text.replace(old, new)
        assert old == "*" or new in text, f"substitution {old!r} did not apply to {command.where()}"
    return text


@dataclass
class Ran:
    outputs: dict[str, tuple[int, str]]  # file:line -> (exit status, output)
    context: dict[str, str]
    sandbox: Path
    model_requests: int = 0
    transcript: str = ""  # the scripts' whole output (a background command prints after its block)
    seconds: dict[str, int] = field(default_factory=dict)  # file:line -> its wall seconds
    published: bytes = b""  # the MultiPathQA.csv the loopback hub served
    tcga: list[ServedFile] = field(default_factory=list)  # the slides the loopback GDC served


def _parse(stdout: str, ran: Ran) -> None:
    ran.transcript += stdout
    for match in re.finditer(r"@@begin (\S+)\n(.*?)\n@@end \1 (\d+) (\d+)\n", stdout, re.S):
        ran.outputs[match.group(1)] = (int(match.group(3)), match.group(2))
        ran.seconds[match.group(1)] = int(match.group(4))


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory, sample_wsi_root: Path) -> Ran:
    sandbox = tmp_path_factory.mktemp("clone")
    (sandbox / ".venv").symlink_to(Path(sys.prefix))
    (sandbox / "examples").symlink_to(REPO / "examples")  # the recipes docs/table1-recipes.md uses
    (sandbox / "dagster_home").mkdir()
    shutil.copyfile(REPO / "dagster_home" / "dagster.yaml", sandbox / "dagster_home" / "dagster.yaml")
    # what ingest would generate: the worker's generated set copied (its version marker included, so
    # ingest's own ensure_sample_slides keeps it), not generated a second time (~6 CPU-seconds)
    shutil.copytree(sample_wsi_root, sandbox / "data" / "sample_wsi")
    sample_wsi = ensure_sample_slides(sandbox / "data" / "sample_wsi")
    create_storage(sandbox / "dagster_home")  # concurrent first runs of the scripts would race on it
    wsi = sandbox / "wsi"
    published, tcga = _published_csv(sample_wsi, wsi)
    fixture_repo(sandbox / "GIANT")
    _judge_files(sandbox)
    context = {
        "sandbox": str(sandbox),
        "wsi": str(wsi),
        "model_port": str(_free_port()),
        "n_tcga": str(len(tcga)),
        "n_rows": str(len(pd.read_csv(io.BytesIO(published)))),
        **_grading_files(sandbox),
    }
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GIANT_", "DAGSTER_", "HF_", "OPENAI_", "ANTHROPIC_"))}  # fmt: skip
    env |= {
        "SANDBOX": str(sandbox),
        "DAGSTER_HOME": str(sandbox / "dagster_home"),
        "HF_HOME": str(sandbox / "hf"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "PATH": f"{sandbox / '.venv' / 'bin'}:{env.get('PATH', '')}",
    }
    with (
        ScriptedModelServer(rule=demo_policy) as model,
        HubServer({(HF_REPO, HF_FILE): published}) as (hub_url, _),
        GdcServer(tcga) as gdc,
    ):
        declared = yaml.safe_load((REPO / "experiments.yaml").read_text())
        declared["experiments"]["vllm-qwen3vl-giant"]["base_url"] = model.openai_base_url
        (sandbox / "experiments.yaml").write_text(yaml.safe_dump(declared, sort_keys=False))
        context |= {"gdc": gdc.url}
        env["HF_ENDPOINT"] = hub_url
        commands = [(c, t) for b in BLOCKS for c in b.commands if (t := _substituted(c, context)) is not None]
        first = ["wait-ingested", block_key(*FIRST), "first-done", *(block_key(*b) for b in AFTER_FIRST_1)]
        beside = [block_key(*b) for b in BESIDE_FIRST]
        after = [block_key(*b) for b in AFTER_FIRST]
        named = {*first, *beside, *after}
        others = [*(b.key for b in BLOCKS if b.key not in named), "wait-first", *after]
        procs = [
            subprocess.Popen(
                ["bash", "-c", _script(commands, blocks)],
                cwd=sandbox,
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a timeout ends the script and whatever it left in the background
            )
            for blocks in (first, beside, others)
        ]
        result = Ran({}, context, sandbox, published=published, tcga=tcga)
        try:
            for name, proc in zip(("first", "beside", "others"), procs, strict=True):
                try:
                    stdout, _ = proc.communicate(timeout=500)
                except subprocess.TimeoutExpired:  # the transcript so far, to see where it stood
                    os.killpg(proc.pid, signal.SIGKILL)
                    stdout = proc.communicate()[0] + "\n@@timeout after 500 s\n"
                (sandbox / f"docs-commands-{name}.log").write_text(stdout)  # the transcript, for failures
                _parse(stdout, result)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        result.model_requests = len(model.requests)
    slowest = sorted(result.seconds.items(), key=lambda kv: -kv[1])  # where the fixture's time goes
    (sandbox / "docs-commands-seconds.txt").write_text("".join(f"{s:4d} s  {k}\n" for k, s in slowest))
    return result


@pytest.mark.parametrize(
    "command", [c for c in COMMANDS if isinstance(entry_for(c), Run)], ids=lambda c: f"{c.file}:{c.line}"
)
def test_docs_command_runs(command: Command, ran: Ran) -> None:
    entry = entry_for(command)
    key = f"{command.file}:{command.line}"
    assert key in ran.outputs, (
        f"{command.where()}: did not run; the transcripts end:\n{ran.transcript[-3000:]}"
    )
    status, output = ran.outputs[key]
    assert status == 0, f"{command.where()}: exit {status}\n{output[-3000:]}"
    where = ran.transcript if entry.block_output else output
    for pattern in entry.expect:
        assert re.search(fill(pattern, ran.context, re.escape), where, re.M), (
            f"{command.where()}: no {pattern!r} in\n{where[-3000:]}"
        )
    if entry.check:
        entry.check(command, output)


def test_blocks_that_skip_a_repeated_sync_or_ingest_start_after_getting_started_s(ran: Ran) -> None:
    """The commands listed as REPEATED are not run on their page, so its block must start after getting
    started's sync and ingest (INGESTED), or its commands would run against a sandbox the page does not
    describe (whether they then fail depends on the machine's load)."""
    early = re.findall(r"@@before-ingest (\S+)", ran.transcript)
    assert not early, f"blocks started before {INGESTED[0]}'s ingest: {early}"


def test_the_commands_left_what_the_docs_say(ran: Ran) -> None:
    """Beyond exit 0: the files, tables and queued runs the commands made, against independent sources."""
    import duckdb
    from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

    from giant_assets.experiments.prompts import load_prompt_file
    from giant_assets.platform.partitions import result_key

    root = ran.sandbox
    assert (root / "data" / HF_FILE).read_bytes() == ran.published  # hf download, byte for byte
    for served in ran.tcga:  # giant-fetch-slides: the gdc-client layout, the bytes GDC served
        assert (root / "wsi" / served.file_id / served.file_name).read_bytes() == served.body
    assert (root / "missing.csv").read_text().count("\n") == 1  # giant-check-data: a header, no row
    assert load_prompt_file(root / "prompts" / "official.yaml").multi_step.startswith("Fixture navigator")
    scores = [json.loads(line)["score"] for line in (root / "results.jsonl").read_text().splitlines()]
    assert scores == pytest.approx([1.0, 25 / 175])  # IoU of the two cases: 1 and 25/175
    with duckdb.connect(str(root / "data" / "giant.duckdb"), read_only=True) as con:
        cells = con.sql("select experiment, benchmark_name from benchmark_metrics").fetchall()
        board = {r[0] for r in con.sql("select experiment from leaderboard where source = 'ours'").fetchall()}
        vllm = con.sql(
            "select count(*), count(error) from predictions where experiment = 'vllm-qwen3vl-giant'"
        )
        n_vllm, n_errors = vllm.fetchone()
    assert {b for e, b in cells if e == "random"} == {
        "tcga",
        "gtex",
        "panda",
        "tcga_slidebench",
        "tcga_expert_vqa",
    }
    assert ("majority", "panda") in cells and ("vllm-qwen3vl-giant", "panda") in cells and "random" in board
    assert n_vllm == 3 and n_errors == 1 and ran.model_requests >= 2 * 2  # 2 readable panda slides, 2+ calls
    instance = DagsterInstance.from_config(str(root / "dagster_home"))
    queued = instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.QUEUED], job_name="evaluate_cell"))
    want = {("gpt5-giant", b) for b in ("tcga", "gtex", "panda", "tcga_slidebench", "tcga_expert_vqa")}
    want |= {(e, b) for e in ("gpt5-thumbnail", "gpt5-patch") for b in ("tcga", "gtex", "panda")}
    want |= {("gpt5-giant-x5", b) for _, b in want if _ == "gpt5-giant"}
    getting_started = [("gpt5-giant", "tcga")]  # its one cell, queued again by Reproduce Table 1's row
    assert sorted(r.tags["dagster/partition"] for r in queued) == sorted(
        result_key(e, b) for e, b in [*want, *getting_started]
    )
