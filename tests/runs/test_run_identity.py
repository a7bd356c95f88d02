"""The run key: a run's replies are kept under it, so it must tell apart what the docs say it does."""

from __future__ import annotations

import hashlib

from giant_assets.runs.run_identity import RunIdentity


def test_the_run_key_changes_with_the_item_fingerprint_and_only_with_the_identity() -> None:
    """Documented contract (replies.py, plan.py): a changed question or slide (item fingerprint) is a
    new run, whose replies are not replayed from the old one's. Mutation: the key without the
    fingerprint."""
    run = RunIdentity("h", "tcga", "i1", 0, "fpA")
    assert run.key == RunIdentity("h", "tcga", "i1", 0, "fpA").key  # stable
    assert run.key == hashlib.sha256(b"h|tcga|i1|0|fpA").hexdigest()[:32]
    others = [
        RunIdentity("h", "tcga", "i1", 0, "fpB"),
        RunIdentity("h", "tcga", "i1", 0, None),  # a legacy run (journalled before fingerprints)
        RunIdentity("h2", "tcga", "i1", 0, "fpA"),
        RunIdentity("h", "gtex", "i1", 0, "fpA"),
        RunIdentity("h", "tcga", "i2", 0, "fpA"),
        RunIdentity("h", "tcga", "i1", 1, "fpA"),
    ]
    keys = [run.key] + [o.key for o in others]
    assert len(set(keys)) == len(keys)
    assert all(len(k) == 32 and int(k, 16) >= 0 for k in keys)
