"""`bench.turn_latency` (memory and SQLite) on two versions of the runtime, before and after, in one run.

Each round runs the benchmark once per version, each in a process of its own (`PYTHONPATH=<shared>:<bench>`),
the order flipped every round so machine noise hits both alike; the figures reported are the medians over the
rounds of each run's percentiles (a shared 2-core machine moves one run's p95 by several milliseconds), and the
SQLite / memory ratio is taken within each run before its median. "after" is this checkout's `shared/`;
"before" is any other tree's `shared/`, e.g. a commit's, extracted with
`git archive <commit> shared | tar -x -C /tmp/before`.

    python -m bench.turn_latency_compare --before /tmp/before/shared --rounds 6 --turns 500
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KEYS = ("p50_ms", "p95_ms", "turn_p50_ms", "turn_p95_ms", "turn_cpu_mean_ms", "store_p50_ms", "store_first_p50_ms")
LABELS = {
    "p50_ms": "to first LLM request p50",
    "p95_ms": "to first LLM request p95",
    "turn_p50_ms": "whole turn p50",
    "turn_p95_ms": "whole turn p95",
    "turn_cpu_mean_ms": "CPU per turn, mean",
    "store_p50_ms": "inside table calls per turn, p50",
    "store_first_p50_ms": "inside table calls before the first LLM request, p50",
}


def _run_once(shared: Path, turns: int, warmup: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": f"{shared}{os.pathsep}{ROOT}"}
    code = (
        "import json, sys\n"
        "from bench import turn_latency\n"
        f"results = turn_latency.run({turns}, {warmup}, ('memory', 'sqlite'))\n"
        "print('RESULT ' + json.dumps(results))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    results: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
    return results


def compare(before: Path, after: Path, rounds: int, turns: int, warmup: int) -> dict[str, Any]:
    versions = {"before": before, "after": after}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in versions}
    for n in range(rounds):
        for name in list(versions) if n % 2 == 0 else list(versions)[::-1]:
            result = _run_once(versions[name], turns, warmup)
            runs[name].append(result)
            ratio = result["sqlite_vs_memory"]
            print(
                f"round {n + 1} {name}: sqlite p50 {result['sqlite']['p50_ms']} / memory {result['memory']['p50_ms']}"
                f" ms (x{ratio['p50_ms']}), whole turn x{ratio['turn_p50_ms']}, CPU x{ratio['turn_cpu_mean_ms']}",
                flush=True,
            )
    summary: dict[str, Any] = {}
    for name, results in runs.items():
        summary[name] = {
            table: {key: round(statistics.median(r[table][key] for r in results), 2) for key in KEYS}
            for table in ("memory", "sqlite")
        }
        summary[name]["ratio"] = {
            key: round(statistics.median(r["sqlite_vs_memory"][key] for r in results), 2) for key in KEYS
        }
    print(f"\nmedians over {rounds} runs per version, {turns} measured turns per table per run; ms")
    print("| measure | before: SQLite / memory (ratio) | after: SQLite / memory (ratio) |")
    print("|---|---|---|")
    for key in KEYS:
        cells = [
            f"{summary[name]['sqlite'][key]} / {summary[name]['memory'][key]} (x{summary[name]['ratio'][key]})"
            for name in versions
        ]
        print(f"| {LABELS[key]} | {cells[0]} | {cells[1]} |")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=True, help="the `shared/` directory of the version before")
    parser.add_argument("--after", type=Path, default=ROOT / "shared", help="default: this checkout's shared/")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    compare(args.before.resolve(), args.after.resolve(), args.rounds, args.turns, args.warmup)


if __name__ == "__main__":
    main()
