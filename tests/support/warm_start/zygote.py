"""The test suite's warm start: Python commands the tests start run in a fork of an interpreter that has
already imported Dagster, pandas, pyarrow, SQLAlchemy and the other heavy third-party libraries.

Each of the suite's hundreds of ``dagster``/``giant-*`` processes otherwise spends ~2 of its ~5
CPU-seconds importing the same libraries. A process started with ``TESTS_WARM_START`` naming this
server's socket (tests/conftest.py sets it, and ``warm_site/`` on PYTHONPATH, for the processes tests
start) hands its command over from its ``sitecustomize`` before running anything (warm_site/
sitecustomize.py): argv, environment, working directory, open file descriptors, ignored signals, stdio
encodings and warnings options. This server forks a waiter; the waiter forks the command's process, which
takes all of that over and runs the command as a fresh interpreter would (``__main__``, ``sys.path``,
warnings filters, new random seeds, ``os.getppid()`` answering the starting process's parent; an
uncaught exception or Ctrl-C ends it as it ends a fresh one). The waiter reports the exit status (or
the signal that ended it) to the starting process, which exits the same way and forwards the signals
it gets meanwhile (to the command alone, as ``kill PID`` does). If the starting process dies (SIGKILL,
a timeout), the waiter kills the command's process group.

Dagster's run workers (multiprocessing "spawn" children of its code servers, ``-c "from
multiprocessing.spawn import spawn_main; ..." --multiprocessing-fork``, ``-Wopt`` options before) are
taken too: their pipe and tracker descriptors pass like any other. ``-u`` is taken (stdout and stderr
stay unbuffered). What stays cold (run by the starting process itself, as without this): other ``-c``
code unless its test asks (``server.warm_code``: a test's code may probe what a fresh interpreter holds;
never xdist's workers: tried warm on 2026-11-29, see docs/perf.md), scripts inside
``site-packages`` (libraries' helpers such as Dagster's watch_orphans.py: tiny), other interpreter
flags (``-X``, ``-B``, PYTHONHASHSEED...) or executable, other ids, capabilities, limits, niceness,
cgroup or namespaces (``setpriv``, ``preexec_fn``), an environment that differs from this server's in a
variable the preloaded libraries read while importing (recorded here), and everything when the server
is not there, and a command whose ``sys.path`` finds another copy of the package than the preloaded one.
Preloaded: third-party libraries, then the package's modules a command loading the code location imports
(``PACKAGE_PRELOAD``); the rest of the package and the tests are imported afresh by each command, from its
own ``sys.path``. Known differences: a command's ``sys.modules`` holds the preloaded modules, imported or
not (numpy's four warnings filters with them); ``/proc/self/stat`` and C code calling getppid(2) see the
waiter; a warm command is its own process group, so SIGKILL to the starting process's group ends it a
few milliseconds later (its waiter kills it), not at the same instant: a test that needs a group gone at
once gives its commands ``TESTS_WARM_START=0`` (test_batch_mode's killed daemon).
"""

from __future__ import annotations

import _collections_abc
import array
import contextlib
import dis
import fcntl
import importlib
import importlib.machinery
import io
import json
import os
import select
import signal
import socket
import struct
import sys
import time
import traceback
import warnings

