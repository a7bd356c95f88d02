"""Side by side with an independent GIANT implementation: the peer (gigapixel-goblin's ``giant
benchmark``) against ours (``dagster asset materialize --select predictions``, image_read exact and fast):
the same slides (one .svs copy per item), the same loopback scripted model in its own process, fixed
latency L, C=16, 2 calls per item (overview, one crop, answer). Target (issue 24): with image_read fast,
CPU per item at most ``TARGET`` x the peer's and items/s not below it (measured:
docs/design/peer-comparison.md).

The peer is not part of this project: install it yourself in a virtualenv of its own (its README) and
point ``GIANT_PEER_CLI`` at its ``giant`` command; without it this benchmark says so and does nothing.

    GIANT_PEER_CLI=/path/to/venv/bin/giant python -m perf.bench_peer [--items 64,128] [--latency 1.0]
        [--reps 2] [--only peer,exact,fast] [--rotate]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from giant_assets.demo.scripted import RecordedRequest, Reply, ScriptedModelServer
from perf import bench_throughput as bench

PEER_CLI_ENV = "GIANT_PEER_CLI"
TARGET = 1.1  # image_read fast: CPU per item at most this multiple of the peer's
PEER_MODEL = "gpt-5.2"  # the peer validates model ids against its registry; the server ignores it
CROP = (2400, 800, 1024, 768)  # the same level-0 crop as bench_throughput's crop_then_answer
CONCURRENCY = 16
MAX_STEPS = 5  # as ours (bench's experiments); the peer's default is 20 (prompt text only)
CALLS = bench.CALLS_PER_ITEM


def side_rule(req: RecordedRequest) -> Reply:
    """Ours (slide_zoom tool): bench's crop_then_answer. The peer (Responses + json_schema StepResponse,
    no tools): the same crop as a flattened StepResponse, then answer "2"."""
    fmt = ((req.json or {}).get("text") or {}).get("format") or {}
    if fmt.get("name") != "StepResponse":
        return bench.crop_then_answer(req)
    x, y, w, h = CROP
    if req.assistant_turns == 0:
        action = {"action_type": "crop", "x": x, "y": y, "width": w, "height": h,
                  "answer_text": None, "hypotheses": None}  # fmt: skip
        reasoning = "zoom into the lesion"
    else:
        action = {"action_type": "answer", "x": None, "y": None, "width": None, "height": None,
                  "answer_text": "2", "hypotheses": None}  # fmt: skip
        reasoning = "enough seen"
    return Reply(json.dumps({"reasoning": reasoning, "action": action}))


def _serve(latency: float, conn, stop) -> None:
    """Child process: the scripted server; reports its URL, then every request's (arrival, kind)."""
    with ScriptedModelServer(rule=side_rule, latency_s=latency) as srv:
        conn.send(srv.openai_base_url)
        stop.wait()
        kinds = []
        for r in srv.requests:
            fmt = ((r.json or {}).get("text") or {}).get("format") or {}
            kinds.append((r.received_at, "peer" if fmt.get("name") == "StepResponse" else "ours"))
        conn.send(kinds)


