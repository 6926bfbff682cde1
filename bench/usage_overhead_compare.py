"""`bench.usage_overhead`'s moto measures on two versions of the runtime, before and after, in one run.

Each round runs, per version, in a process of its own (`PYTHONPATH=<shared>:<bench>`, the order flipped every
round): the DynamoDB calls of plain turns with budgets on, split at the first LLM request, and whole plain turns
budgets off vs on, interleaved turn by turn (`usage_overhead._whole_turns`). Reported: per version, the medians
over the rounds of each run's figures, and what budgets add (on - off, taken within each run). "after" is this
checkout's `shared/`; "before" any other tree's, e.g. `git archive <commit> shared | tar -x -C /tmp/before`.

    python -m bench.usage_overhead_compare --before /tmp/before/shared --rounds 4 --whole-turns 150
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


def _run_once(shared: Path, whole_turns: int, call_turns: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": f"{shared}{os.pathsep}{ROOT}"}
    code = (
        "import asyncio, json\n"
        "from bench import usage_overhead as u\n"
        "from bench.common import moto_aws, quiet_observability\n"
        "quiet_observability()\n"
        "with moto_aws():\n"
        f"    patterns = asyncio.run(u._calls({call_turns}))\n"
        "with moto_aws():\n"
        f"    whole = asyncio.run(u._whole_turns({whole_turns}))\n"
        "before = max(len(b) for b, _ in patterns)\n"
        "ops = sorted({op for b, _ in patterns for op in b})\n"
        "print('RESULT ' + json.dumps({'whole': whole, 'calls_before': before, 'ops_before': ops}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
    return result


def compare(before: Path, after: Path, rounds: int, whole_turns: int, call_turns: int) -> dict[str, Any]:
    versions = {"before": before, "after": after}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in versions}
    for n in range(rounds):
        for name in list(versions) if n % 2 == 0 else list(versions)[::-1]:
            result = _run_once(versions[name], whole_turns, call_turns)
            runs[name].append(result)
            off, on = result["whole"]["off"], result["whole"]["on"]
            print(
                f"round {n + 1} {name}: off p50 {off['p50_ms']} p95 {off['p95_ms']} / on p50 {on['p50_ms']} p95 "
                f"{on['p95_ms']} ms; calls before the model with budgets {result['calls_before']}",
                flush=True,
            )
    summary: dict[str, Any] = {}
    for name, results in runs.items():

        def med(key: str, mode: str, rs: list[dict[str, Any]] = results) -> float:
            return round(statistics.median(r["whole"][mode][key] for r in rs), 2)

        def added(key: str, rs: list[dict[str, Any]] = results) -> float:
            return round(statistics.median(r["whole"]["on"][key] - r["whole"]["off"][key] for r in rs), 2)

        summary[name] = {
            "off_p50": med("p50_ms", "off"),
            "off_p95": med("p95_ms", "off"),
            "on_p50": med("p50_ms", "on"),
            "on_p95": med("p95_ms", "on"),
            "added_p50": added("p50_ms"),
            "added_p95": added("p95_ms"),
            "added_ddb_p50": added("ddb_p50_ms"),
            "calls_before": max(r["calls_before"] for r in results),
            "ops_before": sorted({op for r in results for op in r["ops_before"]}),
        }
    print(f"\nmedians over {rounds} runs per version, {whole_turns} whole turns per mode per run; ms")
    print("| version | off p50 / p95 | on p50 / p95 | added p50 | added p95 | added in DynamoDB p50 | calls before |")
    print("|---|---|---|---|---|---|---|")
    for name, row in summary.items():
        print(
            f"| {name} | {row['off_p50']} / {row['off_p95']} | {row['on_p50']} / {row['on_p95']} | {row['added_p50']} "
            f"| {row['added_p95']} | {row['added_ddb_p50']} | {row['calls_before']} ({', '.join(row['ops_before'])}) |"
        )
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=True, help="the `shared/` directory of the version before")
    parser.add_argument("--after", type=Path, default=ROOT / "shared", help="default: this checkout's shared/")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--whole-turns", type=int, default=150)
    parser.add_argument("--call-turns", type=int, default=10)
    args = parser.parse_args()
    compare(args.before.resolve(), args.after.resolve(), args.rounds, args.whole_turns, args.call_turns)


if __name__ == "__main__":
    main()