DEFAULT_FILTERS = list(warnings.filters)  # a fresh interpreter's (started without -W or PYTHONWARNINGS)
# Not DuckDB: its task scheduler's threads do not survive a fork (a forked process hangs at exit joining
# them; importing it starts one already). Not scipy.ndimage either: its import starts a thread. numpy's
# OpenBLAS threads and pyarrow's jemalloc thread have fork handlers.
PRELOAD = (
    "numpy",
    "pandas",
    "pyarrow",
    "pyarrow.parquet",
    "pyarrow.compute",
    "yaml",
    "pydantic",
    "sqlalchemy",
    "alembic.runtime.migration",
    "alembic.script",
    "PIL.Image",
    "openslide",
    "openai",  # ~1 s of import each time a command first talks to a model (local servers too)
    "anthropic",  # ~2.4 s (Claude, on Anthropic, Bedrock and Vertex)
    "click",
    "dagster",
    "dagster._cli",
    "dagster._core.storage.event_log.sqlite.sqlite_event_log",
    "dagster._core.storage.runs.sqlite.sqlite_run_storage",
    "dagster._core.storage.schedules.sqlite.sqlite_schedule_storage",
    # what the commands still imported themselves (a sampling profile of the whole suite, 2026-11-29):
    # Dagster's code server and gRPC (code servers, launches), its asset selection grammar and instance
    # paths (upath), the figures and charts (matplotlib), Parquet datasets, slides, the Gemini SDK, tables
    "dagster._grpc.server",
    "dagster._core.definitions.antlr_asset_selection.antlr_asset_selection",
    "upath",
    "matplotlib.pyplot",
    "pyarrow.dataset",
    "tifffile",
    "google.genai",
    "anyio._backends._asyncio",
    "jinja2",
    "tabulate",
)
PACKAGE = "giant_assets"
# then the package's own modules that loading its code location imports (~0.27 CPU-seconds of each
# `dagster` command, code server and run worker), all but definitions.py itself (which reads the sensors'
# interval as it makes them), and what the other commands import most. They read no environment variable
# while importing (checked by ``preload``: a command with another value would run cold) and start no
# thread. A command whose sys.path finds another copy of the package runs cold (``cold_reason``).
PACKAGE_PRELOAD = (
    *(f"giant_assets.platform.assets.{name}" for name in (
        "figures", "grading", "ingest", "inventory", "leaderboard", "path_review", "predictions", "report",
        "reviews", "roi", "scores",
    )),
    *(f"giant_assets.platform.{name}" for name in (
        "automation", "batch_sensor", "checks", "executor", "io_manager", "partitions", "resources",
        "sensors",
    )),
    "giant_assets.agents.giant",
    "giant_assets.report.charts",
    "giant_assets.report.viewer.site",
    "giant_assets.grading.grade",
)  # fmt: skip
# PYTHON* variables a command may set for itself (the others, PYTHONHASHSEED, PYTHONUTF8..., shape the
# interpreter at start-up: a command that sets them otherwise runs cold)
PER_COMMAND = ("PYTHONPATH", "PYTHONWARNINGS", "PYTHONDONTWRITEBYTECODE", "PYTHONIOENCODING")
FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
MAX_FDS = 250  # descriptors passed with one command (SCM_RIGHTS)
HEADER = struct.Struct("!I")
HIGH_FD = 700  # where received descriptors wait before taking their numbers
IDENTITY: dict = {}  # the server's process_identity()


def send_message(sock: socket.socket, payload: dict, fds: list[int] | None = None) -> None:
    data = json.dumps(payload).encode()
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sock.sendmsg([HEADER.pack(len(data)) + data], ancillary)


def receive_message(sock: socket.socket) -> tuple[dict, list[int]]:
    """One message and the descriptors that came with it (``{}`` at end of stream)."""
    fds = array.array("i")
    head, ancdata, _, _ = sock.recvmsg(HEADER.size, socket.CMSG_LEN(MAX_FDS * fds.itemsize))
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    if len(head) < HEADER.size:
        return {}, list(fds)
    (size,) = HEADER.unpack(head)
    body = b""
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            return {}, list(fds)
        body += chunk
    return json.loads(body), list(fds)


_CACHE = dis.opmap.get("CACHE", -1)  # inline cache entries after an instruction (CPython >= 3.11)


class _RecordingEnviron(os._Environ):  # type: ignore[name-defined,misc]
    """os.environ, noting each variable read by name (the preloaded libraries' import-time settings):
    ``os.environ[NAME]``, ``os.environ.get(NAME)``, ``os.getenv(NAME)``, ``NAME in os.environ``. A copy
    of the whole environment (``dict(os.environ)`` for a subprocess: ``platform.architecture``) or a
    scan of it (tqdm's for ``TQDM_*`` settings) is not a read by name."""

    read: set[str] = set()

    def __getitem__(self, key: str) -> str:
        caller = sys._getframe(1)
        code = caller.f_code
        if code.co_filename in ("<frozen _collections_abc>", _collections_abc.__file__):
            named = code.co_name in ("get", "__contains__")  # not the items()/values() iterators: scans
        else:  # a subscript; a specialised one (BINARY_SUBSCR_GETITEM) points at its last cache entry
            offset = caller.f_lasti
            while offset > 0 and code.co_code[offset] == _CACHE:
                offset -= 2
            named = code.co_code[offset] == dis.opmap["BINARY_SUBSCR"]
        if named:
            _RecordingEnviron.read.add(key)
        return super().__getitem__(key)


