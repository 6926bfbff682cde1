"""`${secret:NAME}` placeholders in MCP server declarations: Secrets Manager in Lambda, the environment locally."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from agent_core.config import Settings
from agent_core.tools.mcp_config import McpServerConfig

SECRET_REF = re.compile(r"\$\{secret:([A-Za-z0-9_./+=@-]+)\}")

SecretReader = Callable[[str], str]


class McpSecretError(ValueError):
    """A `${secret:NAME}` that cannot be resolved; the message names the server and the secret."""

    def __init__(self, server: str, secret: str, detail: str = "is not set") -> None:
        super().__init__(f"MCP server {server}: secret {secret!r} {detail}")
        self.server = server
        self.secret = secret


def secret_reader(settings: Settings, env: Mapping[str, str]) -> SecretReader:
    """Where secret values come from: Secrets Manager in Lambda, else the injected environment."""
    if settings.in_lambda:
        from agent_core.secrets import read_secret

        return read_secret

    def from_env(name: str) -> str:
        value = env.get(name)
        if value is None:
            raise KeyError(name)
        return value

    return from_env


def resolve_secrets(value: str, settings: Settings, env: Mapping[str, str] | None = None, *, server: str = "") -> str:
    """`value` with each `${secret:NAME}` replaced; raises McpSecretError naming the secret when one is missing."""
    if "${secret:" not in value:
        return value
    read = secret_reader(settings, env or {})

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        try:
            return read(name)
        except KeyError:
            raise McpSecretError(server or "?", name) from None
        except Exception as exc:  # Secrets Manager: not found, denied, unusable value
            raise McpSecretError(server or "?", name, f"cannot be read ({type(exc).__name__})") from exc

    return SECRET_REF.sub(substitute, value)


def resolve_server(
    config: McpServerConfig, settings: Settings, env: Mapping[str, str] | None = None
) -> McpServerConfig:
    """A copy of `config` with secrets resolved in url, header values, args and env values."""

    def r(value: str) -> str:
        return resolve_secrets(value, settings, env, server=config.name)

    return config.model_copy(
        update={
            "url": r(config.url) if config.url else config.url,
            "headers": {key: r(value) for key, value in config.headers.items()},
            "args": [r(arg) for arg in config.args],
            "env": {key: r(value) for key, value in config.env.items()},
        }
    )
