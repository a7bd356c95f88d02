"""Parquet files under the data directory, exposed as DuckDB views for plain SQL.

Each table is a folder of Parquet files, one per partition (or a single ``_all.parquet`` for an
unpartitioned table). A partition may name a sub-folder: ``random/tcga`` is the file
``<table>/random/tcga.parquet`` (one file per experiment and benchmark). Files are written atomically
(temp file + rename) with the user's umask, so a killed run never leaves a half-written partition.

The DuckDB file only holds views whose glob covers every partition file (glob characters of the data
folder's path escaped), so writing a partition needs no DuckDB lock at all once its table's view
exists: the store checks the views through a read-only connection, which coexists with other readers
(``duckdb -readonly`` shells, ``giant-sql``). Only a new table's view needs the file opened read-write;
when another process holds it open (a read-only session blocks writers), the store waits up to
``GIANT_VIEW_WAIT_S`` seconds (default 10) saying who holds it, then defers the view: the Parquet file
is written all the same, the table is listed in ``.pending_views/``, and its view is created by the
next write that gets the lock, or by ``giant-sql --refresh-views``.

Each process remembers which views it found current, with the DuckDB file's identity (device, inode,
size, modification time, and its write-ahead log's) at that moment: while the file is unchanged, a
write to a table whose view was found current opens no connection (each open costs ~20 ms of CPU).
Any change to the file (a view created, replaced or retired by any process, a rebuild, damage) changes
its identity, and the views are checked again.

The DuckDB file appears whole: it is created under a temporary name and linked in place, never
replacing one. DuckDB itself creates a file before locking it and writing its headers, so processes
creating it at the same moment used to read each other's empty file as damaged.

A damaged DuckDB file (truncated by a full disk, not a database) loses nothing, as it holds only
views: a write or ``giant-sql --refresh-views`` moves it aside to ``giant.duckdb.damaged``, says so,
and rebuilds every view; a read-only open raises ``DuckDBDamaged`` saying how to rebuild it. Only the
file found damaged is moved: one another process has rebuilt meanwhile stays.

A table whose rebuild failed is retired (:meth:`ParquetStore.retire`): its files move to
``.retired/<table>/`` (kept, never served) and its view is replaced by one whose every query fails
saying why and what to do, until the next successful write recreates it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from giant_assets.core.files import atomic_write_bytes
from giant_assets.core.settings import DUCKDB_NAME, VIEW_WAIT_ENV, env_seconds

if TYPE_CHECKING:  # imported where a DuckDB file is opened: loading the code location needs none of it
    import duckdb

UNPARTITIONED = "_all"
PENDING_VIEWS = ".pending_views"
RETIRED = ".retired"  # tables whose rebuild failed: their last files, kept out of every view
DEFAULT_VIEW_WAIT_S = 10.0
STALE_NEW_FILE_S = 3600.0  # a temporary DuckDB file this old was left by a killed process (it lives ~20 ms)
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
_GLOB_CHARS = re.compile(r"([\[\]*?{}])")
_HOLDER = re.compile(r"held in (.+?) \(PID (\d+)\)")
_LOG = logging.getLogger(__name__)


_DAMAGE = ("not a valid duckdb database", "could not read enough bytes", "corrupt", "checksum")


FileIdentity = tuple[int, int, int, int, tuple[int, int, int] | None]
# per DuckDB file: its identity when views were last checked, and the tables whose view was current then
_CURRENT_VIEWS: dict[Path, tuple[FileIdentity, frozenset[str]]] = {}
_CURRENT_VIEWS_LOCK = threading.Lock()


def file_identity(path: Path) -> FileIdentity | None:
    """What changes whenever the DuckDB file is written: device, inode, size and modification time of
    the file and of its write-ahead log; None when there is no file."""
    try:
        main = path.stat()
    except FileNotFoundError:
        return None
    try:
        wal = Path(f"{path}.wal").stat()
        log = (wal.st_ino, wal.st_size, wal.st_mtime_ns)
    except FileNotFoundError:
        log = None
    return main.st_dev, main.st_ino, main.st_size, main.st_mtime_ns, log


class DuckDBLocked(RuntimeError):
    """The DuckDB file stayed locked by another process for the whole wait."""


class DuckDBDamaged(RuntimeError):
    """The DuckDB file cannot be read as a database (truncated, overwritten)."""

    def __init__(self, message: str, identity: FileIdentity | None = None) -> None:
        super().__init__(message)
        self.identity = identity  # the damaged file's, when it was found


def is_damage(exc: Exception) -> bool:
    """True for DuckDB's errors on opening a file that is not (all of) a database."""
    import duckdb

    return isinstance(exc, duckdb.IOException) and any(m in str(exc).lower() for m in _DAMAGE)


