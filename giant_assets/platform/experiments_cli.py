"""`giant-experiments`: validate the declared experiments, list them, add them as Dagster partitions.

giant-experiments check            # validate the file (exit 1 with file/experiment/field on error)
giant-experiments list             # one line per experiment: name, agent, model, config hash
giant-experiments sync             # add every declared experiment as a partition ($DAGSTER_HOME)
"""

from __future__ import annotations

import argparse
import sys

from giant_assets.experiments.declared import ExperimentsFileError
from giant_assets.platform.resources import ExperimentsResource


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="giant-experiments", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["check", "list", "sync"])
    parser.add_argument(
        "--file", default="", help="experiments file (default $GIANT_EXPERIMENTS or ./experiments.yaml)"
    )
    args = parser.parse_args(argv)
    resource = ExperimentsResource(path=args.file)
    try:
        declared = resource.all()
    except ExperimentsFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.command == "check":
        print(f"{resource.file}: {len(declared)} experiment(s), all valid")
    elif args.command == "list":
        for name, exp in sorted(declared.items()):
            print(f"{name}\t{exp.agent}\t{exp.model or '-'}\truns={exp.runs_per_item}\t{exp.config_hash()}")
    else:
        from dagster import DagsterInstance

        from giant_assets.platform.sensors import sync_experiments

        added = sync_experiments(DagsterInstance.get(), resource)
        print(f"added {len(added)} experiment partition(s): {', '.join(added) or 'none new'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
