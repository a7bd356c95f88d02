"""Plug-in agents in the experiments file: the name and ``agent_options`` validated as hostile input, the
plug-in's identity (its distribution's version, or its file's content) and options in ``config_hash``,
and ``giant-experiments check`` refusing a plug-in that cannot be imported, naming the module."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from giant_assets.experiments.declared import ExperimentsFileError, load_experiments
from giant_assets.experiments.spec import Experiment
from giant_assets.platform import experiments_cli
from tests.support.dagster_env import write_experiments

PACKAGES = Path(__file__).parent / "packages"
LAB = "lab_agent:make_agent"


@pytest.fixture(autouse=True)
def plugin_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PACKAGES))


def declare(tmp_path: Path, **fields) -> Path:
    return write_experiments(tmp_path / "experiments.yaml", {"lab": {"model": "m", **fields}})


def load_error(tmp_path: Path, **fields) -> str:
    with pytest.raises(ExperimentsFileError) as err:
        load_experiments(declare(tmp_path, **fields))
    return str(err.value)


def deep(levels: int) -> dict:
    """``levels`` nested mappings, built without recursion."""
    value: dict = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"t": float("nan")}, "agent_options.t: nan is not a finite number"),
        ({"t": [1, float("inf")]}, "agent_options.t.1: inf is not a finite number"),
        ({"t": 1e308}, "agent_options.t: 1e+308 is not a finite number within +-2**53"),
        ({"t": 10**5000}, "agent_options.t: the integer is beyond +-2**53"),
        ({"t": "x" * 10_001}, "agent_options.t: a text of 10001 characters"),
        (deep(17), "nested deeper than 16 levels"),
        ({"t": list(range(10_001))}, "more than 10000 values in agent_options"),
        ([1, 2], "must be a mapping of options, not a list"),
    ],
)
def test_hostile_agent_options_are_refused_naming_the_place(
    tmp_path: Path, options: object, message: str
) -> None:
    experiment = {"agent": LAB, "model": "m", "agent_options": options}
    with pytest.raises(ValueError, match="agent_options") as err:
        Experiment(name="lab", **experiment)
    assert message in str(err.value)


def test_agent_options_from_yaml_are_checked_with_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "experiments.yaml"
    path.write_text(f"experiments:\n  lab: {{agent: '{LAB}', model: m, agent_options: {{t: .nan}}}}\n")
    with pytest.raises(ExperimentsFileError) as err:
        load_experiments(path)
    assert str(path) in str(err.value) and "experiment 'lab'" in str(err.value)
    assert "agent_options.t: nan is not a finite number" in str(err.value)
    path.write_text(f"experiments:\n  lab: {{agent: '{LAB}', model: m, agent_options: {{1: x}}}}\n")
    with pytest.raises(ExperimentsFileError, match="key 1 must be a text"):
        load_experiments(path)
    # 100,000 levels: refused at the 17th, without recursion
    with pytest.raises(ValueError, match="nested deeper than 16 levels"):
        Experiment(name="lab", agent=LAB, model="m", agent_options=deep(100_000))


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        ("lab-agent:make", "is not a plug-in name"),
        ("lab_agent:", "is not a plug-in name"),
        ("lab_agent:make:more", "is not a plug-in name"),
        ("a" * 300 + ":f", "is not a plug-in name"),
        ("https://evil.example/x:f", "is not a plug-in name"),
        ("gaint", "is not an agent: use one of random, majority"),
    ],
)
def test_bad_agent_names_are_refused(tmp_path: Path, agent: str, message: str) -> None:
    error = load_error(tmp_path, agent=agent)
    assert "field 'agent'" in error and message in error


def test_plugin_fields_go_together(tmp_path: Path) -> None:
    assert "agent 'lab_agent:make_agent' needs a model" in load_error(tmp_path, agent=LAB, model="")
    assert "field 'agent_options': for a plug-in agent" in load_error(
        tmp_path, agent="giant", agent_options={"a": 1}
    )
    exp = Experiment(name="lab", agent=LAB, model="m", agent_options={"k": [1, 2.5, None, True]})
    assert exp.calls_model and exp.agent_options == {"k": [1, 2.5, None, True]}


def test_the_hash_holds_the_plugins_file_digest_options_and_model(tmp_path: Path) -> None:
    package = tmp_path / "pkgs" / "hashed_agent"
    package.mkdir(parents=True)
    module = package / "__init__.py"
    module.write_text("def make(kit):\n    return None\n")
    sys.path.insert(0, str(package.parent))
    try:
        exp = Experiment(name="h", agent="hashed_agent:make", model="m", agent_options={"n": 1})
        settings = exp.answer_settings()
        oracle = hashlib.sha256(module.read_bytes()).hexdigest()
        assert settings["plugin"] == {"module": "hashed_agent", "factory": "make", "sha256": oracle}
        assert settings["agent_options"] == {"n": 1} and settings["model"] == "m"
        before = exp.config_hash()
        blob = json.dumps({k: v for k, v in settings.items() if k != "runs_per_item"}, sort_keys=True)
        assert before == hashlib.sha256(blob.encode()).hexdigest()[:12]
        assert exp.model_copy(update={"agent_options": {"n": 2}}).config_hash() != before
        assert exp.model_copy(update={"model": "m2"}).config_hash() != before
        assert exp.model_copy(update={"concurrency": 9}).config_hash() == before  # speed only
        module.write_text("def make(kit):\n    return 1\n")
        assert exp.config_hash() != before  # the code changed: another result set
    finally:
        sys.path.remove(str(package.parent))
        sys.modules.pop("hashed_agent", None)


def test_the_hash_holds_the_distributions_name_and_version(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "dist_agent").mkdir(parents=True)
    module = site / "dist_agent" / "__init__.py"
    module.write_text("def make(kit):\n    return None\n")
    info = site / "lab_dist-1.0.dist-info"
    info.mkdir()
    info.joinpath("METADATA").write_text("Metadata-Version: 2.1\nName: lab-dist\nVersion: 1.0\n")
    info.joinpath("top_level.txt").write_text("dist_agent\n")
    sys.path.insert(0, str(site))
    try:
        exp = Experiment(name="d", agent="dist_agent:make", model="m")
        assert exp.answer_settings()["plugin"] == {
            "module": "dist_agent", "factory": "make", "distribution": "lab-dist==1.0"
        }  # fmt: skip
        before = exp.config_hash()
        module.write_text("def make(kit):\n    return 2\n")
        assert exp.config_hash() == before  # a distribution is known by its version, not its files
        info.joinpath("METADATA").write_text("Metadata-Version: 2.1\nName: lab-dist\nVersion: 1.1\n")
        assert exp.config_hash() != before
    finally:
        sys.path.remove(str(site))


def test_existing_experiments_keep_their_hashes() -> None:
    """Adding the fields changed no built-in experiment's settings (the golden hashes are in tests/compat)."""
    for agent in ("giant", "thumbnail", "random"):
        settings = Experiment(name="g", agent=agent, model="m").answer_settings()
        assert "agent_options" not in settings and "plugin" not in settings


