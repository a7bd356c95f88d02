"""Experiments files: validation errors name the file, experiment and field; the config hash and the
name binding keep answer-deciding settings apart from speed and scoring settings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from giant_assets.experiments.binding import BindingCorrupt, ExperimentConflict, bind, read_binding
from giant_assets.experiments.declared import ExperimentsFileError, get_experiment, load_experiments
from giant_assets.experiments.spec import ANSWER_FIELDS, SCORING_FIELDS, SPEED_FIELDS, Experiment
from giant_assets.platform.experiments_cli import main as experiments_main

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "experiments.yaml"
    path.write_text(text)
    return path


def test_the_repository_file_declares_the_paper_and_demo_experiments() -> None:
    declared = load_experiments(REPO / "experiments.yaml")
    assert {"random", "gpt5-giant", "gpt5-giant-x5", "gpt5-thumbnail", "gpt5-patch", "demo-giant"} <= set(
        declared
    )
    x1, x5 = declared["gpt5-giant"], declared["gpt5-giant-x5"]
    assert (x1.runs_per_item, x5.runs_per_item) == (1, 5)
    # GIANT x5 reuses the runs GIANT x1 paid for: same journal, different binding
    assert x1.config_hash() == x5.config_hash() and x1.answer_settings() != x5.answer_settings()
    assert declared["claude-giant"].resolved_image_size == 500 and x1.resolved_image_size == 1000


def test_defaults_apply_and_each_experiment_overrides(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "defaults: {concurrency: 8, seed: 3}\n"
        "experiments:\n  a: {agent: random}\n  b: {agent: random, seed: 4}\n",
    )
    declared = load_experiments(path)
    assert (declared["a"].concurrency, declared["a"].seed, declared["b"].seed) == (8, 3, 4)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "experiments:\n  gpt: {agent: giant}\n",
            "experiment 'gpt': agent 'giant' needs a model",
        ),
        ("experiments:\n  a: {agent: random, max_steps: 0}\n", "experiment 'a': field 'max_steps'"),
        ("experiments:\n  a: {agent: random, colour: red}\n", "experiment 'a': field 'colour': not a field"),
        ("experiments:\n  Bad Name: {agent: random}\n", "experiment 'Bad Name': field 'name'"),
        ("experiments:\n  a: {agent: oracle}\n", "experiment 'a': field 'agent'"),
        (
            "experiments:\n  a: {agent: random}\n  a: {agent: majority}\n",
            "line 3: 'a' is given twice (first on line 2)",
        ),
        ("experiments:\n  a: {name: b}\n", "experiment 'a', field 'name': differs from its key"),
        ("experiment:\n  a: {}\n", "expected a mapping with an 'experiments' mapping"),
        ("experiments: {a: {}}\nextra: 1\n", "unknown top-level key(s) ['extra']"),
        ("experiments:\n  a: [1, 2]\n", "experiment 'a': expected a mapping of settings"),
        ("experiments: {a: {agent: random}\n", "not valid YAML"),
        ("experiments:\n  ? [a, b]\n  : {agent: random}\n", "line 2: a key must be a plain name, not a list"),
        (
            "experiments:\n  a:\n    ? {agent: x}\n    : random\n",
            "line 3: a key must be a plain name, not a mapping",
        ),
        ("defaults:\n  ? [seed]\n  : 1\nexperiments: {a: {}}\n", "line 2: a key must be a plain name"),
        (
            "experiments:\n  c: {agent: giant, provider: anthropic, api: chat, model: m}\n",
            "provider 'anthropic' speaks api 'messages'",
        ),
    ],
)
def test_a_bad_file_names_file_experiment_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ExperimentsFileError) as err:
        load_experiments(path)
    assert str(path) in str(err.value) and message in str(err.value)


def test_missing_file_and_unknown_name_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ExperimentsFileError, match="experiments file not found .*GIANT_EXPERIMENTS"):
        load_experiments(tmp_path / "nope.yaml")
    path = write(tmp_path, "experiments:\n  a: {agent: random}\n")
    with pytest.raises(ExperimentsFileError, match=r"no experiment 'b'; declared: \['a'\]"):
        get_experiment(path, "b")


def test_fields_are_grouped_once_and_only_answer_fields_move_the_hash() -> None:
    every = set(Experiment.model_fields) - {"name", "description"}
    assert set(ANSWER_FIELDS) | set(SCORING_FIELDS) | set(SPEED_FIELDS) == every
    assert not set(ANSWER_FIELDS) & set(SPEED_FIELDS) and not set(SCORING_FIELDS) & set(SPEED_FIELDS)
    base = Experiment(name="g", agent="giant", model="m")
    for field, value in [
        ("concurrency", 99),
        ("budget_usd", 5.0),
        ("api_key_env", "X"),
        ("panda_null_grade", "no_answer"),
    ]:
        assert base.model_copy(update={field: value}).config_hash() == base.config_hash(), field
    for field, value in [
        ("model", "m2"),
        ("max_steps", 5),
        ("image_size", 640),
        ("protocol", "json"),
        ("seed", 1),
    ]:
        assert base.model_copy(update={field: value}).config_hash() != base.config_hash(), field
    # offline agents: provider settings change nothing they answer
    assert Experiment(name="r", model="x").config_hash() == Experiment(name="s").config_hash()


def test_prompt_file_is_hashed_by_content(tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("You see a {width} x {height} slide.")
    exp = Experiment(name="p", agent="giant", model="m", prompt_path=str(prompt))
    before = exp.config_hash()
    prompt.write_text("You see a {width} by {height} slide.")
    assert exp.config_hash() != before
    prompt.unlink()
    with pytest.raises(ValueError, match="prompt_path .*prompt.txt: cannot be read"):
        exp.config_hash()


def test_a_name_is_bound_to_its_answer_settings(tmp_path: Path) -> None:
    first = Experiment(name="gpt", agent="giant", model="gpt-5", max_steps=20)
    bind(first, tmp_path)
    bind(first.model_copy(update={"concurrency": 64, "budget_usd": 3.0}), tmp_path)  # speed: fine
    bind(first.model_copy(update={"panda_null_grade": "no_answer"}), tmp_path)  # scoring: fine
    with pytest.raises(ExperimentConflict) as err:
        bind(first.model_copy(update={"max_steps": 10, "model": "gpt-5.2"}), tmp_path)
    text = str(err.value)
    assert "experiment 'gpt' already ran with other answer-deciding settings" in text
    assert "max_steps: 20 -> 10" in text and "model: 'gpt-5' -> 'gpt-5.2'" in text
    assert "seed" not in text  # only the fields that differ
    with pytest.raises(ExperimentConflict, match="runs_per_item: 1 -> 5"):
        bind(first.model_copy(update={"runs_per_item": 5}), tmp_path)


def test_a_platform_upgrade_that_changes_the_protocol_says_so(tmp_path: Path) -> None:
    """A name bound under an older protocol (as an older giant-assets wrote it): the message names the
    protocol change and the exact way to re-run, instead of blaming the user's settings."""
    import json

    exp = Experiment(name="gpt5-giant", agent="giant", model="gpt-5")
    path = bind(exp, tmp_path) and tmp_path / "experiments" / "gpt5-giant.json"
    doc = json.loads(path.read_text())
    doc["answer_settings"]["protocol_version"] = "2"
    path.write_text(json.dumps(doc))
    with pytest.raises(ExperimentConflict) as err:
        bind(exp, tmp_path)
    text = str(err.value)
    assert "last ran under the platform's protocol version '2'" in text
    assert f"delete {path} and re-run every benchmark of the row" in text
    assert "already ran with other answer-deciding settings" not in text


