"""Init time of every function as deployed (`python -m bench.deployed_init`): the deployed-emulation harness.

Each function is started as Lambda starts it (tests/support/deployed: the synthesized template's environment,
the layer asset, python3.12 with awslambdaric on a local Runtime API, the Web Adapter emulation for stream) and
its init time is the time from the process's start to its first `GET /runtime/invocation/next` (for stream:
the adapter's, after uvicorn passed the readiness check) — what Lambda reports as Init Duration, minus the
sandbox and code download. Each figure is the median of RUNS fresh processes, started in rounds (every
function once per round) to spread the machine's noise.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from infra.registry import FUNCTIONS
from tests.support.deployed.stack import DeployedStack

RUNS = 3


def measure(runs: int = RUNS) -> dict[str, Any]:
    stack = DeployedStack.start()
    try:
        times: dict[str, list[float]] = {spec.name: [] for spec in FUNCTIONS}
        for _ in range(runs):
            for spec in FUNCTIONS:
                process = stack.launch(spec.name)
                try:
                    times[spec.name].append(process.wait_ready())
                finally:
                    process.stop()
        return {
            "runtime": stack.runtime.note,
            "runs": runs,
            "functions": {
                name: {"median_s": statistics.median(values), "all_s": values} for name, values in times.items()
            },
        }
    finally:
        stack.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args()
    result = measure(args.runs)
    print(f"runtime: {result['runtime']}; median of {result['runs']} fresh processes per function")
    print("| function | init, median (s) | each run (s) |")
    print("|---|---|---|")
    for name, row in result["functions"].items():
        each = ", ".join(f"{v:.2f}" for v in row["all_s"])
        print(f"| {name} | {row['median_s']:.2f} | {each} |")


if __name__ == "__main__":
    main()
