"""Cold import of `functions.chat.handler` in a fresh process vs its third-party dependencies alone.

Each figure is the median of 7 fresh `python -c` processes timing the import with `time.perf_counter()`
(interpreter start-up excluded), run in turn (handler, baselines, handler, ...) to spread the noise.
The dependencies are found from `python -X importtime -c "import functions.chat.handler"`: every module
in that graph that is neither stdlib nor first-party. Two baselines:

* top-level: `import <each top-level third-party package>` plus
  `from aws_lambda_powertools import Logger, Metrics, Tracer` (what a minimal app on the same stack imports);
* full graph: every third-party module of the handler's graph, submodules included (e.g. `aws_xray_sdk.core`,
  which Powertools' `Tracer()` imports lazily), so the difference to the handler is first-party work only.

The environment sets PYTHONDONTWRITEBYTECODE=1 and shared/ has no __pycache__, so by default agent_core is
compiled from source at every start while site-packages has .pyc files. The script measures both ways:
"as is", and with a private PYTHONPYCACHEPREFIX (a temp dir, primed once) so every module loads from bytecode.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HANDLER = "functions.chat.handler"
FIRST_PARTY = ("agent_core", "functions", "bench")
RUNS = 7
IMPORTTIME_RUNS = 5
TARGET_RATIO = 1.2
_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)$")


@dataclass
class Node:
    name: str
    self_us: int
    cumulative_us: int
    depth: int
    children: list[Node] = field(default_factory=list)


def _env(pycache_prefix: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    env.setdefault("POWERTOOLS_TRACE_DISABLED", "1")
    if pycache_prefix is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache_prefix
    return env


def _python(code: str, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *flags, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )


def import_tree(env: dict[str, str]) -> list[Node]:
    """The handler's import graph from -X importtime, as a forest in import order."""
    stderr = _python(f"import {HANDLER}", env, "-X", "importtime").stderr
    # importtime prints a module after its children: collect, then attach each to the next shallower line.
    pending: list[Node] = []
    for line in stderr.splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        node = Node(match[4], int(match[1]), int(match[2]), len(match[3]) // 2)
        node.children = [n for n in pending if n.depth == node.depth + 1]
        pending = [n for n in pending if n.depth <= node.depth]
        pending.append(node)
    return [n for n in pending if n.depth == 0]


def _walk(nodes: list[Node]) -> list[Node]:
    out: list[Node] = []
    for n in nodes:
        out.extend(_walk(n.children))
        out.append(n)
    return out


_SITE = sysconfig.get_paths()["purelib"]


def _is_third_party(module: str) -> bool:
    top = module.split(".")[0]
    if top in FIRST_PARTY or top in sys.stdlib_module_names or top.startswith("_"):
        return False
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    origin = (spec.origin or "") if spec else ""
    locations = list(spec.submodule_search_locations or []) if spec else []
    return any(str(p).startswith(_SITE) for p in [origin, *locations])


def _time_import(code: str, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU milliseconds of `code` in a fresh process."""
    timed = (
        "import time\n_w, _c = time.perf_counter(), time.process_time()\n"
        f"{code}\nprint(time.perf_counter() - _w, time.process_time() - _c)"
    )
    wall, cpu = _python(timed, env).stdout.strip().splitlines()[-1].split()
    return float(wall) * 1000, float(cpu) * 1000


def _medians(codes: dict[str, str], env: dict[str, str], runs: int) -> dict[str, tuple[float, float]]:
    """Median wall and CPU ms per snippet; the snippets take turns so load changes hit them alike."""
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in codes}
    for _ in range(runs):
        for name, code in codes.items():
            samples[name].append(_time_import(code, env))
    return {
        name: (
            round(statistics.median(w for w, _ in values), 1),
            round(statistics.median(c for _, c in values), 1),
        )
        for name, values in samples.items()
    }


def _first_party_costs(roots: list[Node]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """agent_core modules by own time, and the third-party imports each one triggers first."""
    own: list[dict[str, Any]] = []
    triggered: list[dict[str, Any]] = []

    def visit(node: Node, owner: str | None) -> None:
        if node.name.split(".")[0] in FIRST_PARTY:
            own.append(
                {"module": node.name, "self_ms": node.self_us / 1000, "cumulative_ms": node.cumulative_us / 1000}
            )
            for child in node.children:
                visit(child, node.name)
        elif owner is not None and _is_third_party(node.name):
            triggered.append({"by": owner, "module": node.name, "cumulative_ms": node.cumulative_us / 1000})
        else:
            for child in node.children:
                visit(child, owner)

    for root in roots:
        visit(root, None)
    return own, triggered


def _median_rows(
    runs: list[list[dict[str, Any]]], keys: tuple[str, ...], values: tuple[str, ...]
) -> list[dict[str, Any]]:
    """Per row identity (`keys`), the median of each of `values` over several importtime runs."""
    grouped: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for rows in runs:
        for row in rows:
            grouped.setdefault(tuple(row[k] for k in keys), []).append(row)
    merged = [
        {
            **dict(zip(keys, ident, strict=True)),
            **{v: round(statistics.median(r[v] for r in rows), 1) for v in values},
        }
        for ident, rows in grouped.items()
    ]
    return sorted(merged, key=lambda r: -r[values[0]])


def run(runs: int = RUNS) -> dict[str, Any]:
    as_is = _env(None)
    roots = import_tree(as_is)
    modules = [n.name for n in _walk(roots)]
    third = list(dict.fromkeys(m for m in modules if _is_third_party(m)))
    tops = list(dict.fromkeys(m.split(".")[0] for m in third))
    powertools = "from aws_lambda_powertools import Logger, Metrics, Tracer"
    top_code = "\n".join([f"import {t}" for t in tops if t != "aws_lambda_powertools"] + [powertools])
    full_code = "import importlib\n" + "\n".join(
        f"try:\n    importlib.import_module({m!r})\nexcept Exception:\n    pass" for m in third
    )
    codes = {
        "handler": f"import {HANDLER}",
        "deps_top_level": top_code,
        "deps_full_graph": full_code,
        "openai": "import openai",  # not in the graph: OpenAiLlmClient imports it on the first request
    }

    results: dict[str, Any] = {"runs": runs, "third_party_top_level": tops, "third_party_modules": len(third)}
    cache = tempfile.mkdtemp(prefix="bench-pycache-")
    try:
        cached = _env(cache)
        for code in codes.values():  # prime the private bytecode cache
            _python(code, cached)
        modes = {"bytecode_cached": cached, "as_is": as_is}
        for mode, env in modes.items():
            medians = _medians(codes, env, runs)
            wall = {k: w for k, (w, _) in medians.items()}
            cpu = {k: c for k, (_, c) in medians.items()}
            results[mode] = {
                **{f"{k}_ms": v for k, v in wall.items()},
                **{f"{k}_cpu_ms": v for k, v in cpu.items()},
                "ratio_top_level": round(wall["handler"] / wall["deps_top_level"], 2),
                "ratio_full_graph": round(wall["handler"] / wall["deps_full_graph"], 2),
                "cpu_ratio_top_level": round(cpu["handler"] / cpu["deps_top_level"], 2),
                "cpu_ratio_full_graph": round(cpu["handler"] / cpu["deps_full_graph"], 2),
            }
        trees = [_first_party_costs(import_tree(cached)) for _ in range(IMPORTTIME_RUNS)]
        own = _median_rows([t[0] for t in trees], ("module",), ("self_ms", "cumulative_ms"))
        triggered = _median_rows([t[1] for t in trees], ("by", "module"), ("cumulative_ms",))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    results["first_party_self_top"] = own[:12]
    results["first_party_self_total_ms"] = round(sum(r["self_ms"] for r in own), 1)
    results["third_party_triggered_by_first_party"] = triggered[:12]
    results["meets_target"] = results["bytecode_cached"]["ratio_top_level"] <= TARGET_RATIO

    print(f"cold import, median of {runs} fresh processes (ms, interpreter start-up excluded; wall, CPU in brackets)")
    print("| bytecode | handler | deps, top-level | deps, full graph | ratio vs top-level | ratio vs full graph |")
    print("|---|---|---|---|---|---|")
    for mode in modes:
        r = results[mode]
        print(
            f"| {mode} | {r['handler_ms']} ({r['handler_cpu_ms']}) "
            f"| {r['deps_top_level_ms']} ({r['deps_top_level_cpu_ms']}) "
            f"| {r['deps_full_graph_ms']} ({r['deps_full_graph_cpu_ms']}) "
            f"| {r['ratio_top_level']} ({r['cpu_ratio_top_level']}) "
            f"| {r['ratio_full_graph']} ({r['cpu_ratio_full_graph']}) |"
        )
    for mode in modes:
        r = results[mode]
        print(f"`import openai` alone ({mode}): {r['openai_ms']} ({r['openai_cpu_ms']}) ms, in the handler's init")
    print(f"target ratio <= {TARGET_RATIO}; third-party top-level packages imported: {', '.join(tops)}")
    total = results["first_party_self_total_ms"]
    print(f"first-party modules, own import time (median of {IMPORTTIME_RUNS} -X importtime runs): total {total} ms")
    for r in own[:12]:
        print(f"  {r['self_ms']:7.1f} ms self  {r['cumulative_ms']:7.1f} ms cumulative  {r['module']}")
    print("third-party imports made first by a first-party module (cumulative):")
    for r in triggered[:12]:
        print(f"  {r['cumulative_ms']:7.1f} ms  {r['module']}  <- {r['by']}")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args()
    run(args.runs)


if __name__ == "__main__":
    main()
