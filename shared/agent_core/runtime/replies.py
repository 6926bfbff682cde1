"""The fixed replies the runtime writes itself (not the model), each in English and Chinese.

One rule picks the language: Chinese when the user's message holds a CJK ideograph
(`domain.text.has_cjk`), else English. The model answers in the user's language by its instructions;
these lines are the few the run writes without a model call, or asks the model to begin with.
"""

from __future__ import annotations

from agent_core.domain.text import has_cjk
from agent_core.memory.time_query import TimeRange


def filler_line(message: str) -> str:
    """The line a progressive answer streams before its first tool finishes."""
    return "好的，我来逐项查询。\n\n" if has_cjk(message) else "Let me look that up.\n\n"


def transition(message: str) -> str:
    """How a progressive answer's later parts begin (the model is asked to start with it)."""
    return "另外，" if has_cjk(message) else "Also, "


def unoffered_tools(message: str, names: list[str]) -> str:
    """The answer when the model asked only for tools this run does not offer."""
    listed = ", ".join(names)
    if has_cjk(message):
        return f"（模型想调用此处不可用的工具：{listed}。）"
    return f"(The model asked for tools that are not available here: {listed}.)"


def max_steps_reached(message: str, steps: int) -> str:
    """The answer when a tool loop used its `maxSteps` without a final answer."""
    if has_cjk(message):
        return f"（已达到最多 {steps} 步，仍未得到最终答案。请把问题拆小一些，或换一种问法。）"
    return f"(Stopped after {steps} steps without a final answer. Try a narrower question or split it up.)"


def nothing_found(message: str, span: TimeRange) -> str:
    """The answer to a question about past conversations when the range holds no records (no model call)."""
    if has_cjk(message):
        return f"我没有找到{span.phrase}（{span.label('至')}）的聊天记录。"
    return f"I found no conversations from {span.phrase} ({span.label()})."
