"""The suite's warm start (tests/support/warm_start) runs a command as a fresh interpreter would: the same
argv, path, environment, directory, descriptors, stdio, warnings filters, signal dispositions, exit
status and endings by exception, Ctrl-C or SIGKILL. Each check runs a probe script cold
(TESTS_WARM_START=0) and warm and compares what it saw; a warm run is one whose process is not the
started one."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.warm_start.server import (
    WARM_START_ENV,
    ServerExited,
    WarmStart,
    kill_groups_below,
    warm_code,
)
from tests.support.warm_start.zygote import UNSUPPORTED, parent_pid

PROBE = r"""
import json, os, random, resource, signal, sys, time, warnings
import numpy  # as every command of the platform does: numpy's own warnings filters (zygote.py)
extra = os.fdopen(int(os.environ["PROBE_FD"])).read() if os.environ.get("PROBE_FD") else None
seen = {
    "pid": os.getpid(),
    "random": (random.random(), numpy.random.random()),
    "name": __name__,
    "argv": sys.argv,
    "orig_argv": sys.orig_argv,
    "path": sys.path,
    "cwd": os.getcwd(),
    "env": {k: v for k, v in os.environ.items() if k.startswith("PROBE_")},
    "umask": os.umask(0o022),
    "executable": sys.executable,
    "flags": list(sys.flags),
    "stdin": sys.stdin.read(),
    "stdio": [(s.name, s.encoding, s.errors, s.line_buffering, s.write_through, type(s.buffer).__name__)
              for s in (sys.stdin, sys.stdout, sys.stderr)],
    "filters": [(f[0], str(f[1]), f[2].__name__, str(f[3]), f[4]) for f in warnings.filters],
    "signals": [str(signal.getsignal(s))
                for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE)],
    "extra": extra,
    "modules": "giant_assets" in sys.modules,
    "hash": hash("a string's hash follows the seed"),
    "nofile": resource.getrlimit(resource.RLIMIT_NOFILE),
}
print(json.dumps(seen), flush=True)
os.system("echo from a child process")  # inherits descriptor 1, as the CLIs' own children do
what = os.environ.get("PROBE_END", "")
if what == "raise":
    raise ValueError("the probe's own error")
if what == "sleep":
    open(os.environ["PROBE_PIDFILE"], "w").write(str(os.getpid()))
    time.sleep(60)
if what == "orphan":
    parent = os.getppid()
    open(os.environ["PROBE_PIDFILE"], "w").write(str(os.getpid()))
    deadline = time.monotonic() + 30
    while os.getppid() == parent and time.monotonic() < deadline:
        time.sleep(0.05)
    open(os.environ["PROBE_PIDFILE"] + ".orphaned", "w").write(str(os.getppid() != parent))
sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
"""


@pytest.fixture
def probe(tmp_path: Path, warm_start) -> Path:  # noqa: ANN001 - the server, listening
    path = tmp_path / "probe.py"
    path.write_text(PROBE)
    return path


def _run(
    probe: Path, warm: bool, env: dict[str, str] | None = None, options: tuple[str, ...] = (), **kwargs
) -> tuple[dict, subprocess.CompletedProcess]:
    base = dict(os.environ) | (env or {})
    if not warm:
        base[WARM_START_ENV] = "0"
    given = kwargs.pop("input", None)
    started = subprocess.Popen(
        [sys.executable, *options, str(probe), "one", "two words"], env=base, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs,
    )  # fmt: skip
    out, err = started.communicate(given, timeout=60)
    proc = subprocess.CompletedProcess(started.args, started.returncode, out, err)
    seen = json.loads(out.splitlines()[0]) if out else {}
    if seen:  # a warm command runs in a fork of the server, not in the process started
        assert (seen["pid"] != started.pid) is warm, f"expected a {'warm' if warm else 'cold'} run"
    return seen, proc


def _both(
    probe: Path, **kwargs
) -> tuple[dict, dict, subprocess.CompletedProcess, subprocess.CompletedProcess]:
    cold, cold_proc = _run(probe, False, **kwargs)
    warm, warm_proc = _run(probe, True, **kwargs)
    return cold, warm, cold_proc, warm_proc


def test_a_warm_command_sees_what_a_cold_one_sees(probe: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    seen = []
    for warm in (False, True):
        read_end, write_end = os.pipe()  # a descriptor passed on (pass_fds), as the CLI tests' pipes
        os.write(write_end, b"through a passed descriptor")
        os.close(write_end)
        try:
            env = {"PROBE_A": "x", "PROBE_FD": str(read_end), "PROBE_EXIT": "3",
                   "PYTHONWARNINGS": "ignore::DeprecationWarning,error:boom:UserWarning"}  # fmt: skip
            kwargs = dict(cwd=tmp_path / "elsewhere", input="on stdin\n", pass_fds=(read_end,))
            got, proc = _run(probe, warm, env=env, **kwargs)
            assert proc.stdout.splitlines()[1:] == ["from a child process"], proc.stdout
        finally:
            os.close(read_end)
        assert proc.returncode == 3, proc.stderr
        seen.append(got)
    cold, warm = seen
    assert warm.pop("pid") != cold.pop("pid")
    assert warm.pop("random") != cold.pop("random")
    assert (cold.pop("modules"), warm.pop("modules")) == (False, True)  # the package's modules preloaded
    del warm["hash"], cold["hash"]  # each interpreter its own seed
    assert warm == cold
    assert cold["stdin"] == "on stdin\n" and cold["env"]["PROBE_A"] == "x"
    assert cold["extra"] == "through a passed descriptor"
    filters = [tuple(f) for f in cold["filters"]]
    assert filters.index(("ignore", "None", "DeprecationWarning", "None", 0)) < len(filters) - 4


def test_it_ran_warm_with_its_own_random_seed(probe: Path) -> None:
    """A warm run's process is not the one started (that one waits for it); two warm runs draw other
    random numbers (forks of one interpreter would draw the same)."""
    runs = []
    for warm in (False, True, True):
        proc = subprocess.Popen(
            [sys.executable, str(probe)], env=dict(os.environ) | ({} if warm else {WARM_START_ENV: "0"}),
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        seen = json.loads(proc.communicate(timeout=60)[0].splitlines()[0])
        runs.append((proc.pid == seen["pid"], seen["random"]))
        assert seen["modules"] is warm
    (cold_here, _), (warm_here, first), (_, second) = runs
    assert cold_here and not warm_here
    assert first[0] != second[0] and first[1] != second[1]


def test_a_command_whose_path_finds_another_copy_of_the_package_runs_cold_on_that_copy(
    probe: Path, tmp_path: Path
) -> None:
    """The package's preloaded modules are the server's copy: a command run where another copy comes
    first on its path (another checkout, a sandbox) runs cold, importing its own."""
    other = tmp_path / "checkout" / "giant_assets"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("")
    (other / "where.py").write_text("import json, os, sys\nprint(json.dumps([__file__, os.getpid()]))\n")
    runs = {}
    for cwd in (tmp_path / "checkout", tmp_path):
        started = subprocess.Popen(
            [sys.executable, "-m", "giant_assets.where"], cwd=cwd, env=dict(os.environ), text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        out, err = started.communicate(timeout=60)
        runs[cwd.name] = (started.returncode, out, err, started.pid)
    code, out, err, pid = runs["checkout"]
    assert code == 0, err
    assert json.loads(out) == [str(other / "where.py"), pid]  # its own copy, in the process started: cold
    code, out, err, pid = runs[tmp_path.name]  # elsewhere the path finds the installed package: no where.py
    assert code == 1 and "No module named giant_assets.where" in err
    seen, _ = _run(probe, True)  # and the installed package's commands run warm, with it preloaded
    assert seen["modules"] is True


def test_c_code_runs_warm_only_when_its_test_asks_and_sees_what_it_sees_cold(warm_start) -> None:  # noqa: ANN001
    """``python -c CODE``: cold unless the test asked (server.warm_code), and then as ``-c`` makes it
    (argv[0] "-c", "" first on the path, no file)."""
    seen = []
    for env in (dict(os.environ), warm_code()):
        started = subprocess.Popen(
            [sys.executable, "-c", PROBE, "one", "two words"], env=env, text=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        out, err = started.communicate(timeout=60)
        assert started.returncode == 0, err
        got = json.loads(out.splitlines()[0])
        seen.append((got.pop("pid") == started.pid, got))
    (cold_here, cold), (warm_here, warm) = seen
    assert cold_here and not warm_here
    for got in (cold, warm):
        del got["random"], got["hash"]
    assert (cold.pop("modules"), warm.pop("modules")) == (False, True)
    assert warm == cold
    assert cold["argv"] == ["-c", "one", "two words"] and cold["path"][0] == "" and cold["name"] == "__main__"


def test_an_unbuffered_command_writes_unbuffered(probe: Path) -> None:
    """``python -u``: warm too, its stdout and stderr written straight to their descriptors as a fresh
    interpreter's are."""
    cold, warm, _, _ = _both(probe, options=("-u",))
    assert warm["orig_argv"][1] == "-u"
    assert (
        [s[-1] for s in warm["stdio"]]
        == [s[-1] for s in cold["stdio"]]
        == ["BufferedReader", "FileIO", "FileIO"]
    )


