"""Loading, during Lambda init, the SDKs that every request of an LLM function uses.

Imported lazily elsewhere (submit and data never load them), these would otherwise land on the first
request; init runs before any user waits and with the init CPU burst. Only the configured providers'
adapters load (AGENT_LLM_PROVIDER and AGENT_LLM_FALLBACK): Bedrock's never imports openai.
"""

from __future__ import annotations

import importlib

from agent_core.config import Settings, get_settings

LLM_FUNCTION_MODULES = ("boto3", "botocore.client", "agent_core.store.dynamodb")
OPENAI_ADAPTER = "agent_core.llm.openai_client"  # the openai SDK: OpenAI-compatible endpoints and Azure
PROVIDER_MODULES: dict[str, tuple[str, ...]] = {
    "bedrock": ("agent_core.llm.bedrock_client",),
    "offline": (),
}


def warm_modules(settings: Settings) -> list[str]:
    """The modules to load at init: the common ones, then each configured provider's adapter once."""
    providers = [settings.effective_llm_provider, *(provider for provider, _ in settings.fallback_chain())]
    modules = list(LLM_FUNCTION_MODULES)
    for provider in providers:
        modules += [m for m in PROVIDER_MODULES.get(provider, (OPENAI_ADAPTER,)) if m not in modules]
    return modules


def load_llm_function_dependencies(settings: Settings | None = None) -> None:
    for name in warm_modules(settings or get_settings()):
        importlib.import_module(name)
