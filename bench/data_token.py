"""Data-link tokens (HS256 JWTs made with PyJWT): link length, sign / verify time, PyJWT's first-use import.

`python -m bench.data_token`: the token and root-relative link for a generated chat id and three file names;
the median time of 2,000 signatures and 2,000 verifications (one process, warm); the wall time of
`import jwt` in 5 fresh interpreters (what the first signature or check of a process pays: it loads
`cryptography`), against an interpreter that imports nothing.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from typing import Any

from agent_core.domain.ids import new_chat_id
from agent_core.tools.data_links import data_link
from agent_core.tools.data_token import sign_data_token, verify_data_token
from bench.common import machine

KEY = "k" * 64  # the deployed key's length (Secrets Manager, 64 letters and digits)
NAMES = ["report.csv", "charts/q1-revenue.png", "exports/customers-2026-11-full-extract.xlsx"]


def _median_us(fn: Any, rounds: int = 2000) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e6)
    return statistics.median(samples)


def _import_ms(code: str, runs: int = 5) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def run() -> dict[str, Any]:
    chat = new_chat_id()
    now = time.time()
    lengths = []
    for name in NAMES:
        file = f"{chat}/{name}"
        token = sign_data_token(KEY, chat, file, 3600, now)
        lengths.append({"file": file, "token": len(token), "link": len(data_link(file, token))})
    file = f"{chat}/{NAMES[0]}"
    token = sign_data_token(KEY, chat, file, 3600, now)
    result = {
        "machine": machine(),
        "lengths": lengths,
        "sign_us_p50": round(_median_us(lambda: sign_data_token(KEY, chat, file, 3600, now)), 1),
        "verify_us_p50": round(_median_us(lambda: verify_data_token(KEY, token, chat, file, now)), 1),
        "python_start_ms": round(_import_ms("pass"), 1),
        "python_start_and_import_jwt_ms": round(_import_ms("import jwt"), 1),
    }
    for row in lengths:
        print(f"{row['file']}: token {row['token']} chars, link {row['link']} chars")
    print(f"sign p50 {result['sign_us_p50']} us, verify p50 {result['verify_us_p50']} us")
    print(
        f"python -c pass: {result['python_start_ms']} ms; python -c 'import jwt': "
        f"{result['python_start_and_import_jwt_ms']} ms"
    )
    return result


if __name__ == "__main__":
    run()
