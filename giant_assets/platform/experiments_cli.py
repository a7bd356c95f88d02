"""`giant-experiments`: validate the declared experiments and benchmarks, list them, add them as Dagster
partitions.

giant-experiments check [NAME ...] # validate the file and declared benchmarks; how paid ones sign in
giant-experiments list             # a header, then one line per experiment: agent, provider, model, endpoint
giant-experiments sync             # add every experiment and benchmark as a partition ($DAGSTER_HOME)
giant-experiments estimate NAME    # cost and time of what NAME has left to run, per benchmark
giant-experiments estimate NAME --csv PATH   # ... of every question of a MultiPathQA CSV, no slide needed
giant-experiments status [NAME]    # one line per experiment; with NAME, its cells (retry for the failed)
giant-experiments batches [NAME] [--cancel]   # provider batches still open (batch mode); cancel them
giant-experiments stop NAME [--benchmark B]  # cancel NAME's backfills, queued and running runs
giant-experiments prune            # delete partitions of experiments/benchmarks no longer declared

"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from giant_assets.core.helptext import plain
from giant_assets.experiments.declared import ExperimentsFile, ExperimentsFileError, unbudgeted
from giant_assets.experiments.plugins import (
    PluginError,
    declared_calls,
    is_plugin,
    load_factory,
    unimportable,
)

if TYPE_CHECKING:
    from dagster import DagsterInstance

    from giant_assets.experiments.spec import Experiment

COMMANDS = {
    "check": "validate the experiments file: every field of every experiment and declared benchmark, and "
    "each declared benchmark's items file (columns, answers, duplicate ids) and slides under its WSI root "
    "(exit 1 naming the file, experiment or benchmark, and the field, row or column of each problem); say "
    "how each paid experiment signs in (key from which variable, Entra ID, AWS credential chain, Google "
    "ADC) and refuse what cannot work (a placeholder or full request URI as azure_endpoint, an unset key "
    "variable); with NAMEs, the sign-in, budget, price and prompt files of those experiments only",
    "list": "one line per declared experiment under a header: name, agent, provider, model (Azure: its "
    "deployment), endpoint (the API root its calls go to; - offline), runs per item, config hash (a "
    "plug-in whose module cannot be found has none: '- (plug-in cannot be imported: module X)')",
    "sync": "add every declared experiment, and every benchmark (the five built-ins and the declared "
    "ones), as a Dagster partition of the instance at $DAGSTER_HOME (what experiments_sensor does every "
    "30 s under `make ui`; never removes one) and name the partitions of experiments and benchmarks no "
    "longer declared",
    "prune": "delete the Dagster partitions of experiments and of declared benchmarks no longer declared "
    "(their files under the data folder stay; the leaderboard then no longer lists them as removed)",
    "estimate": "cost and time of what experiment NAME has left to run, per benchmark (ranges from the "
    "protocol's token model, calibrated by finished runs of the same model), and which questions it priced "
    "(the bundled sample or the ingested CSV); --csv PATH prices every question of a MultiPathQA CSV "
    "before any slide is ingested",
    "status": "without NAME, one line per experiment: how many of its cells are complete, reviewed (path "
    "reviews), running, waiting, failed, stale or to do, and its spend; with NAME, each of its cells "
    "(benchmark x experiment): complete, running (done, failed, in flight, spent, ETA), waiting on a "
    "provider batch, failed (the reason and the command that retries it), stale, reviewed, or to do",
    "batches": "the provider batches still open (batch mode), of NAME or of every experiment; --cancel "
    "cancels NAME's",
    "stop": "stop experiment NAME's row (or --benchmark cells): cancel its backfills and its queued and "
    "in-progress runs on the instance at $DAGSTER_HOME (finished runs and paid replies are kept)",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="giant-experiments",
        description=plain(__doc__.splitlines()[0]),
        epilog="the file: $GIANT_EXPERIMENTS, else ./experiments.yaml (fields: docs/experiments.md)",
    )
    file_help = "experiments file (default $GIANT_EXPERIMENTS or ./experiments.yaml)"
    parser.add_argument("--file", default="", help=file_help)
    commands = parser.add_subparsers(dest="command", required=True, metavar="{" + ",".join(COMMANDS) + "}")
    for name, text in COMMANDS.items():
        command = commands.add_parser(name, help=text, description=text)
        # also after the command; SUPPRESS keeps a --file given before it
        command.add_argument("--file", default=argparse.SUPPRESS, help=file_help)
        if name == "check":
            command.add_argument(
                "names", nargs="*", metavar="NAME", help="only these experiments (default all)"
            )
        if name in ("estimate", "batches", "stop", "status"):
            command.add_argument("name", nargs="?", help="the experiment")
        if name in ("estimate", "stop"):
            command.add_argument(
                "--benchmark", action="append", default=None, help="only this benchmark (repeatable)"
            )
        if name == "estimate":
            command.add_argument(
                "--csv", default="", metavar="PATH", help="price this MultiPathQA CSV's questions (no slides)"
            )
        if name == "batches":
            command.add_argument("--cancel", action="store_true", help="cancel the open batches of NAME")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    resource = ExperimentsFile(path=args.file)
    try:
        declared = resource.all()
    except ExperimentsFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.command == "check":
        return _check(resource, declared, args.names)
    elif args.command == "list":
        for line in _list_lines(declared):
            print(line)
    elif args.command == "estimate":
        return _estimate(declared, args.name, args.benchmark, args.csv)
    elif args.command == "status":
        return _status(declared, args.name)
    elif args.command == "batches":
        return _batches(resource, args.name, args.cancel)
    elif args.command == "stop":
        return _stop(declared, args.name, args.benchmark, resource.benchmark_names())
    else:
        from giant_assets.platform.sensors import (
            prune_benchmarks,
            prune_experiments,
            removed_benchmarks,
            removed_experiments,
            sync_benchmarks,
            sync_experiments,
        )

        instance = _instance(args.command)
        if instance is None:
            return 2
        if args.command == "prune":
            pruned = prune_experiments(instance, resource)
            print(f"deleted {len(pruned)} partition(s) of removed experiments: {', '.join(pruned) or 'none'}")
            gone = prune_benchmarks(instance, resource)
            print(f"deleted {len(gone)} partition(s) of removed benchmarks: {', '.join(gone) or 'none'}")
            return 0
        added = sync_experiments(instance, resource)
        print(f"added {len(added)} experiment partition(s): {', '.join(added) or 'none new'}")
        benchmarks = sync_benchmarks(instance, resource)
        print(f"added {len(benchmarks)} benchmark partition(s): {', '.join(benchmarks) or 'none new'}")
        removed = removed_experiments(instance, resource)
        if removed:
            print(
                f"partitions of experiments no longer declared (kept; `giant-experiments prune` deletes "
                f"them): {', '.join(removed)}"
            )
        gone = removed_benchmarks(instance, resource)
        if gone:
            print(
                f"partitions of benchmarks no longer declared (kept; `giant-experiments prune` deletes "
                f"them): {', '.join(gone)}"
            )
    return 0


def _check(resource: ExperimentsFile, declared: dict, names: list[str]) -> int:
    """``check``: the experiments ``names`` (all when none) and the declared benchmarks (every experiment
    runs on each); exit 1 listing every problem, 2 for a name not declared."""
    unknown = sorted(set(names) - set(declared))
    if unknown:
        print(f"error: {resource.file}: no experiment {', '.join(map(repr, unknown))} declared (one of: "
              f"{', '.join(sorted(declared))})", file=sys.stderr)  # fmt: skip
        return 2
    chosen = {name: declared[name] for name in names} if names else declared
    for name, exp in sorted(chosen.items()):
        try:
            exp.config_hash()  # reads the prompt files it names
            if is_plugin(exp.agent):
                load_factory(exp.agent)  # imports the plug-in's module: refused here, not mid-run
                _batchable(exp)
        except ValueError as exc:
            print(f"error: {resource.file}: experiment {name!r}: {exc}", file=sys.stderr)
            return 1
    problems = _sign_ins(resource.file, chosen)
    problems += unbudgeted(resource.file, chosen) + _unpriced(resource.file, chosen)
    problems += _benchmark_problems(resource)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        return 1
    benchmarks = len(resource.benchmarks())
    which = f"{len(chosen)} of {len(declared)}" if names else f"{len(declared)}"
    print(f"{resource.file}: {which} experiment(s), {benchmarks} declared benchmark(s), all valid")
    return 0


def _batchable(exp: Experiment) -> None:
    """Refuse a plug-in in batch mode that declares calls to another model than the experiment's
    (``kit.chat_model`` cannot join the provider's batches); a ``PluginError`` saying so."""
    if not exp.batch:
        return
    try:
        declared = declared_calls(exp.agent, exp.agent_options or {}, exp.model)
    except PluginError:
        return  # no declaration: a second model is refused when the plug-in asks for it
    others = [m for m, (_, most) in declared.items() if m != exp.model and most]
    if others:
        raise PluginError(
            f"plug-in {exp.agent!r} declares calls to {', '.join(map(repr, others))} besides the "
            f"experiment's model {exp.model!r}: batch: true sends only the experiment's model through the "
            "provider's batches (run it without batch: true)"
        )


def _benchmark_problems(resource: ExperimentsFile) -> list[str]:
    """Each declared benchmark's counts on stdout; its problems (file, row, column) returned."""
    from pathlib import Path

    from giant_assets.core.settings import WSI_ROOT_ENV, env

    declarations = resource.benchmarks()
    if not declarations:
        return []
    from giant_assets.benchmarks.check import check_declaration  # reads each one's items (pandas)

    default_root = Path(env(WSI_ROOT_ENV)).expanduser().resolve() if env(WSI_ROOT_ENV) else None
    problems = []
    for declaration in declarations.values():
        report = check_declaration(declaration, default_root)
        print(f"{resource.file}: {report.summary()}")
        for note in report.notes:
            print(f"note: benchmark {declaration.name!r}: {note}")
        problems += [f"{resource.file}: benchmark {declaration.name!r}: {p}" for p in report.problems]
    return problems


LIST_HEADER = ("NAME", "AGENT", "PROVIDER", "MODEL", "ENDPOINT", "RUNS", "CONFIG_HASH")


def _list_lines(declared: dict) -> list[str]:
    """The header, then one tab-separated line per experiment; an offline agent has no provider."""
    rows = [LIST_HEADER]
    for name, exp in sorted(declared.items()):
        online = bool(exp.endpoint)
        model = exp.model or "-"
        if online and exp.provider == "azure" and exp.deployment and exp.deployment != exp.model:
            model = f"{model} (deployment {exp.deployment})"
        provider = exp.provider if online else "-"
        config_hash = f"- ({why})" if (why := unimportable(exp.agent)) else exp.config_hash()
        rows.append((name, exp.agent, provider, model, exp.endpoint or "-", str(exp.runs_per_item),
                     config_hash))  # fmt: skip
    return ["\t".join(row) for row in rows]


def _sign_ins(path: object, declared: dict) -> list[str]:
    """Print how the paid experiments sign in, one line per way (``a, b: signs in with ...``); one problem
    line per reason some cannot, naming them (no key shown): the shipped file's fits on one screen."""
    from giant_assets.agents.signin import sign_in

    ways: dict[str, list[str]] = {}
    refused: dict[str, list[str]] = {}
    for name, exp in sorted(declared.items()):
        if not exp.paid:
            continue
        how, why = sign_in(exp)
        ways.setdefault(how, []).append(name)
        if why:
            refused.setdefault(why, []).append(name)
    for how, names in ways.items():
        print(f"{', '.join(names)}: signs in with {how}")
    return [
        f"{path}: experiment{'s' if len(names) > 1 else ''} {', '.join(map(repr, names))}: {why}"
        for why, names in refused.items()
    ]


def _unpriced(path: object, declared: dict) -> list[str]:
    """One line per capped paid experiment whose model no source prices (the experiment, the
    ``GIANT_PRICES`` file, the built-in table), or per unreadable price file."""
    from giant_assets.agents.pricing import experiment_prices, unpriced_refusal
    from giant_assets.core.settings import PRICES_ENV, env

    problems = []
    for _, exp in sorted(declared.items()):
        try:
            why = unpriced_refusal(exp, experiment_prices(exp))
        except (OSError, ValueError, TypeError) as exc:  # missing, unreadable or malformed price file
            return [f"{PRICES_ENV}={env(PRICES_ENV)}: {exc}"]
        if why:
            problems.append(f"{path}: {why}")
    return problems


def _estimate(declared: dict, name: str | None, benchmarks: list[str] | None, csv: str = "") -> int:
    from pathlib import Path

    from giant_assets.agents.estimate import estimate_experiment, render, total_line
    from giant_assets.agents.pricing import experiment_prices
    from giant_assets.core.settings import PRICES_ENV, data_dir, env
    from giant_assets.core.storage import ParquetStore
    from giant_assets.multipathqa.loading import CsvFormatError
    from giant_assets.platform.estimate_items import csv_questions, ingested_source, item_set_line
    from giant_assets.platform.resources import MultiPathQAResource

    if not name or name not in declared:
        known = ", ".join(sorted(declared))
        print(f"error: estimate needs a declared experiment name (one of: {known})", file=sys.stderr)
        return 2
    why = unimportable(declared[name].agent)
    if why:
        print(f"error: experiment {name!r}: {why} (`giant-experiments check` says why)", file=sys.stderr)
        return 1
    store = ParquetStore(data_dir())
    if csv:
        source: Path | None = Path(csv).expanduser().resolve()
        try:
            items = csv_questions(source, MultiPathQAResource().errata_mode)
        except (CsvFormatError, ValueError) as exc:  # a bad file, row or GIANT_ERRATA
            print(f"error: --csv {source}: {str(exc).removeprefix(f'{source}: ')}", file=sys.stderr)
            return 1
    elif not store.partitions("benchmark_items"):
        print(
            f"error: no benchmark_items under {store.root}: materialize multipathqa_csv and "
            "benchmark_items first (the estimate counts the items with a readable slide), or price a CSV "
            "alone: estimate NAME --csv PATH",
            file=sys.stderr,
        )
        return 1
    else:
        items = store.read("benchmark_items")
        source = ingested_source(store.read("multipathqa_csv") if store.exists("multipathqa_csv") else None)
    known = sorted(items["benchmark_name"].astype(str).unique())
    unknown = sorted(set(benchmarks or ()) - set(known))
    if unknown:
        print(f"error: --benchmark {', '.join(unknown)}: not a benchmark of the items (one of: "
              f"{', '.join(known)})", file=sys.stderr)  # fmt: skip
        return 2
    try:
        prices = experiment_prices(declared[name])
    except (OSError, ValueError, TypeError) as exc:  # missing, unreadable or malformed price file
        print(f"error: {PRICES_ENV}={env(PRICES_ENV)}: {exc}", file=sys.stderr)
        return 1

    def estimates_of(every_item: bool) -> list:
        return estimate_experiment(
            declared[name],
            items,
            journals_dir=store.root / "journals",
            prices=prices,
            benchmarks=benchmarks,
            every_item=every_item,
            journalled=not csv,
        )

    estimates = estimates_of(every_item=False)
    print(f"{name}: {declared[name].agent} / {declared[name].model or '-'}, ranges low-high")
    print(render(estimates))
    missing = sum(e.without_slide for e in estimates)
    if missing:  # e.g. estimated before the slides are fetched: say what the whole benchmark costs
        every = estimates_of(every_item=True)
        print(
            f"note: {missing} question(s) have no readable slide now and are left out above (no model "
            f"call is made for them; `giant-check-data` lists them); with every slide in place: "
            f"{total_line(every)}"
        )
    print(item_set_line(items, source, csv_alone=bool(csv)))
    return 0


def _instance(command: str) -> DagsterInstance | None:
    """The Dagster instance at $DAGSTER_HOME, or None after an error naming what is wrong with it."""
    import os

    from dagster import DagsterInstance

    from giant_assets.core.settings import DAGSTER_HOME_ENV

    home = os.path.expanduser(os.environ.get(DAGSTER_HOME_ENV, ""))
    problem = None
    if not home:
        problem = "is not set"
    elif not os.path.isabs(home):
        problem = f"({home!r}) is not an absolute path"
    elif not os.path.isdir(home):
        problem = f"({home!r}) is not a folder"
    if problem is not None:
        print(
            f"error: {command} acts on the Dagster instance, and ${DAGSTER_HOME_ENV} {problem}: set it to "
            "the instance's folder (the Makefile uses ./dagster_home, as an absolute path)",
            file=sys.stderr,
        )
        return None
    return DagsterInstance.get()


def _stop(declared: dict, name: str | None, benchmarks: list[str] | None, names: Sequence[str]) -> int:
    """Stop an experiment's runs (of ``benchmarks``, else all); ``names``: the benchmarks declared now."""
    from giant_assets.platform.partitions import BENCHMARK, EXPERIMENT
    from giant_assets.platform.stop import stop_experiment

    if not name:
        print("error: stop needs the experiment NAME whose runs to stop", file=sys.stderr)
        return 2
    instance = _instance("stop")
    if instance is None:
        return 2
    with instance:
        # a removed declaration's runs can still be stopped: its partition stays in the instance
        stored = instance.get_dynamic_partitions(BENCHMARK)
        known_benchmarks = [*names, *(b for b in stored if b not in names)]
        unknown = sorted(set(benchmarks or []) - set(known_benchmarks))
        if unknown:
            print(
                f"error: unknown benchmark(s) {', '.join(map(repr, unknown))} "
                f"(one of: {', '.join(known_benchmarks)})",
                file=sys.stderr,
            )
            return 2
        stopped = stop_experiment(instance, name, benchmarks)
        known = name in declared or name in instance.get_dynamic_partitions(EXPERIMENT)
    if not known and not (stopped.backfills or stopped.runs or stopped.not_stopped or stopped.kept_backfills):
        names = ", ".join(sorted(declared)) or "none"
        print(
            f"error: unknown experiment {name!r}: not declared (one of: {names}) and no partition, backfill "
            "or run of the instance names it; nothing stopped",
            file=sys.stderr,
        )
        return 2
    print(f"{name}: {len(stopped.backfills)} backfill(s) canceled, {len(stopped.runs)} run(s) canceled "
          f"or terminating: {', '.join(stopped.backfills + stopped.runs) or 'none'}")  # fmt: skip
    for backfill_id in stopped.kept_backfills:
        print(f"backfill {backfill_id} also runs other cells: left running (its runs of these cells are "
              "canceled above)")  # fmt: skip
    if stopped.not_launched:
        print(f"not launched yet by such a backfill, so not stopped: {', '.join(stopped.not_launched)}; run "
              "stop again once they are queued", file=sys.stderr)  # fmt: skip
    for run_id in stopped.not_stopped:
        print(f"run {run_id} could not be terminated (started from a shell, no code server to ask): "
              "interrupt its process (Ctrl-C)", file=sys.stderr)  # fmt: skip
    return 1 if stopped.not_stopped or stopped.not_launched else 0


def _status(declared: dict, name: str | None) -> int:
    import os

    from dagster import DagsterInstance

    from giant_assets.core.settings import DAGSTER_HOME_ENV, data_dir
    from giant_assets.core.storage import ParquetStore
    from giant_assets.platform.status import STATES, experiment_lines, grid_states

    if name and name not in declared:
        print(
            f"error: no experiment {name!r} declared (one of: {', '.join(sorted(declared))})", file=sys.stderr
        )
        return 2
    store = ParquetStore(data_dir())
    if not store.partitions("benchmark_items"):
        print(
            f"error: no benchmark_items under {store.root}: materialize benchmark_items first",
            file=sys.stderr,
        )
        return 1
    instance = DagsterInstance.get() if os.environ.get(DAGSTER_HOME_ENV) else None
    if instance is None:
        print(f"note: ${DAGSTER_HOME_ENV} is not set: from the journals and stored results only (no runs)")
    states = grid_states(
        instance, store.root, declared, store.read("benchmark_items"), [name] if name else None
    )
    for line in [s.line() for s in states] if name else experiment_lines(states):
        print(line)
    counts = {s: sum(x.state == s for x in states) for s in STATES}
    print(", ".join(f"{n} {s}" for s, n in counts.items() if n) + f" of {len(states)} cell(s)")
    if not name:
        print(
            "`giant-experiments status NAME` lists NAME's cells, with the command that retries a failed one"
        )
    return 0


def _batches(resource: ExperimentsFile, name: str | None, cancel: bool) -> int:
    import asyncio
    import time

    from giant_assets.core.settings import data_dir
    from giant_assets.platform.batch_sensor import orphaned_rounds, review_open, stores

    if cancel and not name:
        print("error: --cancel needs the experiment NAME whose batches to cancel", file=sys.stderr)
        return 2
    found = stores(data_dir())
    for problem in (p for s in found for p in s.problems):  # the good records are still listed
        print(f"warning: batch store {problem}", file=sys.stderr)
    rows = asyncio.run(review_open(data_dir(), resource, name, cancel, found))
    for b in rows:
        since = time.strftime("%Y-%m-%d %H:%M", time.gmtime(b.get("submitted_at") or 0))
        head = f"{b.get('partition', '?')}\t{b['batch_id']}\t{b.get('requests', '?')} requests"
        if "problem" in b:
            print(f"{head}\tsince {since} UTC\tstatus unknown: {b['problem']}")
        else:
            print(f"{head}\tsince {since} UTC\t{b['provider_status']}\t{b['counts']}")
        if b.get("contradiction"):
            print(f"  {b['contradiction']}")
        if b.get("ended") and not cancel:
            print("  ended at the provider, its answers not stored yet: the batch sensor (dagster-daemon) "
                  "launches the cell; without a daemon, or if it says the cell cannot go on, materialize "
                  "the cell again")  # fmt: skip
    problems = sum("problem" in b for b in rows)
    verb = "cancelled" if cancel else "open"
    shown = len(rows) - problems if cancel else len(rows)
    summary = f"{shown} batch(es) {verb}" + (f" for {name}" if name else "")
    if problems:
        summary += f"; {problems} could not be {'cancelled' if cancel else 'checked'} (see above)"
    print(summary)
    for o in orphaned_rounds(data_dir(), found=found):
        if name and o.get("experiment") != name:
            continue
        at = time.strftime("%Y-%m-%d %H:%M", time.gmtime(o["at"]))
        print(f"{o.get('partition', o['folder'])}: round {o['round_tag']} of {at} UTC has no recorded batch "
              "(its process stopped while submitting): materialize the cell again to adopt it"
              + (" (not cancelled: its batch id is not known yet)" if cancel else ""))  # fmt: skip
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