def check(path: Path, capsys: pytest.CaptureFixture) -> tuple[int, str]:
    code = experiments_cli.main(["--file", str(path), "check"])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        ("lab_broken:make_agent", "module 'lab_broken' cannot be imported (ModuleNotFoundError: No module "
         "named 'lab_missing_dependency')"),
        ("no_such_lab:make_agent", "no module 'no_such_lab' on the Python path"),
        ("lab_agent:no_factory", "module 'lab_agent' has no callable 'no_factory'"),
    ],
)  # fmt: skip
def test_check_refuses_a_plugin_that_cannot_be_imported(
    tmp_path: Path, capsys: pytest.CaptureFixture, agent: str, message: str
) -> None:
    path = declare(tmp_path, agent=agent, base_url="http://127.0.0.1:9/v1")
    code, err = check(path, capsys)
    assert code == 1 and f"experiment 'lab': plug-in {agent!r}: {message}" in err, err
    assert "Traceback" not in err
    good = declare(tmp_path, agent=LAB, base_url="http://127.0.0.1:9/v1")
    assert check(good, capsys) == (0, "")


def test_the_installed_distributions_are_read_once_per_python_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hashing a plug-in experiment again does not read the installed distributions again; a changed
    Python path is read afresh (the test above relies on it)."""
    from giant_assets.experiments import plugins

    reads: list[int] = []
    real = importlib.metadata.distributions

    def counted(**kwargs: Any):
        reads.append(1)
        return real(**kwargs)

    monkeypatch.setattr(importlib.metadata, "distributions", counted)
    plugins.distributions_providing.cache_clear()
    exp = Experiment(name="c", agent="json:loads", model="m")  # a module from no distribution
    assert exp.config_hash() == exp.config_hash() == exp.config_hash()
    assert len(reads) == 1
    monkeypatch.syspath_prepend(str(tmp_path))
    exp.config_hash()
    assert len(reads) == 2
    plugins.distributions_providing.cache_clear()


def _dist_info(site: Path, name: str, record: str, top_level: str | None = None) -> None:
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "RECORD").write_text(record)
    if top_level is not None:
        (info / "top_level.txt").write_text(top_level)


def test_the_distributions_providing_a_package_are_the_standard_librarys(tmp_path: Path) -> None:
    """For every top-level name of this venv, and of distributions written here in the layouts the
    standard library reads differently (declared, inferred from RECORD with a quoted path, a .pyc only,
    a single-file module, a name only inside another's path), the answer is packages_distributions'."""
    from giant_assets.experiments import plugins

    site = tmp_path / "site"
    _dist_info(site, "declares", "whatever/x.py,,\n", top_level="labagent\nother\n")
    _dist_info(site, "infers", '"labagent/a,b.py",sha256=x,1\ninfers-1.0.dist-info/RECORD,,\n')
    _dist_info(site, "compiled-only", "compiledpkg/__pycache__/m.pyc,,\n")
    _dist_info(site, "single-file", "solo.py,,\n../../bin/tool,,\n")
    _dist_info(site, "mentions", "tools/labagent_helpers/x.py,,\nlabagent.txt,,\n")
    path = (str(site), *sys.path)
    plugins.distributions_providing.cache_clear()
    expected = {  # packages_distributions() reads sys.path: the same path, set for the call
        name: sorted(set(dists)) for name, dists in _packages_distributions(list(path)).items()
    }
    assert {"labagent", "solo", "other", "tools", "dagster", "yaml"} <= set(expected)
    # the written ones, and twenty of this venv's: ten declared (top_level.txt), ten inferred from RECORD
    declared, inferred = [], []
    for dist in importlib.metadata.distributions():
        tops, name = (dist.read_text("top_level.txt") or "").split(), dist.metadata["Name"]
        (declared if tops else inferred).extend(n for n, dists in expected.items() if name in dists)
    venv = sorted(set(declared))[:10] + sorted(set(inferred) - set(declared))[:10]
    assert len(venv) == 20
    written = ["labagent", "other", "tools", "solo", "compiledpkg", "nosuchpackage", "labagent_helpers", "x"]
    for name in [*written, *venv]:
        got = sorted(set(plugins.distributions_providing(name, path)))
        assert got == expected.get(name, []), name
    assert expected["labagent"] == ["declares", "infers"] and "mentions" not in expected.get("x", [])
    plugins.distributions_providing.cache_clear()


def _packages_distributions(path: list[str]) -> dict[str, list[str]]:
    saved = sys.path[:]
    sys.path[:] = path
    try:
        return importlib.metadata.packages_distributions()
    finally:
        sys.path[:] = saved
