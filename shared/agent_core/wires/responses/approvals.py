"""Approvals a client decides in its next request (`mcp_approval_response` on /v1/responses): the pending ones
of a stored response. Finding and deciding them is `wires/approval_answers.py`, shared with the other wires
that hand approvals over.
"""

from __future__ import annotations


def pending_approvals(output: list[dict[str, object]]) -> list[str]:
    """The ids of a response's `mcp_approval_request` items: the caller owes their decisions."""
    return [str(item["id"]) for item in output if item.get("type") == "mcp_approval_request"]
