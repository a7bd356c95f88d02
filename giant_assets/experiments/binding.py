"""A name is bound to the settings that decide its answers the first time it runs.

The binding is a small JSON file per name under ``<data_dir>/experiments/``. A later run under the same
name whose answer-deciding settings differ fails, naming every field that differs; speed and scoring
settings may change freely.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from giant_assets.experiments.spec import Experiment


class ExperimentConflict(ValueError):
    """An experiment name was already bound to other answer-deciding settings."""


def binding_path(data_dir: Path, name: str) -> Path:
    return data_dir / "experiments" / f"{name}.json"


def differing_fields(bound: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Fields whose values differ between two answer-settings dicts, sorted."""
    return sorted(k for k in bound.keys() | current.keys() if bound.get(k) != current.get(k))


def bind(experiment: Experiment, data_dir: Path) -> dict[str, Any]:
    """Record the name's answer settings on first use; refuse a later use with different ones."""
    path = binding_path(data_dir, experiment.name)
    current = json.loads(json.dumps(experiment.answer_settings(), default=str))
    doc = {"name": experiment.name, "config_hash": experiment.config_hash(), "answer_settings": current}
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:
        bound = json.loads(path.read_text(encoding="utf-8"))
        diff = differing_fields(bound["answer_settings"], current)
        if diff:
            details = ", ".join(
                f"{k}: {bound['answer_settings'].get(k)!r} -> {current.get(k)!r}" for k in diff
            )
            raise ExperimentConflict(
                f"experiment {experiment.name!r} already ran with other answer-deciding settings "
                f"({details}); results under one name are never mixed: give the new settings a new name, "
                f"or delete {path} together with that experiment's results to start it over"
            ) from None
        return bound
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2)
    return doc