def damaged(path: Path, exc: Exception) -> DuckDBDamaged:
    """The one-line error for a damaged DuckDB file: what it holds and how to rebuild it."""
    reason = str(exc).splitlines()[0].replace(f'"{path}" ', "").replace(f'"{path}"', "it")
    return DuckDBDamaged(
        f"{path} is damaged ({reason}); it holds only views over the Parquet files, so nothing is lost: "
        "rebuild it with `giant-sql --refresh-views` (any materialization also rebuilds it)",
        file_identity(path),
    )


def _is_safe(value: str) -> bool:
    return bool(_SAFE_NAME.match(value)) and value not in {".", ".."}


def _check_name(kind: str, value: str) -> str:
    if not _is_safe(value):
        raise ValueError(f"unsafe {kind} name {value!r}: use letters, digits, '_', '-', '.'")
    return value


def glob_literal(path: Path | str) -> str:
    """``path`` with DuckDB glob characters bracketed (``data[1]`` -> ``data[[]1[]]``), so it matches itself.

    DuckDB reads a backslash as a path separator and cuts a database path at '?', so a path holding either
    cannot be used: refused.
    """
    text = str(path)
    if "\\" in text:
        raise ValueError(f"{text}: DuckDB cannot read Parquet files under a path with a backslash")
    if "?" in text:
        raise ValueError(f"{text}: DuckDB cannot open a database under a path with '?': rename the folder")
    return _GLOB_CHARS.sub(r"[\1]", text)


def _lock_holder(exc: Exception) -> str:
    found = _HOLDER.search(str(exc))
    return f"{found.group(1)} (pid {found.group(2)})" if found else "another process"


def _is_lock_error(exc: Exception) -> bool:
    import duckdb

    return isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower()