def preload() -> tuple[dict[str, str | None], list]:
    """Import PRELOAD: the environment variables read meanwhile (with their values here) and the
    warnings filters the imports put in front of the defaults."""
    environ = os.environ
    environ.__class__ = _RecordingEnviron
    try:
        for name in PRELOAD:
            importlib.import_module(name)
        libraries = set(_RecordingEnviron.read)
        for name in PACKAGE_PRELOAD:
            importlib.import_module(name)
    finally:
        environ.__class__ = os._Environ  # type: ignore[attr-defined]
    own = sorted(key for key in _RecordingEnviron.read - libraries if key.startswith("GIANT_"))
    if own:  # every command setting it would run cold: read it where it is used, not while importing
        raise RuntimeError(f"the package's preloaded modules read {own} while importing")
    added = list(warnings.filters[: len(warnings.filters) - len(DEFAULT_FILTERS)])
    if warnings.filters[len(added) :] != DEFAULT_FILTERS:
        raise RuntimeError("a preloaded library changed the default warnings filters")
    return {key: os.environ.get(key) for key in _RecordingEnviron.read}, added


def process_identity() -> dict:
    """What a fork inherits from the server rather than from the starting process, and what a command
    may depend on: ids, groups, capabilities (``setpriv --bounding-set``), no_new_privs, seccomp,
    resource limits, niceness, cgroup and namespaces."""
    import resource

    status = dict(
        line.split(":", 1)
        for line in open("/proc/self/status").read().splitlines()  # noqa: SIM115
        if line.startswith(("Uid", "Gid", "Groups", "Cap", "NoNewPrivs", "Seccomp"))
    )
    namespaces = {name: os.readlink(f"/proc/self/ns/{name}") for name in sorted(os.listdir("/proc/self/ns"))}
    limits = {
        name: resource.getrlimit(getattr(resource, name))
        for name in dir(resource)
        if name.startswith("RLIMIT_")
    }
    return {
        "status": {key: value.split() for key, value in status.items()},
        "namespaces": namespaces,
        "limits": {key: list(value) for key, value in limits.items()},
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "cgroup": open("/proc/self/cgroup").read(),  # noqa: SIM115
    }


def cold_reason(request: dict, read: dict[str, str | None]) -> str:
    """Why this server cannot run the command ("" when it can)."""
    env = request["env"]
    differs = sorted(key for key, value in read.items() if env.get(key) != value)
    if differs:
        return f"{', '.join(differs)} differ from the warm interpreter's (read while preloading)"
    startup = sorted(
        key
        for key in {*env, *os.environ}
        if key.startswith("PYTHON") and key not in PER_COMMAND and env.get(key) != os.environ.get(key)
    )
    if startup:
        return f"{', '.join(startup)} differ: they set up the interpreter"
    if request["flags"] != list(sys.flags) or request["xoptions"] != sys._xoptions:
        return "other interpreter flags"
    if request["identity"] != IDENTITY:
        return "another identity (ids, capabilities, limits, niceness, cgroup or namespaces)"
    if request["executable"] != os.path.realpath(sys.executable):
        return "another Python executable"
    found = package_origin(command_path(request), request["cwd"])
    preloaded = os.path.realpath(sys.modules[PACKAGE].__file__)
    if found != preloaded:
        return f"its {PACKAGE} is {found or 'not found'}, not the preloaded {preloaded}"
    return ""


def command_path(request: dict) -> list[str]:
    """The command's ``sys.path``: what ``-c``, ``-m`` or a script puts first, then the starting
    process's (relative entries are relative to the command's directory)."""
    if request.get("code") is not None:
        first = ""  # what -c puts first
    elif request["module"]:
        first = request["cwd"]
    else:
        first = os.path.dirname(os.path.realpath(os.path.join(request["cwd"], request["argv"][0])))
    return [first, *request["path"]]


def package_origin(path: list[str], cwd: str) -> str | None:
    """The ``__init__.py`` an interpreter with this ``sys.path`` would import the package from, found as
    its import system finds it (the path's entries, then the editable install's finder)."""
    entries = [os.path.join(cwd, entry) for entry in path]
    for finder in sys.meta_path:
        spec = finder.find_spec(PACKAGE, entries if finder is importlib.machinery.PathFinder else None)
        if spec is not None:
            return os.path.realpath(spec.origin) if spec.origin else None
    return None


