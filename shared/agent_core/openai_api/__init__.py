"""The OpenAI-compatible API: Responses, Conversations and Chat Completions, over the native runtime."""