def _busy_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as fh:
        fields = [int(v) for v in fh.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def _load1() -> float:
    return os.getloadavg()[0]


class Measure:
    """Wall, CPU of child processes (RUSAGE_CHILDREN), machine busy cores and load around a command."""

    def __enter__(self) -> Measure:
        self.load0 = _load1()
        self.busy0, self.tot0 = _busy_jiffies()
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu0 = r.ru_utime + r.ru_stime
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.t1 = time.monotonic()
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu = r.ru_utime + r.ru_stime - self.cpu0
        busy1, tot1 = _busy_jiffies()
        self.wall = self.t1 - self.t0
        # machine-wide busy cores during the command (all processes: this command, server, other helpers)
        self.busy_cores = (busy1 - self.busy0) / max(1, tot1 - self.tot0) * (os.cpu_count() or 1)
        self.load1 = _load1()


def peer_env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIANT_", "DAGSTER_", "OPENAI_"))}
    env.pop("PYTHONPATH", None)
    env |= {
        "OPENAI_API_KEY": "sk-bench-not-a-secret",
        "OPENAI_BASE_URL": url,
        "OPENAI_RPM": "1000000",  # the peer's default is 60/min; ours runs with requests_per_minute 1e6
    }
    return env


def peer_cmd(cli: str, csv_path: Path, wsi_root: Path, out: Path) -> list[str]:
    return [
        cli, "benchmark", "tcga", "--csv-path", str(csv_path), "--wsi-root", str(wsi_root),
        "--output-dir", str(out), "--mode", "giant", "--provider", "openai", "--model", PEER_MODEL,
        "--max-steps", str(MAX_STEPS), "--concurrency", str(CONCURRENCY), "--json",
    ]  # fmt: skip


def run_peer(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[Measure, str]:
    with Measure() as m:
        done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"peer failed rc={done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}")
    return m, done.stdout


def check_peer(out: Path, n: int) -> None:
    """Every item answered "2" (label 2), no error."""
    results = sorted(out.glob("*_results.json"))
    assert results, f"no results file in {out}"
    rows = json.loads(results[-1].read_text())["results"]
    assert len(rows) == n, f"peer: {len(rows)} results for {n} items"
    bad = [r for r in rows if r.get("error") or r.get("predicted_label") != 2]
    assert not bad, f"peer: {len(bad)} bad results, e.g. {bad[0]}"


def run_ours(env: dict[str, str], name: str) -> Measure:
    with Measure() as m:
        cpu = bench._e2e_cli(env, "predictions", f"tcga|{name}")
    m.cpu = cpu  # the same RUSAGE_CHILDREN delta, as bench measures it
    return m


def one_rep(cli: str, n: int, latency: float, only: list[str], root: Path) -> list[dict]:
    rows: list[dict] = []
    server = bench.ServerProcess(latency, _serve)
    with server as url:
        tmp = Path(tempfile.mkdtemp(prefix=f"n{n}-", dir=root))
        slides = bench.slide_copies(tmp / "wsi", n)
        cells = {
            f"peer-{read}": f"concurrency: {CONCURRENCY}, image_read: {read}" for read in ("exact", "fast")
        }
        env = bench._e2e_setup(tmp, slides, url, cells)
        csv_path = Path(env["GIANT_CSV_PATH"])  # the same questions, image_path = slide-XXX.svs
        penv = peer_env(url)
        for what in only:
            if what == "peer":
                out = tmp / "peer-out"
                cmd = peer_cmd(cli, csv_path, tmp / "wsi", out)
                m, _ = run_peer(cmd, penv, tmp)
                check_peer(out, n)
                fixed, _ = run_peer(cmd, penv, tmp)  # resume: every item checkpointed, 0 pending
            else:
                m = run_ours(env, f"peer-{what}")
                fixed = run_ours(env, f"peer-{what}")  # every run journalled: the fixed cost
            rows.append({"what": what, "n": n, "L": latency, "m": m, "fixed": fixed})
    arrivals = server.report
    for row in rows:
        m, f = row["m"], row["fixed"]
        row["calls"] = sum(m.t0 <= t <= m.t1 for t, _ in arrivals)
        row["calls_fixed"] = sum(f.t0 <= t <= f.t1 for t, _ in arrivals)
        kind = "peer" if row["what"] == "peer" else "ours"
        row["calls_kind_ok"] = all(k == kind for t, k in arrivals if m.t0 <= t <= m.t1)
        assert row["calls"] == CALLS * n, f"{row['what']}: {row['calls']} calls for {n} items"
        assert row["calls_fixed"] == 0, f"{row['what']} rerun made {row['calls_fixed']} calls"
        assert row["calls_kind_ok"]
        mine = sorted(t for t, _ in arrivals if m.t0 <= t <= m.t1)
        row["startup"] = mine[0] - m.t0
        row["tail"] = m.t1 - (mine[-1] + latency)
    return rows


def fmt_rows(rows: list[dict]) -> str:
    head = (f"{'cmd':>6} {'N':>4} {'L':>4} {'wall s':>7} {'items/s':>8} {'CPU s':>7} {'CPU/item':>9} "
            f"{'fixed s':>7} {'fixedCPU':>8} {'marginal':>9} {'start':>6} {'tail':>5} {'calls':>6} "
            f"{'busy':>5} {'load':>9}")  # fmt: skip
    lines = [head]
    for r in rows:
        m, f, n = r["m"], r["fixed"], r["n"]
        marginal = (m.cpu - f.cpu) / n
        r["rate"], r["cpu_item"], r["marginal"] = n / m.wall, m.cpu / n, marginal
        lines.append(
            f"{r['what']:>6} {n:>4} {r['L']:>4.1f} {m.wall:>7.2f} {n / m.wall:>8.2f} {m.cpu:>7.2f} "
            f"{m.cpu / n * 1e3:>7.1f}ms {f.wall:>7.2f} {f.cpu:>8.2f} {marginal * 1e3:>7.1f}ms "
            f"{r['startup']:>6.2f} {r['tail']:>5.2f} {r['calls']:>6} {m.busy_cores:>5.2f} "
            f"{m.load0:>4.2f}>{m.load1:<4.2f}"
        )
    return "\n".join(lines)


def ratios(rows: list[dict]) -> str:
    peer = next((r for r in rows if r["what"] == "peer"), None)
    if peer is None:
        return ""
    out = []
    for r in rows:
        if r["what"] == "peer":
            continue
        cpu, rate = r["cpu_item"] / peer["cpu_item"], r["rate"] / peer["rate"]
        verdict = ""
        if r["what"] == "fast":
            met = cpu <= TARGET and rate >= 1
            verdict = f" (target CPU <= {TARGET}x, items/s >= 1x: {'met' if met else 'MISSED'})"
        out.append(
            f"  {r['what']:>5}/peer: CPU/item {cpu:.2f}x, marginal {r['marginal'] / peer['marginal']:.2f}x, "
            f"fixed CPU {r['fixed'].cpu / peer['fixed'].cpu:.2f}x, items/s {rate:.2f}x{verdict}"
        )
    return "\n".join(out)


def main() -> None:
    cli = os.environ.get(PEER_CLI_ENV)
    if not cli or not Path(cli).is_file():
        print(f"skipped: set {PEER_CLI_ENV} to the peer's `giant` command (gigapixel-goblin installed in its "
              "own virtualenv) to run the side-by-side")  # fmt: skip
        return
    ap = argparse.ArgumentParser(prog="python -m perf.bench_peer")
    ap.add_argument("--items", default="64")
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--only", default="peer,exact,fast")
    ap.add_argument("--rotate", action="store_true", help="rotate the command order between reps")
    args = ap.parse_args(sys.argv[1:] if __name__ == "__main__" else [])
    only = args.only.split(",")
    root = Path(tempfile.mkdtemp(prefix="bench-peer-"))
    print(f"side by side: C={CONCURRENCY}, L={args.latency} s, {CALLS} calls/item, {os.cpu_count()} cores; "
          f"python {sys.version.split()[0]}", flush=True)  # fmt: skip
    try:
        for n in (int(v) for v in args.items.split(",")):
            for rep in range(args.reps):
                order = only[rep % len(only) :] + only[: rep % len(only)] if args.rotate else only
                rows = one_rep(cli, n, args.latency, order, root)
                print(f"\n[N={n} rep {rep + 1}] order {','.join(order)}", flush=True)
                print(fmt_rows(rows))
                print(ratios(rows), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)  # the slide copies (~5 MB per item)
    print("\nCPU: the command's CPU (RUSAGE_CHILDREN delta); fixed: a rerun with every item done (ours: "
          "journalled; peer: --resume checkpoint, 0 pending); marginal = (CPU - fixed CPU)/N; start: start "
          "to first model call; tail: last reply to exit; busy: machine-wide busy cores during the command "
          "(all processes); load: 1-min load average before>after")  # fmt: skip


if __name__ == "__main__":
    main()
