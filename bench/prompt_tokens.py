"""Prompt size per turn as the history grows: 10, 100 and 1000 stored messages.

The history is built through the real pipeline, no shortcuts: one chat, turn after turn through
`run_blocking` on the in-memory table, compaction at its defaults (AGENT_MEMORY_WINDOW=20,
AGENT_MEMORY_COMPACT_AFTER=40), and the in-process queue's compaction jobs awaited after each turn
(`ctx.background.join()`). The FakeLlm answers chat requests with a ~45-token answer and summarisation
requests with a fixed ~90-token summary, and estimates every request's prompt with
`agent_core.llm.tokens.estimate_messages(request.messages)` (the tool schemas sent with chat requests
are not in that estimate; their size is constant and reported apart).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import dataclass
from typing import Any

from agent_core.context import build_context
from agent_core.llm.base import LlmRequest
from agent_core.llm.tokens import estimate_text
from agent_core.runtime.blocking import run_blocking
from agent_core.runtime.turn import TurnRequest
from agent_core.store.memory_table import MemoryTable
from bench.common import USER_MESSAGE, FakeLlm, after_turn, make_settings, open_chat, quiet_observability

CHECKPOINTS = (10, 100, 1000)


@dataclass
class TurnPrompt:
    history: int  # messages stored in the chat before the turn
    tokens: int
    messages: int


async def _grow(upto: int) -> tuple[list[TurnPrompt], list[int], int]:
    tools_tokens: list[int] = []

    def tools_size(request: LlmRequest) -> None:
        if request.purpose == "chat" and not tools_tokens:
            tools_tokens.append(estimate_text(json.dumps(request.tools)))

    llm = FakeLlm(estimate_tokens=True, on_call=tools_size)
    ctx = build_context(make_settings(), table=MemoryTable(), llm=llm)
    user = "bench-user"
    prompts: list[TurnPrompt] = []
    history = 0
    chat_id = ""
    while history <= upto:
        calls_before = len(llm.calls)
        if not chat_id:
            chat_id = await open_chat(ctx.deps, user)
        else:
            await run_blocking(ctx.deps, TurnRequest(user_id=user, message=USER_MESSAGE, chat_id=chat_id))
        await ctx.background.join()
        after_turn()
        chat = next(c for c in llm.calls[calls_before:] if c.purpose == "chat")
        assert chat.tokens is not None
        prompts.append(TurnPrompt(history, chat.tokens, chat.messages))
        history += 2  # the user message and the answer
    if ctx.background.failed:
        raise RuntimeError(f"{ctx.background.failed} compaction jobs failed")
    summaries = [c.tokens or 0 for c in llm.summarize_calls()]
    return prompts, summaries, tools_tokens[0]


def run(upto: int = max(CHECKPOINTS)) -> dict[str, Any]:
    quiet_observability()
    prompts, summaries, tools_tokens = asyncio.run(_grow(upto))
    by_history = {p.history: p for p in prompts}
    rows = []
    for n in (c for c in CHECKPOINTS if c <= upto):
        upto_n = [p for p in prompts if p.history <= n]
        rows.append(
            {
                "history_messages": n,
                "prompt_tokens": by_history[n].tokens,
                "prompt_messages": by_history[n].messages,
                "max_tokens_so_far": max(p.tokens for p in upto_n),
                "max_messages_so_far": max(p.messages for p in upto_n),
            }
        )
    result: dict[str, Any] = {
        "turns": len(prompts),
        "checkpoints": rows,
        "summarize_requests": len(summaries),
        "summarize_prompt_tokens_max": max(summaries, default=0),
        "tools_schema_tokens": tools_tokens,
    }
    print(f"prompt size per turn ({len(prompts)} turns in one chat, compaction at defaults, in-memory table)")
    print("| messages of history | prompt tokens (est.) | prompt messages | max tokens up to here | max messages |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['history_messages']} | {r['prompt_tokens']} | {r['prompt_messages']} "
            f"| {r['max_tokens_so_far']} | {r['max_messages_so_far']} |"
        )
    print(
        f"summarisation requests: {len(summaries)}, largest {result['summarize_prompt_tokens_max']} tokens; "
        f"tool schemas sent with each chat request: ~{tools_tokens} tokens (constant, not in the estimate)"
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--upto", type=int, default=max(CHECKPOINTS))
    args = parser.parse_args()
    run(args.upto)


if __name__ == "__main__":
    main()