def test_an_uncaught_exception_ends_it_as_it_ends_a_fresh_interpreter(probe: Path) -> None:
    cold, warm, cold_proc, warm_proc = _both(probe, env={"PROBE_END": "raise"})
    assert cold_proc.returncode == warm_proc.returncode == 1
    for proc in (cold_proc, warm_proc):
        assert proc.stderr.rstrip().endswith("ValueError: the probe's own error")


def test_an_ignored_sigint_stays_ignored(probe: Path) -> None:
    ignore = lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)  # noqa: E731
    cold, warm, _, _ = _both(probe, preexec_fn=ignore)
    assert cold["signals"] == warm["signals"]
    assert cold["signals"][0] == str(signal.SIG_IGN)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_started_process_ends_the_command_the_same_way(
    probe: Path, tmp_path: Path, signum: int
) -> None:
    endings = []
    for warm in (False, True):
        pidfile = tmp_path / f"pid-{warm}"
        env = dict(os.environ) | {"PROBE_END": "sleep", "PROBE_PIDFILE": str(pidfile)}
        if not warm:
            env[WARM_START_ENV] = "0"
        proc = subprocess.Popen([sys.executable, str(probe)], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 30
        while not pidfile.exists() or not pidfile.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert (int(pidfile.read_text()) != proc.pid) is warm
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=30)
        endings.append((proc.returncode, err.strip().splitlines()[-1] if err.strip() else ""))
    assert endings[0] == endings[1]
    assert endings[0][0] == -signum


