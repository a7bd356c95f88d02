"""Experiments declared in YAML (``experiments.yaml``, or the file ``GIANT_EXPERIMENTS`` names).

    defaults:            # optional: applied to every experiment, each may override
      concurrency: 8
    experiments:
      random: {agent: random}
      gpt5-giant: {agent: giant, provider: openai, model: gpt-5}
      gpt5-giant-x5: {extends: gpt5-giant, runs_per_item: 5}   # experiments/extends.py
    benchmarks:          # optional: a lab's own slide benchmarks (benchmarks/declaration.py)
      camelyon16-metastasis: {items: cohorts/c16.csv, answer: label, metric: balanced_accuracy}

Every problem is reported naming the file, the experiment (or benchmark) and the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from giant_assets.benchmarks.declaration import Declaration, DeclarationError, parse_declaration
from giant_assets.core.settings import EXPERIMENTS_ENV, env
from giant_assets.experiments.extends import EXTENDS, ExtendsError, resolve_extends
from giant_assets.experiments.problems import field_problem
from giant_assets.experiments.spec import Experiment
from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES

DEFAULT_FILE = "experiments.yaml"
_MERGE_TAG = "tag:yaml.org,2002:merge"


class ExperimentsFileError(ValueError):
    """The experiments file cannot be used; the message names file, experiment and field."""


def experiments_path(configured: str = "") -> Path:
    """The experiments file: ``configured``, else ``$GIANT_EXPERIMENTS``, else ./experiments.yaml."""
    return Path(configured or env(EXPERIMENTS_ENV) or DEFAULT_FILE).expanduser().resolve()


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe YAML loader that refuses a key given twice in one mapping (YAML would keep the last)."""


