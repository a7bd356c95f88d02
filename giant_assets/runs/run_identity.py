"""Which (result set, item, run) the current task is running: set by the runner around each run.

Model-call stores key what they keep by this identity plus the request's digest, never by the request
alone: the runs of one item send byte-identical first requests and must stay independent samples.
Outside a run (``giant-run`` on one item, tests) ``current_run()`` is None.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class RunIdentity:
    config_hash: str
    benchmark_name: str
    benchmark_id: str
    run_index: int
    item_fingerprint: str | None = None

    @property
    def key(self) -> str:
        """A short stable digest of the identity (32 hex chars)."""
        blob = "|".join(
            (self.config_hash, self.benchmark_name, self.benchmark_id, str(self.run_index),
             self.item_fingerprint or "")
        )  # fmt: skip
        return hashlib.sha256(blob.encode()).hexdigest()[:32]


_CURRENT: contextvars.ContextVar[RunIdentity | None] = contextvars.ContextVar("giant_run", default=None)


def current_run() -> RunIdentity | None:
    return _CURRENT.get()


@contextlib.contextmanager
def running(identity: RunIdentity | None) -> Iterator[None]:
    """The current task (and tasks it starts) runs ``identity`` while inside."""
    token = _CURRENT.set(identity)
    try:
        yield
    finally:
        _CURRENT.reset(token)