def test_check_reports_a_list_key_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "experiments:\n  ? [a, b]\n  : {agent: random}\n")
    assert experiments_main(["check", "--file", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: line 2: a key must be a plain name, not a list (['a', 'b'])")
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_full_disk_leaves_no_binding(tmp_path: Path) -> None:
    """Bind in a process whose writes fail as on a full disk (RLIMIT_FSIZE 0: every write is EFBIG)."""
    code = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from giant_assets.experiments.binding import bind\n"
        "from giant_assets.experiments.spec import Experiment\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))\n"
        "try:\n"
        "    bind(Experiment(name='gpt', agent='giant', model='gpt-5'), Path(sys.argv[1]))\n"
        "except OSError as exc:\n"
        "    print(exc.strerror)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0 and run.stdout.strip() == "File too large", run.stderr
    assert list((tmp_path / "experiments").iterdir()) == []  # no empty binding, no temp file
    bind(Experiment(name="gpt", agent="giant", model="gpt-5"), tmp_path)  # the next run binds it
    assert read_binding(tmp_path / "experiments" / "gpt.json")["answer_settings"]["model"] == "gpt-5"


@pytest.mark.parametrize(("text", "what"), [("", "is empty (0 bytes)"), ('{"name": "gpt"', "is corrupt")])
def test_an_empty_or_corrupt_binding_is_named_with_what_to_do(tmp_path: Path, text: str, what: str) -> None:
    path = tmp_path / "experiments" / "gpt.json"
    path.parent.mkdir()
    path.write_text(text)
    with pytest.raises(BindingCorrupt) as err:
        bind(Experiment(name="gpt", agent="giant", model="gpt-5"), tmp_path)
    message = str(err.value)
    assert message.startswith(f"experiment binding {path} {what}") and "delete it and re-run" in message
    assert "\n" not in message


def test_the_thumbnail_sweep_and_the_released_baseline_defaults() -> None:
    """The paper's thumbnail sweep (250 to 4000 px) is declared; its 1024 px point is gpt5-thumbnail."""
    declared = load_experiments(REPO / "experiments.yaml")
    sweep = {n: e for n, e in declared.items() if n.startswith("gpt5-thumbnail")}
    assert sorted(e.thumbnail_size for e in sweep.values()) == [250, 500, 1000, 1024, 2000, 3000, 4000]
    assert declared["gpt5-thumbnail"].thumbnail_size == 1024
    assert {(e.agent, e.model) for e in sweep.values()} == {("thumbnail", "gpt-5")}
    assert len({e.config_hash() for e in sweep.values()}) == 7
    patch = declared["gpt5-patch"]
    assert (patch.patch_sampler, patch.n_patches, patch.patch_size) == ("clam", 30, 224)
    otsu = patch.model_copy(update={"patch_sampler": "otsu"})
    assert otsu.config_hash() != patch.config_hash()


@pytest.mark.parametrize(
    ("settings", "refused"),
    [
        ("{agent: giant, model: gpt-5}", True),  # OpenAI's API, no cap stated
        ("{agent: patch, provider: anthropic, model: claude-sonnet-4-5}", True),
        ("{agent: giant, model: q, server: vllm, base_url: 'http://10.0.0.5:8000/v1'}", True),  # off loopback
        ("{agent: giant, model: gpt-5, budget_usd: 0}", False),  # no cap, stated
        ("{agent: giant, model: gpt-5, budget_usd: 25}", False),
        ("{agent: giant, model: m, base_url: 'http://127.0.0.1:9/v1'}", False),  # loopback: free
        ("{agent: giant, model: q, server: vllm}", False),  # a local server at its default address
        ("{agent: random}", False),
    ],
)
def test_a_paid_experiment_must_state_its_budget(
    tmp_path: Path, settings: str, refused: bool, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")  # the check also refuses an unset key
    path = write(tmp_path, f"experiments:\n  e: {settings}\n")
    assert load_experiments(path)["e"].name == "e"  # list and estimate still show it
    status = experiments_main(["check", "--file", str(path)])
    err = capsys.readouterr().err
    if refused:
        assert status == 1
        assert f"error: {path}: experiment 'e': field 'budget_usd': required for a paid experiment" in err
    else:
        assert status == 0 and not err


def test_the_failure_share_is_a_speed_field_bounded_to_a_share(tmp_path: Path) -> None:
    base = Experiment(name="g", agent="giant", model="m")
    assert base.max_failed_share == 0.2 and "max_failed_share" in SPEED_FIELDS
    assert base.model_copy(update={"max_failed_share": 1.0}).config_hash() == base.config_hash()
    path = write(tmp_path, "experiments:\n  e: {agent: random, max_failed_share: 1.5}\n")
    with pytest.raises(ExperimentsFileError, match="experiment 'e': field 'max_failed_share'"):
        load_experiments(path)


@pytest.mark.parametrize(
    ("setting", "shown"),
    [
        ("budget_usd: yes", "budget_usd"),  # once a $1 cap
        ("budget_usd: true", "budget_usd"),
        ("max_failed_share: true", "max_failed_share"),  # once 1.0: never failed
        ("max_steps: on", "max_steps"),
        ("requests_per_minute: false", "requests_per_minute"),
    ],
)
def test_yaml_booleans_are_not_numbers(tmp_path: Path, setting: str, shown: str) -> None:
    path = write(tmp_path, f"experiments:\n  e:\n    agent: random\n    {setting}\n")
    with pytest.raises(ExperimentsFileError) as err:
        load_experiments(path)
    assert f"experiment 'e': field '{shown}'" in str(err.value)
    assert "a number is required, not the YAML boolean" in str(err.value)
    # numbers, and booleans where a boolean belongs, are read as before
    settings = "{agent: random, budget_usd: 1, max_failed_share: 0, batch: false}"
    path = write(tmp_path, f"experiments:\n  e: {settings}\n")
    exp = load_experiments(path)["e"]
    assert (exp.budget_usd, exp.max_failed_share, exp.batch) == (1.0, 0.0, False)


def test_the_iteration_scaling_is_declared_as_gpt5_giant_with_other_step_budgets() -> None:
    """The released scaling_experiment.yaml: GPT-5 GIANT at 1, 5, 10, 15, 20 and 25 iterations; its 20
    point is gpt5-giant. Only the step budget (and the money cap) differ from gpt5-giant."""
    declared = load_experiments(REPO / "experiments.yaml")
    scaling = {n: e for n, e in declared.items() if n.startswith("gpt5-giant-steps-")} | {
        "gpt5-giant": declared["gpt5-giant"]
    }
    assert sorted(e.max_steps for e in scaling.values()) == [1, 5, 10, 15, 20, 25]
    assert all(name.endswith(f"-{e.max_steps}") for name, e in scaling.items() if name != "gpt5-giant")
    base = {k: v for k, v in declared["gpt5-giant"].answer_settings().items() if k != "max_steps"}
    for name, e in scaling.items():
        assert {k: v for k, v in e.answer_settings().items() if k != "max_steps"} == base, name
        assert e.unbudgeted() is None and e.budget_usd > 0, name
    assert len({e.config_hash() for e in scaling.values()}) == 6


AZURE = "{agent: giant, provider: azure, model: gpt-5, azure_endpoint: 'https://r.example', budget_usd: 5"


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        (f"{AZURE}, batch: true}}", None),  # the default api-version has Files + Batches
        (f"{AZURE}, batch: true, api: chat, api_version: 2024-10-21}}", None),  # the first GA one
        (f"{AZURE}, batch: true, api: chat, api_version: 2024-07-01-preview}}", None),
        (f"{AZURE}, batch: true, api: chat, api_version: 2024-06-01}}",
         "field 'api_version': Azure's batch API (Files + Batches, a Global Batch or Data Zone Batch "
         "deployment) needs api-version 2024-07-01-preview or later"),
        (f"{AZURE}, api: chat, api_version: 2024-06-01}}", None),  # no batch: any api-version
    ],
)  # fmt: skip
def test_check_accepts_azure_batch_from_the_api_version_with_batches(
    tmp_path: Path, settings: str, refusal: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, f"experiments:\n  az: {settings}\n")
    status = experiments_main(["check", "--file", str(path)])
    err = capsys.readouterr().err
    if refusal is None:
        assert status == 0 and not err, err
    else:
        assert status == 1 and "experiment 'az': " in err and refusal in err, err
        assert "2024-06-01" in err and "remove batch: true" in err


def test_a_file_read_again_is_validated_again_only_when_its_text_changed(tmp_path: Path) -> None:
    """A run reads the experiments file many times: the same text gives the same (frozen) experiments
    without validating it again; any edit, even one of the same size within the same clock tick, is
    read; a broken edit still fails every time; each caller gets its own mapping."""
    path = tmp_path / "experiments.yaml"
    path.write_text("experiments:\n  r: {agent: random, seed: 3}\n")
    first = load_experiments(path)
    again = load_experiments(path)
    assert again == first and again is not first and again["r"] is first["r"]
    again.pop("r")
    assert load_experiments(path)["r"].seed == 3
    path.write_text("experiments:\n  r: {agent: random, seed: 4}\n")  # same size, at once
    assert load_experiments(path)["r"].seed == 4
    path.write_text("experiments:\n  r: {agent: random, seed: x}\n")
    for _ in range(2):
        with pytest.raises(ExperimentsFileError, match="experiment 'r'"):
            load_experiments(path)
