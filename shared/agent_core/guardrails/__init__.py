"""Guardrails: per-agent checks of the user's message, the streamed answer, tool arguments and tool results.

`policy` is the agent definition's `guardrails` block, `detectors` the offline built-in adapter, `bedrock` the
Amazon Bedrock ApplyGuardrail adapter, `guard` one agent's checks (block or mask), `holdback` the streamed
answer's hold-back window. docs/guardrails.md describes them.
"""
