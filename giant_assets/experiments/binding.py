"""A name is bound to the settings that decide its answers the first time it runs.

The binding is a small JSON file per name under ``<data_dir>/experiments/``. A later run under the same
name whose answer-deciding settings differ fails, naming every field that differs; speed and scoring
settings may change freely.

The binding also records the endpoint the model calls go to (``Experiment.endpoint``: ``base_url``, a
server's address, ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL`` as the SDKs read them, or the provider's
own API), without credentials; an endpoint other than the provider's is an answer setting (``base_url``).

The file is created whole or not at all (written to a temp file, then linked into place, which fails
if another run bound the name first), so a full disk never leaves an empty binding; one found empty or
corrupt (written by an older version) is reported with its path and what to do.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from giant_assets.core.files import current_umask
from giant_assets.experiments.spec import Experiment


class ExperimentConflict(ValueError):
    """An experiment name was already bound to other answer-deciding settings."""


class BindingCorrupt(ValueError):
    """A binding file that is empty or not a binding."""


def read_binding(path: Path) -> dict[str, Any]:
    """The binding stored at ``path``; BindingCorrupt naming the file when it is empty or unreadable."""
    problem, doc = None, None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        problem = "empty (0 bytes)" if not path.stat().st_size else f"corrupt ({exc})"
    if problem is None and not (isinstance(doc, dict) and isinstance(doc.get("answer_settings"), dict)):
        problem = "corrupt (no answer_settings object)"
    if problem is not None:
        raise BindingCorrupt(
            f"experiment binding {path} is {problem}, as a full disk can leave it; delete it and re-run to "
            "bind the experiment's current settings again (its journals are keyed by those settings' hash, "
            "so no other answers are reused)"
        )
    return doc


def binding_path(data_dir: Path, name: str) -> Path:
    return data_dir / "experiments" / f"{name}.json"


def differing_fields(bound: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Fields whose values differ between two answer-settings dicts, sorted."""
    return sorted(k for k in bound.keys() | current.keys() if bound.get(k) != current.get(k))


def bind(experiment: Experiment, data_dir: Path) -> dict[str, Any]:
    """Record the name's answer settings on first use; refuse a later use with different ones."""
    path = binding_path(data_dir, experiment.name)
    current = json.loads(json.dumps(experiment.answer_settings(), default=str))
    doc = {
        "name": experiment.name,
        "config_hash": experiment.config_hash(),
        "endpoint": experiment.endpoint,  # where the model calls go (no credentials; "" offline)
        "answer_settings": current,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    if not _create_whole(path, json.dumps(doc, indent=2).encode()):
        bound = read_binding(path)
        diff = differing_fields(bound["answer_settings"], current)
        if diff:
            details = ", ".join(
                f"{k}: {bound['answer_settings'].get(k)!r} -> {current.get(k)!r}" for k in diff
            )
            if "protocol_version" in diff:  # the platform changed what it sends, not the user's settings
                raise ExperimentConflict(
                    f"experiment {experiment.name!r} last ran under the platform's protocol version "
                    f"{bound['answer_settings'].get('protocol_version')!r}; this giant-assets sends protocol "
                    f"{current.get('protocol_version')!r} ({details}), so those results are a "
                    f"different result set and are never mixed with new ones. To run the name under the "
                    f"current protocol, delete {path} and re-run every benchmark of the row (its old answers "
                    "stay in their journal, unused); to keep the old results, declare the same settings "
                    "under a new name"
                ) from None
            raise ExperimentConflict(
                f"experiment {experiment.name!r} already ran with other answer-deciding settings "
                f"({details}); results under one name are never mixed: give the new settings a new name, "
                f"or delete {path} together with that experiment's results to start it over"
            ) from None
        return bound
    return doc


def _create_whole(path: Path, data: bytes) -> bool:
    """Create ``path`` holding ``data`` whole, atomically; False (nothing written) if it exists."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~current_umask())
        os.link(tmp, path)  # atomic, and refuses an existing name: the first run to bind wins
    except FileExistsError:
        return False
    finally:
        Path(tmp).unlink(missing_ok=True)
    return True
