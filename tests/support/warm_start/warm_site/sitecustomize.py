"""Hand this Python command to the test suite's warm-start server (tests/support/warm_start/zygote.py),
then exit as the command does. Only when ``TESTS_WARM_START`` names the server's socket (the test suite
sets it); otherwise, and whenever the server cannot take the command, Python goes on as usual. Taken:
``python [-u] [-Wopt...] -m MODULE``, ``python [-u] [-Wopt...] SCRIPT`` and multiprocessing's spawned children
(``python [-Wopt...] -c "from multiprocessing.spawn import spawn_main; ..." --multiprocessing-fork``), and
``python [-u] [-Wopt...] -c CODE`` when ``TESTS_WARM_START_CODE`` is 1 (a test that asked: server.warm_code).
"""

import contextlib
import io
import os
import sys

SPAWN = "from multiprocessing.spawn import spawn_main; spawn_main("  # the -c code of a spawned child
FORK = "--multiprocessing-fork"
CODE_ENV = "TESTS_WARM_START_CODE"  # "1": other -c code too


def _hand_over() -> None:
    path = os.environ.get("TESTS_WARM_START")
    argv = getattr(sys, "orig_argv", [])
    if not path or len(argv) < 2:
        return
    args = argv[1:]
    # -Wopt (multiprocessing passes them so) is in sys.warnoptions, -u in the stdio: both taken over
    while args and (args[0] == "-u" or (args[0].startswith("-W") and len(args[0]) > 2)):
        args = args[1:]
    code = None
    if args[:1] == ["-m"] and len(args) > 1:
        module = args[1]
    elif args[:1] == ["-c"] and args[1:2] and args[1].startswith(SPAWN) and args[2:] == [FORK]:
        module, code = "", args[1]  # a multiprocessing "spawn" child: Dagster's run workers
    elif args[:1] == ["-c"] and len(args) > 1 and os.environ.get(CODE_ENV) == "1":
        module, code = "", args[1]  # a test's -c code, its test having asked (never xdist's workers)
    elif args and not args[0].startswith("-") and os.path.isfile(args[0]) and "site-packages" not in args[0]:
        module = ""  # a script (not a library's helper, as Dagster's watch_orphans.py: tiny, run cold)
    else:  # other -c code, other options, the interactive prompt: cold
        return
    import signal
    import socket

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # zygote.py
    try:
        from zygote import FORWARDED, process_identity, receive_message, send_message
    finally:
        del sys.path[0]
    fds = sorted(int(n) for n in os.listdir("/proc/self/fd") if n.isdigit())
    fds = [fd for fd in fds if _is_open(fd)]
    streams = []
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        streams.append(
            None
            if stream is None
            else {
                "encoding": stream.encoding,
                "errors": stream.errors,
                "line_buffering": stream.line_buffering,
                "write_through": stream.write_through,
                "unbuffered": isinstance(getattr(stream, "buffer", None), io.FileIO),  # -u
            }
        )
    umask = os.umask(0)
    os.umask(umask)
    request = {
        "pid": os.getpid(),
        "argv": list(sys.argv),
        "orig_argv": list(argv),
        "module": module,
        "code": code,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "umask": umask,
        "fds": fds,
        "path": list(sys.path),
        "flags": list(sys.flags),
        "xoptions": dict(sys._xoptions),
        "identity": process_identity(),
        "executable": os.path.realpath(sys.executable),
        "executable_as_given": sys.executable,
        "dont_write_bytecode": sys.dont_write_bytecode,
        "warnoptions": list(sys.warnoptions),
        "stdio": streams,
        "ignored": [n for n in FORWARDED if signal.getsignal(getattr(signal, n)) == signal.SIG_IGN],
    }
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        send_message(sock, request, fds)
        reply, _ = receive_message(sock)
    except OSError:
        sock.close()
        return
    if "pid" not in reply:  # cold: run here
        sock.close()
        if os.environ.get("TESTS_WARM_START_DEBUG"):
            print(f"warm start: cold: {reply.get('cold')}", file=sys.stderr)
        return
    child = reply["pid"]

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    for name in FORWARDED:
        if name not in request["ignored"]:
            signal.signal(getattr(signal, name), forward)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in fds:  # the command holds them now: a reader sees end of file when the command closes its
        if fd != sock.fileno():
            os.dup2(null, fd)
    while True:
        try:
            ending, _ = receive_message(sock)
            break
        except InterruptedError:
            continue
    if "signal" in ending:
        signal.signal(ending["signal"], signal.SIG_DFL)
        os.kill(os.getpid(), ending["signal"])
        os._exit(128 + ending["signal"])
    os._exit(ending.get("exit", 1))


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


_hand_over()