def _take_descriptors(numbers: list[int], fds: list[int]) -> None:
    """The starting process's descriptors under their own numbers; nothing else open."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, HIGH_FD) for fd in fds]
    for fd in _open_fds():
        if fd not in high:
            with contextlib.suppress(OSError):  # the listing's own descriptor, closed already
                os.close(fd)
    for target, fd in zip(numbers, high, strict=True):
        os.dup2(fd, target, inheritable=True)
        os.close(fd)


def _stdio(settings: list[dict | None]) -> None:
    """sys.stdin/stdout/stderr as a fresh interpreter makes them over descriptors 0, 1 and 2."""
    for fd, (name, spec) in enumerate(zip(("stdin", "stdout", "stderr"), settings, strict=True)):
        if spec is None:
            stream = None
        else:
            raw = io.FileIO(fd, "r" if fd == 0 else "w", closefd=False)
            raw.name = f"<{name}>"  # type: ignore[misc]
            if fd == 0:
                buffered = io.BufferedReader(raw)
            else:  # -u (or PYTHONUNBUFFERED): the text layer writes straight to the descriptor
                buffered = raw if spec.get("unbuffered") else io.BufferedWriter(raw)
            stream = io.TextIOWrapper(
                buffered, encoding=spec["encoding"], errors=spec["errors"], newline="\n",
                line_buffering=spec["line_buffering"], write_through=spec["write_through"],
            )  # fmt: skip
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _become(request: dict, fds: list[int], added_filters: list) -> None:
    """In the command's process, before it runs: take over the starting process's state."""
    os.setsid()  # its own process group: the waiter can end it and everything it started
    _take_descriptors(request["fds"], fds)
    for name in (*FORWARDED, "SIGPIPE", "SIGCHLD", "SIGXFSZ"):
        signum = getattr(signal, name)
        if name in request["ignored"] or name in ("SIGPIPE", "SIGXFSZ"):  # Python ignores these two
            signal.signal(signum, signal.SIG_IGN)
        else:
            signal.signal(signum, signal.default_int_handler if name == "SIGINT" else signal.SIG_DFL)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.umask(request["umask"])
    sys.argv[:] = request["argv"]
    sys.orig_argv[:] = request["orig_argv"]
    sys.executable = request["executable_as_given"]
    sys.dont_write_bytecode = request["dont_write_bytecode"]
    sys.path[:] = command_path(request)
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    _stdio(request["stdio"])
    warnings.filters[:] = DEFAULT_FILTERS
    sys.warnoptions[:] = request["warnoptions"]
    warnings._processoptions(sys.warnoptions)  # type: ignore[attr-defined]  # as at start-up
    warnings.filters[:0] = added_filters  # as the preloaded libraries added them while importing
    warnings._filters_mutated()  # type: ignore[attr-defined]
    os.getppid = _parent_of(request["pid"])  # the command is the starting process: its parent is that one's
    import random

    random.seed()
    sys.modules["numpy"].random.seed()


def _parent_of(starter: int):  # noqa: ANN202
    """``os.getppid`` for the command: the starting process's parent, read afresh (a parent that dies
    reparents the starting process, and the command sees it as its own orphaning: runs/guard.py,
    Dagster's watch_orphans.py); 1 once the starting process is gone."""

    def getppid() -> int:
        try:
            return parent_pid(starter)
        except (OSError, IndexError, ValueError):
            return 1

    return getppid


def parent_pid(pid: int) -> int:
    """``pid``'s parent, from /proc (OSError when it is gone)."""
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])  # after the command name, which may hold ")"


def _run(request: dict) -> None:
    """Run the command as ``python SCRIPT``, ``python -m MODULE`` or ``python -c CODE`` would; exit 0
    when it returns (its exceptions, SystemExit and KeyboardInterrupt end the process as they end a fresh
    interpreter)."""
    import runpy

    if request.get("code") is not None:
        import builtins
        import importlib.machinery
        import types

        main = types.ModuleType("__main__")  # as -c makes it: no file, no spec
        main.__builtins__ = builtins  # type: ignore[attr-defined]
        main.__loader__ = importlib.machinery.BuiltinImporter
        main.__annotations__ = {}
        sys.modules["__main__"] = main
        exec(compile(request["code"], "<string>", "exec"), main.__dict__)  # noqa: S102 - the command's code
    elif request["module"]:
        runpy._run_module_as_main(request["module"])  # type: ignore[attr-defined]  # what -m runs
    else:
        runpy.run_path(request["argv"][0], run_name="__main__")
    raise SystemExit(0)


def _open_fds() -> list[int]:
    return [int(name) for name in os.listdir("/proc/self/fd") if name.isdigit()]


