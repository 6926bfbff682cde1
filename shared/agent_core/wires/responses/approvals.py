"""Approvals a client decides in its next request (`mcp_approval_response` on /v1/responses): the pending ones
of a stored response; finding and deciding them is shared with the other wires that hand approvals over
(`wires/approval_answers.py`).
"""

from __future__ import annotations

from agent_core.wires.approval_answers import Found, check_answered, decide, find

__all__ = ["Found", "check_answered", "decide", "find", "pending_approvals"]


def pending_approvals(output: list[dict[str, object]]) -> list[str]:
    """The ids of a response's `mcp_approval_request` items: the caller owes their decisions."""
    return [str(item["id"]) for item in output if item.get("type") == "mcp_approval_request"]
