"""`make demo`'s wall and CPU time, and the installed size of the runtime and of the dev extra.

The demo runs as tests/demo's fixture runs it: ``python -m giant_assets.demo`` in a fresh temporary
DAGSTER_HOME and GIANT_DATA_DIR, the experiments file with the scripted model moved to a free port, the
sample slides generated beforehand (not timed). CPU is the demo process's user + system time
(``resource.getrusage(RUSAGE_CHILDREN)``); wall time depends on what else the machine runs, CPU much
less. The slowest steps the demo printed follow. Sizes: perf/venv_size.py.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from giant_assets.multipathqa.sample import ensure_sample_slides
from perf.venv_size import report

REPO = Path(__file__).resolve().parents[1]
DEMO_PORT = ":47321/v1"
STEP = re.compile(r"^  ok  (.*) \((\d+\.\d)s\)$")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_demo(tmp: Path) -> tuple[float, float, str]:
    """(wall s, CPU s, stdout) of one demo in ``tmp``."""
    home = tmp / "dagster_home"
    home.mkdir()
    shutil.copyfile(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    declared = tmp / "experiments.yaml"
    declared.write_text((REPO / "experiments.yaml").read_text().replace(DEMO_PORT, f":{free_port()}/v1"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIANT_")}
    env |= {
        "DAGSTER_HOME": str(home),
        "GIANT_DATA_DIR": str(tmp / "data"),
        "GIANT_EXPERIMENTS": str(declared),
        "GIANT_WSI_ROOT": str(ensure_sample_slides(tmp / "wsi")),
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "giant_assets.demo"], env=env, cwd=REPO, capture_output=True, text=True
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode:
        raise SystemExit(f"the demo failed:\n{out.stdout[-2000:]}{out.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out.stdout


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        wall, cpu, stdout = run_demo(Path(tmp))
    steps = sorted(((float(m[2]), m[1]) for m in map(STEP.match, stdout.splitlines()) if m), reverse=True)
    print(f"make demo (as tests/demo runs it): wall {wall:.0f} s, CPU {cpu:.0f} s (user + system)")
    print(f"{len(steps)} materializations; the slowest:")
    for seconds, title in steps[:5]:
        print(f"  {seconds:5.1f} s  {title}")
    print(report())


if __name__ == "__main__":
    main()