class ParquetStore:
    """Tables as Parquet partition files under ``root`` plus DuckDB views in ``root/giant.duckdb``."""

    def __init__(
        self,
        root: Path | str,
        lock_timeout_s: float = 60.0,
        view_wait_s: float | None = None,
        log: Callable[[str], None] = _LOG.warning,
    ) -> None:
        self.root = Path(root).resolve()
        glob_literal(self.root)  # refuse an unglobbable data folder before writing anything
        self.lock_timeout_s = lock_timeout_s
        self.view_wait_s = (
            env_seconds(VIEW_WAIT_ENV, DEFAULT_VIEW_WAIT_S) if view_wait_s is None else view_wait_s
        )
        self.log = log

    @property
    def duckdb_path(self) -> Path:
        return self.root / DUCKDB_NAME

    def table_dir(self, table: str) -> Path:
        return self.root / _check_name("table", table)

    def partition_path(self, table: str, partition: str | None = None) -> Path:
        *folders, name = (partition or UNPARTITIONED).split("/")
        folder = self.table_dir(table).joinpath(*(_check_name("partition", f) for f in folders))
        return folder / f"{_check_name('partition', name)}.parquet"

    def write(self, table: str, df: pd.DataFrame, partition: str | None = None) -> Path:
        """Atomically replace one partition (or the whole unpartitioned table) and ensure its view."""
        path = self.partition_path(table, partition)
        arrow = pa.Table.from_pandas(df, preserve_index=False)
        sink = pa.BufferOutputStream()
        pq.write_table(arrow, sink, compression="zstd")
        atomic_write_bytes(path, sink.getvalue().to_pybytes())
        self.ensure_view(table)
        return path

    def partitions(self, table: str) -> list[str]:
        """Partition keys present, sub-folders joined with '/' (``random/tcga``)."""
        folder = self.table_dir(table)
        if not folder.exists():
            return []
        return sorted(p.relative_to(folder).with_suffix("").as_posix() for p in folder.rglob("*.parquet"))

    def tables(self) -> list[str]:
        """Every table folder under the root holding at least one Parquet file."""
        return sorted(
            d.name
            for d in self.root.iterdir()
            if d.is_dir()
            and _SAFE_NAME.match(d.name)
            and not d.name.startswith(".")
            and self.partitions(d.name)
        )

    def exists(self, table: str, partition: str | None = None) -> bool:
        return self.partition_path(table, partition).exists()

    def read(self, table: str, partitions: Iterable[str] | None = None) -> pd.DataFrame:
        """Read some partitions (default: all) of a table into one DataFrame."""
        keys = list(partitions) if partitions is not None else self.partitions(table)
        paths = [self.partition_path(table, k) for k in keys]
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            raise FileNotFoundError(f"table {table!r} has no data for partition file(s): {missing}")
        if not paths:
            raise FileNotFoundError(f"table {table!r} has no partitions under {self.table_dir(table)}")
        tables = [pq.read_table(p) for p in paths]
        if all(t.schema.equals(tables[0].schema) for t in tables[1:]):  # one conversion for them all
            return (pa.concat_tables(tables) if len(tables) > 1 else tables[0]).to_pandas()
        # partitions written with other columns or types: pandas' concat (missing values as pandas has them)
        return pd.concat([t.to_pandas() for t in tables], ignore_index=True)

    def connect(self, read_only: bool = False, timeout_s: float | None = None) -> duckdb.DuckDBPyConnection:
        """Open the DuckDB file, retrying while another process holds its lock; DuckDBLocked after that."""
        import duckdb

        self.root.mkdir(parents=True, exist_ok=True)
        if not read_only and not self.duckdb_path.exists():
            self._create_file()
        wait = self.lock_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + wait
        delay, told = 0.05, False
        while True:
            try:
                return duckdb.connect(str(self.duckdb_path), read_only=read_only)
            except duckdb.IOException as exc:
                if is_damage(exc):
                    raise damaged(self.duckdb_path, exc) from None
                if not _is_lock_error(exc):
                    raise
                holder = _lock_holder(exc)
                if time.monotonic() > deadline:
                    raise DuckDBLocked(
                        f"{self.duckdb_path} stayed locked by {holder} for {wait:.0f}s "
                        f"({'read-only' if read_only else 'read-write'} open)"
                    ) from exc
                if not told and not read_only and wait >= 1:
                    self.log(
                        f"{self.duckdb_path} is open in {holder}; waiting up to {wait:.0f}s to create a view "
                        "(a DuckDB session, even read-only, blocks creating views; close it to go on)"
                    )
                    told = True
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _create_file(self) -> None:
        """Create an empty DuckDB file whole: built under a temporary name, linked in place unless one is."""
        import duckdb

        for stale in self.root.glob(f".{DUCKDB_NAME}.*.new"):  # left by a process killed here
            with contextlib.suppress(OSError):
                if time.time() - stale.stat().st_mtime > STALE_NEW_FILE_S:
                    stale.unlink()
        new = self.root / f".{DUCKDB_NAME}.{os.getpid()}-{threading.get_ident()}.new"
        new.unlink(missing_ok=True)
        try:
            duckdb.connect(str(new)).close()
            os.link(new, self.duckdb_path)
        except FileExistsError:
            pass  # another process created it first: it is whole too
        except (OSError, duckdb.Error):  # no hard links, or no temporary file: DuckDB creates it in place
            pass  # (and if that fails too, its error names the real path)
        finally:
            new.unlink(missing_ok=True)
            Path(f"{new}.wal").unlink(missing_ok=True)

    def _glob(self, table: str) -> str:
        """The SQL string literal body of the glob over every Parquet file of ``table``."""
        return (glob_literal(self.table_dir(table)) + "/**/*.parquet").replace("'", "''")

    def view_sql(self, table: str) -> str:
        """The view over every Parquet file of ``table`` (glob characters of the path escaped)."""
        return (
            f'CREATE OR REPLACE VIEW "{table}" AS '
            f"SELECT * FROM read_parquet('{self._glob(table)}', union_by_name = true)"
        )

    def _stale_views(self, tables: Iterable[str]) -> list[str] | None:
        """Tables whose view is missing or outdated, checked read-only; None when the file stayed locked."""
        tables = sorted(set(tables))
        before = file_identity(self.duckdb_path)
        if before is None:
            return tables
        with _CURRENT_VIEWS_LOCK:
            seen, found = _CURRENT_VIEWS.get(self.duckdb_path, (None, frozenset()))
        if seen == before:  # the file is as it was when its current views were listed: no need to look
            return [t for t in tables if t not in found]
        try:
            with self.connect(read_only=True, timeout_s=self.view_wait_s) as con:
                fresh = self._current_views(con)
        except DuckDBLocked:
            return None
        if file_identity(self.duckdb_path) == before:  # nobody wrote it while it was read
            self._remember(before, fresh)
        return [t for t in tables if t not in fresh]

    def _current_views(self, con: duckdb.DuckDBPyConnection) -> set[str]:
        """The tables whose view in the open file reads their Parquet files."""
        views = con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal").fetchall()
        return {name for name, sql in views if _is_safe(name) and self._glob(name) in sql}

    def _remember(self, identity: FileIdentity, fresh: set[str]) -> None:
        with _CURRENT_VIEWS_LOCK:
            _CURRENT_VIEWS[self.duckdb_path] = (identity, frozenset(fresh))

    def pending_views(self) -> set[str]:
        """Tables whose view creation was deferred because the DuckDB file was locked."""
        folder = self.root / PENDING_VIEWS
        return {p.name for p in folder.iterdir() if _SAFE_NAME.match(p.name)} if folder.is_dir() else set()

    def ensure_view(self, table: str) -> bool:
        """Make sure ``table`` (and any deferred view) has its view; False when deferred (see module doc)."""
        wanted = {_check_name("table", table)} | self.pending_views()
        try:
            stale = self._stale_views(wanted)
        except DuckDBDamaged as exc:
            self.rebuild(exc)
            return True
        try:
            if stale is None:
                raise DuckDBLocked(f"{self.duckdb_path} stayed locked for {self.view_wait_s:.0f}s")
            if stale:
                self._create_views(stale, timeout_s=self.view_wait_s)
        except DuckDBLocked as exc:
            todo = sorted(wanted if stale is None else stale)
            (self.root / PENDING_VIEWS).mkdir(exist_ok=True)
            for name in todo:
                (self.root / PENDING_VIEWS / name).touch()
            self.log(
                f"view(s) {todo} deferred: {exc}. The Parquet data is written; the view is created by the "
                "next write once the file is free, or now with `giant-sql --refresh-views`"
            )
            return False
        self._clear_pending(wanted)
        return True

    def refresh_views(self, timeout_s: float | None = None) -> list[str]:
        """(Re)create the view of every table present, waiting for the lock; the tables' names."""
        tables = self.tables()
        try:
            self._create_views(tables, timeout_s=self.lock_timeout_s if timeout_s is None else timeout_s)
        except DuckDBDamaged as exc:
            self.rebuild(exc)
        self._clear_pending(self.pending_views())
        return tables

    def rebuild(self, why: DuckDBDamaged) -> None:
        """Move a damaged DuckDB file aside (``giant.duckdb.damaged``) and create every view anew."""
        aside = self.duckdb_path.with_name(self.duckdb_path.name + ".damaged")
        found = file_identity(self.duckdb_path)
        if found is not None and (why.identity is None or found[:2] == why.identity[:2]):
            with contextlib.suppress(FileNotFoundError):  # another writer moved it aside first
                self.duckdb_path.replace(aside)
            Path(f"{self.duckdb_path}.wal").unlink(missing_ok=True)
            self.log(f"{why}. Rebuilding it now; the damaged file is kept as {aside}")
        self._create_views(self.tables(), timeout_s=self.lock_timeout_s)
        self._clear_pending(self.pending_views())

    def _create_views(self, tables: list[str], timeout_s: float) -> None:
        """Create the views, then remember the file's current views as of this write (listed, and the
        file's identity taken, after a checkpoint while this connection holds the write lock; closing after
        a checkpoint writes nothing), so this process's next write need not look while the file stays as
        it is. Any later write by another process changes the identity: that write is looked at then."""
        import duckdb

        with self.connect(timeout_s=timeout_s) as con:
            for name in tables:
                if self.partitions(name):
                    con.execute(self.view_sql(name))
            try:  # refused while another thread of this process has a transaction open on the file
                con.execute("CHECKPOINT")
            except duckdb.Error:
                written = None
            else:
                fresh, written = self._current_views(con), file_identity(self.duckdb_path)
        if written is not None:
            self._remember(written, fresh)
        self._clear_pending(set(tables))

    def _clear_pending(self, tables: set[str]) -> None:
        for name in tables:
            (self.root / PENDING_VIEWS / name).unlink(missing_ok=True)

    def retire(self, table: str, reason: str) -> Path | None:
        """Take ``table`` out of service after a failed rebuild; the folder its files moved to (None: none).

        The files move to ``<root>/.retired/<table>/`` (replacing an earlier retired copy) and the view
        becomes one that fails every query (``count(*)`` too) naming ``reason``; when the DuckDB file
        stays locked, the view is left over an empty glob, which fails too ("No files found").
        """
        source, kept = self.table_dir(table), self.root / RETIRED / _check_name("table", table)
        moved = None
        if source.is_dir() and self.partitions(table):
            if kept.exists():
                shutil.rmtree(kept)
            kept.parent.mkdir(parents=True, exist_ok=True)
            source.rename(kept)
            moved = kept
        where = f"; its previous data is kept in {moved}" if moved else ""
        message = (
            f"{table} is not current: {reason.splitlines()[0] if reason else 'its rebuild failed'}. "
            f"Materialize {table} again{where}"
        )
        literal = message.replace("'", "''")
        for attempt in (1, 2):
            try:
                with self.connect(timeout_s=self.view_wait_s) as con:
                    con.execute(  # in a filter, so even count(*) evaluates it
                        f"CREATE OR REPLACE VIEW \"{table}\" AS SELECT '{table}' AS not_current "
                        f"FROM range(1) WHERE error('{literal}') IS NULL"
                    )
                break
            except DuckDBDamaged as exc:  # only views inside: rebuild them, then retire this one
                if attempt == 2:
                    raise
                self.rebuild(exc)
            except DuckDBLocked as exc:
                self.log(f"{table}: view not replaced ({exc}); with its files moved it serves nothing")
                break
        self._clear_pending({table})
        return moved

    def query(self, sql: str, params: list | None = None) -> pd.DataFrame:
        """Run SQL against the DuckDB file (read-only) and return a DataFrame."""
        import duckdb

        with self.connect(read_only=True) as con:
            try:
                return con.execute(sql, params or []).df()
            except duckdb.CatalogException as exc:
                pending = self.pending_views()
                if pending:
                    raise duckdb.CatalogException(
                        f"{exc}\n(views deferred while the DuckDB file was locked: {sorted(pending)}; "
                        "run `giant-sql --refresh-views`)"
                    ) from exc
                raise