def _wait(conn: socket.socket, request: dict, fds: list[int], added: list, log: str | None) -> None:
    """The waiter: fork the command's process, tell the starting process its pid, then wait for whichever
    comes first: the command ends (report how, and log its CPU time to ``log``) or the starting process
    dies (kill the command's group)."""
    started = time.monotonic()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    starter = os.pidfd_open(request["pid"])
    child = os.fork()
    if child == 0:  # the command's process: from here on it is the command
        try:
            conn.close()
            _become(request, fds, added)
        except BaseException:  # noqa: BLE001 - it cannot become the command: say why, exit 70
            traceback.print_exc()
            os._exit(70)
        _run(request)
    for fd in fds:
        os.close(fd)
    child_fd = os.pidfd_open(child)
    try:
        send_message(conn, {"pid": child})
    except OSError:  # the starting process is gone already (killed right after it started)
        ready = [starter]
    else:
        ready = []

    while True:
        ready = ready or select.select([child_fd, starter, conn], [], [])[0]
        if conn in ready and child_fd not in ready:  # end of stream: the starting process is exiting
            ready.append(starter)
        if child_fd in ready:
            _, status, usage = os.wait4(child, 0)
            if log:  # what the command cost: its own CPU and its waited-for descendants'
                cost = {
                    "argv": request.get("orig_argv", [])[1:6],
                    "test": request["env"].get("PYTEST_CURRENT_TEST"),
                    "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
                    "wall_s": round(time.monotonic() - started, 3),
                }
                with open(log, "a") as out:
                    out.write(json.dumps(cost) + "\n")
            ending = (
                {"signal": os.WTERMSIG(status)}
                if os.WIFSIGNALED(status)
                else {"exit": os.waitstatus_to_exitcode(status)}
            )
            with contextlib.suppress(OSError):  # the starting process may be gone meanwhile
                send_message(conn, ending)
            return
        if starter in ready:  # the starting process is gone, so is the command
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child, signal.SIGKILL)
            os.waitpid(child, 0)
            return


UNSUPPORTED = 3  # the server's exit status on a system it cannot serve (commands then run cold)
EXIT_SUFFIX = ".exit"  # beside the socket: the status the server exited with (for non-children)


def serve(path: str) -> None:
    global IDENTITY
    try:  # a waiter watches the starting process and the command through pidfds (Linux >= 5.3)
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError) as exc:
        print(f"warm start: no pidfd_open here ({exc}): commands run cold", file=sys.stderr)
        raise SystemExit(UNSUPPORTED) from None
    IDENTITY = process_identity()
    read, added = preload()
    import gc

    gc.collect()
    gc.freeze()  # the preloaded objects: a command's collections do not touch (and copy) their pages
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # waiters are reaped by the kernel
    print("ready", flush=True)
    server = os.getpid()
    log = os.environ.get("TESTS_WARM_START_LOG")  # a line per command: its argv, why it ran cold, its CPU
    while True:
        conn, _ = listener.accept()
        fds: list[int] = []
        try:
            request, fds = receive_message(conn)
            reason = cold_reason(request, read) if request else "an empty request"
            if log:
                with open(log, "a") as out:
                    out.write(json.dumps({"argv": request.get("orig_argv", [])[1:5], "cold": reason}) + "\n")
            if reason:
                send_message(conn, {"cold": reason})
            elif os.fork() == 0:
                waiter = os.getpid()
                try:
                    listener.close()
                    _wait(conn, request, fds, added, log)
                except BaseException:  # noqa: BLE001
                    if os.getpid() != waiter:
                        raise  # the command's own ending (SystemExit, its exception): not the waiter's
                    traceback.print_exc()
                    os._exit(1)
                os._exit(0)
        except OSError:
            if os.getpid() != server:
                raise
        for fd in fds:
            os.close(fd)
        conn.close()


def _note_exit(path: str, status: int) -> None:
    """Leave the exit status beside the socket, for test processes that did not start this server."""
    with contextlib.suppress(OSError), open(path + EXIT_SUFFIX, "w") as out:
        out.write(str(status))


if __name__ == "__main__":
    SERVER_PID = os.getpid()
    exit_status = 1  # an uncaught exception's
    try:
        serve(sys.argv[1])
    except SystemExit as exc:
        exit_status = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        raise
    finally:
        if os.getpid() == SERVER_PID:  # not a command's own ending (its SystemExit passes here too)
            _note_exit(sys.argv[1], exit_status)
