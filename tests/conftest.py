"""Shared fixtures: the generated sample slides, a temp data dir, Dagster resources over it."""

from __future__ import annotations

import fcntl
import gc
import os
import signal
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.warm_start.server import WARM_START_ENV, ServerExited, WarmStart, inherited_environment
from tests.support.warm_start.zygote import UNSUPPORTED

# The suite compiles the package's and tests' modules once, into git-ignored __pycache__ folders, even where
# PYTHONDONTWRITEBYTECODE is set (as in some shells and CI images): otherwise each of the suite's hundreds
# of Python subprocesses (every dagster/giant-* command) compiles the package again (~0.7 CPU-seconds) and
# each xdist worker rewrites the asserts of every test module again (~16 CPU-seconds). Set before the
# package's first import below; the environment change reaches every subprocess the tests start.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

from giant_assets.multipathqa.sample import ensure_sample_slides  # noqa: E402
from tests.support import ephemeral_storage  # noqa: E402
from tests.support.slides import keep_renderings_in  # noqa: E402

# The tests' ephemeral Dagster instances keep their in-memory databases' connections (one per thread)
# instead of opening one per statement: tests/support/ephemeral_storage.py
ephemeral_storage.install()

# A suite started with SIGINT ignored (`make test &` in a script, nohup, some CI runners) would pass that on
# to SIGTERM: each in-process Dagster run copies SIGINT's handler to SIGTERM when it ends
# (dagster/_utils/interrupts.py), and every process started after that ignores SIGTERM. Dagster's
# compute-log `tail -F` and its watcher then outlive their run (its clean-up waits 30 s for each, then
# leaves them), and daemons stop only at the 20 s SIGKILL: ~60 s of a status test, and the orphaned tails.
# Each worker starts from the dispositions an interactive shell gives.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


_warm_start: WarmStart | None = None


@pytest.fixture(scope="session")
def warm_start() -> WarmStart:
    """The session's warm-start server, listening."""
    if _warm_start is None:
        pytest.skip(f"{WARM_START_ENV}=0: commands run cold")
    try:
        _warm_start.wait_listening()
    except ServerExited as exc:
        if exc.returncode != UNSUPPORTED:
            raise
        pytest.skip("the warm-start server cannot run on this system (no pidfd_open): commands run cold")
    return _warm_start


@pytest.fixture(scope="session")
def rate_limit_dirs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ratelimits")


@pytest.fixture(autouse=True)
def own_rate_limits(rate_limit_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test (and the processes it starts) its own machine-wide rate-limit files: the buckets of
    one test, or of an earlier run of the suite, never throttle another. (``mkdtemp`` in one folder:
    pytest's numbered ``mktemp`` lists every earlier test's folder each time.)"""
    monkeypatch.setenv("GIANT_RATE_LIMIT_DIR", tempfile.mkdtemp(dir=rate_limit_dirs))


@pytest.fixture(scope="session")
def sample_wsi_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample's slides (real pyramidal TIFF/SVS), generated once per run of the suite: its
    xdist workers share the run's folder, the first to take the lock writes them. Tests copy them
    before changing anything."""
    shared = run_folder(tmp_path_factory)
    with open(shared / "sample_wsi.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return ensure_sample_slides(shared / "sample_wsi")


@pytest.fixture(scope="session", autouse=True)
def rendered_slides(tmp_path_factory: pytest.TempPathFactory) -> None:
    """tests.support.slides renders each distinct synthetic slide once per run of the suite."""
    keep_renderings_in(run_folder(tmp_path_factory) / "rendered_slides")


def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This run of the suite's folder: with xdist, its pytest-N, which holds every worker's basetemp."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if "PYTEST_XDIST_WORKER" in os.environ else base


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    monkeypatch.setenv("GIANT_DATA_DIR", str(path))
    return path


def pytest_configure(config: pytest.Config) -> None:
    """The Python commands the tests start run warm (tests/support/warm_start): forked from one
    interpreter per test session that imported Dagster, pandas and pyarrow once, instead of importing
    them again in each of the suite's hundreds of processes (~2 of their ~5 CPU-seconds). xdist's
    controller starts it while its workers start and collect (they inherit its variables and share it);
    without xdist, the test process does. TESTS_WARM_START=0: all cold."""
    global _warm_start
    socket = os.environ.get(WARM_START_ENV)
    if socket == "0":
        return
    if hasattr(config, "workerinput"):  # an xdist worker: its controller's server
        _warm_start = WarmStart.attached(socket) if socket else None
        return
    # the environment the commands will have: xdist's workers start with the C library's (more than
    # os.environ here: inherited_environment), a single test process has its os.environ
    _warm_start = WarmStart(
        inherited_environment() if getattr(config.option, "numprocesses", None) else os.environ
    )
    os.environ.update(_warm_start.env)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _warm_start is not None:
        _warm_start.stop()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Move everything imported so far (Dagster, pandas, the model SDKs, every test module) to the
    garbage collector's permanent generation: its full collections during the run then scan only what the
    tests make, not the millions of objects the imports left (~3.5 of every 100 CPU-seconds otherwise)."""
    gc.freeze()
