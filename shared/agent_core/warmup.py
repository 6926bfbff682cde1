"""Loading, during Lambda init, the SDKs that every request of an LLM function uses.

Imported lazily elsewhere (submit and data never load them), these would otherwise land on the first
request; init runs before any user waits and with the init CPU burst.
"""

from __future__ import annotations

import importlib

LLM_FUNCTION_MODULES = ("boto3", "botocore.client", "agent_core.llm.openai_client", "agent_core.store.dynamodb")


def load_llm_function_dependencies() -> None:
    for name in LLM_FUNCTION_MODULES:
        importlib.import_module(name)
