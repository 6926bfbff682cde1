"""agent_core: the shared Lambda layer of the serverless LLM agent backend."""

__version__ = "0.1.0"
