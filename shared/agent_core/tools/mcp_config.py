"""MCP server declarations in agent definitions (streamable HTTP or stdio)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, model_validator

SERVER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,30}$")


class McpServerConfig(BaseModel):
    """`{name, url, headers}` for streamable HTTP, or `{name, command, args, env}` for stdio.

    Values may hold `${secret:NAME}`: resolved from Secrets Manager in Lambda, the environment locally.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(pattern=SERVER_NAME.pattern)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.url is None) == (self.command is None):
            raise ValueError("give either url (streamable HTTP) or command (stdio), not both or neither")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("url must be http(s)")
        return self

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"
