"""Run every benchmark and print a markdown summary (`make bench`); it writes no files."""

from __future__ import annotations

import datetime
import subprocess
import time
from typing import Any

from bench import (
    cold_import,
    ddb_calls,
    embedded_store,
    jobs_scale,
    memory_recall,
    orchestration,
    prompt_tokens,
    responses_encoder,
    serve_http,
    stream_latency,
    submit_roundtrip,
    turn_latency,
    wire_encoders,
    wire_first_byte,
)
from bench.common import machine


def _nproc() -> str:
    try:
        return subprocess.run(["nproc"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return machine()["cpus"]


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"


def summary_rows(results: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    rows: list[tuple[str, str, str, str]] = []
    lat = results["turn_latency"]
    for key in ("memory", "sqlite", "moto", "moto_shared"):
        r = lat[key]
        rows.append(
            (
                f"request -> first LLM call, {r['table']}",
                f"p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms ({r['turns']} turns)",
                f"p50 < {r['target_p50_ms']:g} ms",
                _yes(r["meets_target"]),
            )
        )
    ddb = results["ddb_calls"]
    worst = ddb["worst"]
    plain = ddb["plain_patterns"][0]
    rows.append(
        (
            "DynamoDB calls per plain turn (moto)",
            f"before: {' + '.join(plain['before'])}; after: {' + '.join(plain['after'])}",
            "<= 2 reads + 1 write before, <= 2 writes after",
            _yes(ddb["meets_target"])
            + f" ({worst['reads_before']}R+{worst['writes_before']}W / {worst['writes_after']}W)",
        )
    )
    tokens = results["prompt_tokens"]
    points = ", ".join(f"{c['history_messages']}: {c['prompt_tokens']}" for c in tokens["checkpoints"])
    peak = max(c["max_tokens_so_far"] for c in tokens["checkpoints"])
    rows.append(("prompt tokens by messages of history", f"{points} (max {peak})", "flat", "see table"))
    cold = results["cold_import"]
    for mode in ("bytecode_cached", "as_is"):
        c = cold[mode]
        rows.append(
            (
                f"cold import of functions.chat.handler ({mode})",
                f"{c['handler_ms']} ms vs deps {c['deps_top_level_ms']} ms (top-level) / "
                f"{c['deps_full_graph_ms']} ms (full graph): x{c['ratio_top_level']} / x{c['ratio_full_graph']}",
                "<= x1.2",
                f"{_yes(c['ratio_top_level'] <= 1.2)} / {_yes(c['ratio_full_graph'] <= 1.2)}",
            )
        )
    rows.extend(embedded_rows(results["embedded_store"]))
    served = results["serve_http"]
    rows.append(
        (
            "plain turn p50: over HTTP through `agent-core serve` vs in-process (SQLite both)",
            f"{served['http']['turn_p50_ms']} vs {served['in_process']['turn_p50_ms']} ms (x{served['ratio']})",
            "<= x1.5",
            _yes(served["meets_target"]),
        )
    )
    return rows


def embedded_rows(emb: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """The embedded (SQLite) local server against the in-memory one, same HTTP path, one run."""
    plain, met = emb["plain"], emb["meets_target"]
    m, e = plain["memory"], plain["embedded"]
    load = emb["load_before_restart"]["embedded"], emb["load_after_restart"]["embedded"]
    return [
        (
            "local server, plain streamed turn p50: embedded vs memory",
            f"{e['turn_p50_ms']} vs {m['turn_p50_ms']} ms (x{plain['turn_ratio']}); first text "
            f"{e['first_text_p50_ms']} vs {m['first_text_p50_ms']} ms (x{plain['first_text_ratio']})",
            "<= x1.5",
            f"{_yes(met['turn_ratio<=1.5'])} / {_yes(met['first_text_ratio<=1.5'])}",
        ),
        (
            f"local server RSS after {e['turns']} turns, embedded",
            f"{e['rss_mb'][-1][1]} MB; +{plain['embedded_rss_growth_200_to_end_mb']} MB from turn 200",
            "< 250 MB, flat",
            f"{_yes(met['rss<250MB'])} / {_yes(met['rss_flat_200_to_end(<25MB)'])}",
        ),
        (
            "50 chats x 3 turns at once, embedded, before / after a restart",
            " / ".join(f"{x['errors']} errors, {x['lost']} lost, {x['duplicated']} duplicated" for x in load),
            "0 / 0 / 0",
            _yes(met["load_0_errors_lost_duplicated"]),
        ),
        (
            "restart: chats and messages read back, embedded",
            f"{emb['restart']['embedded']['chats_after']} chats, {emb['restart']['embedded']['messages_after']} "
            "messages, identical",
            "everything",
            _yes(met["restart_keeps_everything"]),
        ),
    ]


def run() -> dict[str, Any]:
    started = time.perf_counter()
    results: dict[str, Any] = {}
    for name, module in (
        ("turn_latency", turn_latency),
        ("ddb_calls", ddb_calls),
        ("prompt_tokens", prompt_tokens),
        ("cold_import", cold_import),
        ("stream_latency", stream_latency),
        ("submit_roundtrip", submit_roundtrip),
        ("orchestration", orchestration),
        ("memory_recall", memory_recall),
        ("responses_encoder", responses_encoder),
        ("wire_encoders", wire_encoders),
        ("wire_first_byte", wire_first_byte),
        ("jobs_scale", jobs_scale),
        ("embedded_store", embedded_store),
        ("serve_http", serve_http),
    ):
        print(f"\n## {name}\n")
        results[name] = module.run()
    m = machine()
    print("\n## summary\n")
    print(
        f"{datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}, nproc {_nproc()}, "
        f"Python {m['python']}, {m['platform']}; {time.perf_counter() - started:.0f} s in all\n"
    )
    print("| figure | result | target | met |")
    print("|---|---|---|---|")
    for row in summary_rows(results):
        print("| " + " | ".join(row) + " |")
    return results


if __name__ == "__main__":
    run()