def test_a_sigkilled_started_process_takes_the_command_with_it(probe: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    env = dict(os.environ) | {"PROBE_END": "sleep", "PROBE_PIDFILE": str(pidfile)}
    proc = subprocess.Popen([sys.executable, str(probe)], env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    command = int(pidfile.read_text())
    assert command != proc.pid
    proc.kill()
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while _alive(command):
        assert time.monotonic() < deadline, "the command outlived its killed starting process"
        time.sleep(0.05)


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_a_command_whose_parent_dies_sees_itself_orphaned(probe: Path, tmp_path: Path, warm: bool) -> None:
    """runs/guard.py stops a batch whose parent died by watching os.getppid(): a warm command's parent
    is the server's waiter, which leaves when the starting process is orphaned."""
    pidfile = tmp_path / "pid"
    env = dict(os.environ) | {"PROBE_END": "orphan", "PROBE_PIDFILE": str(pidfile)}
    if not warm:
        env[WARM_START_ENV] = "0"
    shell = subprocess.Popen(
        ["bash", "-c", f'"{sys.executable}" "{probe}" > /dev/null & wait'], env=env, start_new_session=True
    )
    deadline = time.monotonic() + 30
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    shell.kill()  # the probe's starting process is orphaned
    shell.wait()
    said = Path(f"{pidfile}.orphaned")
    deadline = time.monotonic() + 15
    while not said.exists() or not said.read_text():
        assert time.monotonic() < deadline, "the command never saw its parent die"
        time.sleep(0.05)
    assert said.read_text() == "True"


def test_a_command_with_other_limits_runs_cold_with_them(probe: Path) -> None:
    """Limits, ids, capabilities (``setpriv``), niceness: a fork would have the server's."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lower = (soft - 1, hard)
    proc = subprocess.Popen(
        [sys.executable, str(probe)], env=dict(os.environ), stdout=subprocess.PIPE, text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, lower),
    )  # fmt: skip
    seen = json.loads(proc.communicate(timeout=60)[0].splitlines()[0])
    assert seen["pid"] == proc.pid and tuple(seen["nofile"]) == lower


def test_a_command_with_its_own_hash_seed_runs_cold_with_it(probe: Path) -> None:
    """PYTHONHASHSEED shapes the interpreter at start-up, so such a command cannot be forked."""
    hashes = []
    for warm in (False, True):
        env = dict(os.environ) | {"PYTHONHASHSEED": "7"} | ({} if warm else {WARM_START_ENV: "0"})
        proc = subprocess.Popen([sys.executable, str(probe)], env=env, stdout=subprocess.PIPE, text=True)
        seen = json.loads(proc.communicate(timeout=60)[0].splitlines()[0])
        assert seen["pid"] == proc.pid  # ran in the started process
        hashes.append(seen["hash"])
    assert hashes[0] == hashes[1]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_stopping_the_server_kills_the_commands_below_it_in_their_own_groups() -> None:
    """What ``WarmStart.stop`` does before killing the server's group: every process below it and the
    group of each: a command in a session of its own (as warm commands are), and a process of that
    group no longer below it (its parent exited); never this process's own group, nor a process
    beside it."""
    beside = subprocess.Popen(["sleep", "300"])
    script = "sleep 300 & echo $!; setsid bash -c '(sleep 300 & echo $!); sleep 300 & echo $!; wait' & wait"
    root = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        ours, orphan, below = (int(root.stdout.readline()) for _ in range(3))
        assert os.getpgid(ours) == os.getpgrp()  # in this process's group: killed alone, not its group
        assert os.getpgid(orphan) == os.getpgid(below) != os.getpgrp()
        assert _alive(orphan) and _alive(below) and parent_pid(orphan) != parent_pid(below)
        kill_groups_below(root.pid)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in (ours, orphan, below)) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in (ours, orphan, below):
            assert not _alive(pid), Path(f"/proc/{pid}/stat").read_text()
        assert root.wait(timeout=10) == 0  # its children ended: its wait returned
        assert beside.poll() is None
    finally:
        for proc in (beside, root):
            proc.kill()
            proc.wait()


def test_without_pidfd_open_the_server_exits_at_once_and_commands_run_cold(tmp_path: Path) -> None:
    """Linux before 5.3: the server says why and exits UNSUPPORTED (the suite's fixture then skips)."""
    zygote = Path(__file__).parent / "support" / "warm_start" / "zygote.py"
    code = (
        "import os, runpy, sys; del os.pidfd_open; "
        f"sys.argv = [{str(zygote)!r}, {str(tmp_path / 'socket')!r}]; "
        f"runpy.run_path({str(zygote)!r}, run_name='__main__')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == UNSUPPORTED, proc.stderr
    assert "no pidfd_open here" in proc.stderr and not (tmp_path / "socket").exists()
    with pytest.raises(ServerExited) as exited:  # as an xdist worker sees its controller's server
        WarmStart.attached(str(tmp_path / "socket")).wait_listening(timeout_s=5)
    assert exited.value.returncode == UNSUPPORTED


SPAWN_PROBE = r"""
import json, multiprocessing as mp, os, random, sys, warnings


def child(queue):
    import numpy
    queue.put({
        "pid": os.getpid(), "ppid": os.getppid(), "parent": mp.parent_process().pid,
        "name": mp.current_process().name, "authkey": bytes(mp.current_process().authkey).hex(),
        "main": [sys.modules["__main__"].__name__, getattr(sys.modules["__main__"], "__file__", None)],
        "argv": sys.argv, "orig_argv": sys.orig_argv, "path": sys.path, "cwd": os.getcwd(),
        "warnoptions": sys.warnoptions, "flags": list(sys.flags),
        "filters": [(f[0], str(f[1]), f[2].__name__, str(f[3]), f[4]) for f in warnings.filters],
        "random": (random.random(), numpy.random.random()), "env": os.environ.get("PROBE_A"),
    })
    sys.exit(int(os.environ.get("PROBE_CHILD_EXIT", "0")))


if __name__ == "__main__":
    ctx = mp.get_context("spawn")  # as Dagster's code server starts each run's worker
    queue = ctx.Queue()
    started = ctx.Process(target=child, args=(queue,), name="probe-child")
    started.start()
    seen = queue.get(timeout=60)
    started.join(60)
    seen.update(started=started.pid, exitcode=started.exitcode, me=os.getpid(),
                my_authkey=bytes(mp.current_process().authkey).hex())
    print(json.dumps(seen), flush=True)
"""


def test_a_spawned_multiprocessing_child_runs_warm_as_it_runs_cold(warm_start, tmp_path: Path) -> None:
    """Dagster's code server starts each run's worker with multiprocessing's "spawn" (``-Wopt... -c
    "from multiprocessing.spawn import spawn_main; ..." --multiprocessing-fork``): it is taken warm, gets
    its pipe, its parent's authkey, __mp_main__, -W options, path and exit status as a cold one does."""
    script = tmp_path / "spawner.py"
    script.write_text(SPAWN_PROBE)
    seen = {}
    for warm in (False, True):
        env = dict(os.environ) | {
            "PROBE_A": "x",
            "PROBE_CHILD_EXIT": "5",
            "PYTHONWARNINGS": "error:boom:UserWarning",
        }
        if not warm:
            env[WARM_START_ENV] = "0"
        proc = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=120)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        got = json.loads(proc.stdout.splitlines()[0])
        assert (got.pop("pid") != got.pop("started")) is warm, (
            f"expected a {'warm' if warm else 'cold'} child"
        )
        assert got.pop("ppid") == got.pop("parent") == got.pop("me")
        assert got.pop("authkey") == got.pop("my_authkey")
        seen[warm] = got
    assert seen[True].pop("random") != seen[False].pop("random")
    assert seen[True] == seen[False]
    cold = seen[False]
    assert cold["exitcode"] == 5 and cold["env"] == "x" and cold["name"] == "probe-child"
    assert cold["main"] == ["__mp_main__", str(script)] and cold["argv"] == [str(script)]  # the parent's
    assert (
        cold["orig_argv"][-1] == "--multiprocessing-fork" and "-Werror:boom:UserWarning" in cold["orig_argv"]
    )


def test_the_server_notes_variables_read_by_name_not_scans_of_the_environment(monkeypatch) -> None:  # noqa: ANN001
    """A command runs cold when a variable the preloaded libraries read by name differs. tqdm's import
    scans ``os.environ.items()`` for TQDM_* settings: counting that scan as reads made every Dagster
    command with its own DAGSTER_HOME cold, depending on the order of the environment."""
    from tests.support.warm_start import zygote

    monkeypatch.setattr(zygote._RecordingEnviron, "read", set())
    for name in ("NAMED_A", "NAMED_B", "NAMED_C", "NAMED_D", "WARMING_UP"):
        monkeypatch.setenv(f"PROBE_{name}", name)
    environ = os.environ
    environ.__class__ = zygote._RecordingEnviron
    try:
        for _ in range(3):  # enough for the interpreter to specialise the loops' bytecode
            dict(os.environ)
            {key: value for key, value in os.environ.items() if key.startswith("TQDM_")}  # noqa: B018
            list(os.environ.values())
        for _ in range(20):  # specialised by now: the interpreter calls __getitem__ inline
            _subscript(os.environ, "PROBE_WARMING_UP")
        _subscript(os.environ, "PROBE_NAMED_A")
        os.environ.get("PROBE_NAMED_B")
        "PROBE_NAMED_C" in os.environ  # noqa: B015
        os.getenv("PROBE_NAMED_D")
    finally:
        environ.__class__ = os._Environ
    assert zygote._RecordingEnviron.read == {f"PROBE_NAMED_{name}" for name in "ABCD"} | {"PROBE_WARMING_UP"}


def _subscript(mapping, key: str) -> str:  # noqa: ANN001
    return mapping[key]