def _mapping_without_duplicates(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG:  # PyYAML would merge it before the duplicate check could see keys
            raise ExperimentsFileError(
                f"{loader.name}: line {key_node.start_mark.line + 1}: a YAML merge key (<<) is not read "
                f"here: write `{EXTENDS}: NAME` to start from experiment NAME's settings "
                "(docs/table1-recipes.md)"
            )
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, list | dict | set):  # YAML allows "? [a, b]" keys; Python cannot hash them
            raise ExperimentsFileError(
                f"{loader.name}: line {key_node.start_mark.line + 1}: a key must be a plain name, "
                f"not a {'list' if isinstance(key, list) else 'mapping'} ({key!r}); write it as `name:`"
            )
        if key in seen:
            raise ExperimentsFileError(
                f"{loader.name}: line {key_node.start_mark.line + 1}: {key!r} is given twice "
                f"(first on line {seen[key] + 1})"
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


# the last validation of each file, by its exact text: a run reads the file once per resource use (about
# ten times per cell), and parsing and validating it is most of that; a changed text is validated again
_LOADED: dict[str, tuple[str, tuple[dict[str, Experiment], dict[str, Declaration]]]] = {}


def load_experiments(path: Path | str) -> dict[str, Experiment]:
    """All experiments of the file, by name, validated."""
    return dict(_load(Path(path))[0])


def load_benchmarks(path: Path | str) -> dict[str, Declaration]:
    """The benchmarks the file declares (its ``benchmarks:`` section), by name, validated."""
    return dict(_load(Path(path))[1])


def _load(path: Path) -> tuple[dict[str, Experiment], dict[str, Declaration]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ExperimentsFileError(
            f"{path}: experiments file not found (set {EXPERIMENTS_ENV} or create {DEFAULT_FILE})"
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ExperimentsFileError(f"{path}: cannot be read: {exc}") from exc
    seen = _LOADED.get(str(path))
    if seen is not None and seen[0] == text:
        return seen[1]  # Experiment and Declaration are frozen: sharing them is safe (callers copy the dicts)
    parsed = _parse(path, text)
    _LOADED[str(path)] = (text, parsed)
    return parsed


def _parse(path: Path, text: str) -> tuple[dict[str, Experiment], dict[str, Declaration]]:
    try:
        loader = _UniqueKeyLoader(text)
        loader.name = str(path)
        try:
            doc = loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise ExperimentsFileError(f"{path}: not valid YAML: {exc}") from exc
    except ExperimentsFileError:
        raise
    except RecursionError:  # e.g. 100,000 nested brackets
        raise ExperimentsFileError(f"{path}: not valid YAML: nested too deeply") from None
    except ValueError as exc:  # a scalar YAML cannot build, e.g. an integer of more than 4300 digits
        reason = str(exc).split(":")[0][:200]
        if "digits" in reason:
            raise ExperimentsFileError(
                f"{path}: a number in the file is too long to read ({reason}): no field takes one"
            ) from None
        raise ExperimentsFileError(f"{path}: a value cannot be read: {reason}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("experiments"), dict):
        raise ExperimentsFileError(
            f"{path}: expected a mapping with an 'experiments' mapping (name: settings)"
        )
    unknown = sorted(set(doc) - {"defaults", "experiments", "benchmarks"}, key=str)
    if unknown:
        raise ExperimentsFileError(
            f"{path}: unknown top-level key(s) {unknown}; use 'defaults', 'experiments', 'benchmarks'"
        )
    defaults = doc.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise ExperimentsFileError(f"{path}: 'defaults' must be a mapping of settings")
    if EXTENDS in defaults:
        raise ExperimentsFileError(
            f"{path}: 'defaults', field '{EXTENDS}': belongs in an experiment, not defaults"
        )
    bodies = {str(name): body for name, body in doc["experiments"].items()}
    try:
        bodies, via = resolve_extends(bodies)
    except ExtendsError as exc:
        raise ExperimentsFileError(f"{path}: experiment {exc.experiment[:80]!r}: {exc}") from None
    experiments = {
        name: _experiment(path, name, defaults, body, via.get(name)) for name, body in bodies.items()
    }
    return experiments, _benchmarks(path, doc.get("benchmarks"))


def _benchmarks(path: Path, section: Any) -> dict[str, Declaration]:
    """The ``benchmarks:`` section: name -> declaration (an empty or absent section declares none)."""
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise ExperimentsFileError(f"{path}: 'benchmarks' must be a mapping (name: declaration)")
    declared = {}
    for name, body in section.items():
        if name in BENCHMARK_NAMES:
            raise ExperimentsFileError(
                f"{path}: benchmark {name!r}, field 'name': a built-in MultiPathQA benchmark has that name; "
                "choose another"
            )
        try:
            declared[name] = parse_declaration(name, body, path.parent)
        except DeclarationError as exc:
            raise ExperimentsFileError(f"{path}: benchmark {str(name)[:80]!r}: {exc}") from None
    return declared


def _experiment(path: Path, name: str, defaults: dict, body: Any, via: list[str] | None = None) -> Experiment:
    """One experiment validated; ``via``: the experiments it extends (named in its errors, as the bad
    field may be one of theirs)."""
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise ExperimentsFileError(f"{path}: experiment {name!r}: expected a mapping of settings")
    if "name" in body and body["name"] != name:
        raise ExperimentsFileError(f"{path}: experiment {name!r}, field 'name': differs from its key")
    try:
        return Experiment(**(defaults | body | {"name": name}))
    except ValidationError as exc:
        fields = [*Experiment.model_fields, EXTENDS]
        problems = "; ".join(field_problem(err, fields) for err in exc.errors())
        inherited = f" (with the settings of {' <- '.join(map(repr, via))}, which it extends)" if via else ""
        raise ExperimentsFileError(f"{path}: experiment {name!r}{inherited}: {problems}") from exc


def unbudgeted(path: Path | str, experiments: dict[str, Experiment]) -> list[str]:
    """One line per paid experiment without ``budget_usd``: ``giant-experiments check`` refuses them and
    ``predictions`` runs none (``estimate`` and ``list`` still show them, to help choose the budget)."""
    return [
        f"{path}: experiment {name!r}: {why}"
        for name, exp in experiments.items()
        if (why := exp.unbudgeted())
    ]


def get_experiment(path: Path | str, name: str) -> Experiment:
    """One experiment by name; a clear error listing the declared names otherwise."""
    experiments = load_experiments(path)
    if name not in experiments:
        raise ExperimentsFileError(f"{path}: no experiment {name!r}; declared: {sorted(experiments)}")
    return experiments[name]


class DeclaredExperiments:
    """The experiments (and benchmarks) an experiments file declares, read afresh on each call; the file
    is ``path``, or GIANT_EXPERIMENTS, else ./experiments.yaml (plain Python: the CLI reads it without
    Dagster; ExperimentsResource is the same for assets and sensors)."""

    path: str

    @property
    def file(self) -> Path:
        return experiments_path(self.path)

    def all(self) -> dict[str, Experiment]:
        return load_experiments(self.file)

    def benchmarks(self) -> dict[str, Declaration]:
        """The benchmarks the file declares (its ``benchmarks:`` section); none while there is no file
        (ingest needs no experiments file)."""
        return load_benchmarks(self.file) if self.file.is_file() else {}

    def benchmark_names(self) -> tuple[str, ...]:
        """Every benchmark: the five built-ins, then the declared ones."""
        from giant_assets.benchmarks.registry import benchmark_names

        return benchmark_names(self.benchmarks())

    def get(self, name: str) -> Experiment:
        """The declared experiment ``name``; for one no longer declared, an error saying what to do."""
        declared = self.all()
        if name not in declared:
            raise ExperimentsFileError(
                f"{self.file}: experiment {name!r} is not declared (removed?); declared: {sorted(declared)}. "
                f"Its stored results are kept and the leaderboard lists it as removed: declare it again "
                f"(its settings: data/experiments/{name}.json) to run or re-score it, or run "
                "`giant-experiments prune` to drop its partitions"
            )
        return declared[name]


@dataclass(frozen=True)
class ExperimentsFile(DeclaredExperiments):
    """DeclaredExperiments of the file at ``path`` (empty: GIANT_EXPERIMENTS, else ./experiments.yaml)."""

    path: str = ""
