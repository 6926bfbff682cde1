"""The OpenAI-compatible routes (stream function): /v1/responses, /v1/conversations, /v1/chat/completions."""
