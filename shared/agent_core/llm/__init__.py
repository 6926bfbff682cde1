"""LLM port, adapters and token estimates."""
