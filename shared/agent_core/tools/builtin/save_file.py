"""Built-in ``save_file``: store a small file in the conversation's data folder and link to it."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_core.tools.base import Tool, ToolContext, ToolFailure
from agent_core.tools.data_links import DataLinks
from agent_core.tools.data_path import InvalidPath, check_chat_id, data_file, data_key, normalize_data_name

MAX_FILE_BYTES = 1024 * 1024
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MediaType = Literal["text/plain", "text/csv", "application/json", "image/png"]
_STORED_TYPES = {
    "text/plain": "text/plain; charset=utf-8",
    "text/csv": "text/csv; charset=utf-8",
    "application/json": "application/json",
    "image/png": "image/png",
}
_DATA_URL = re.compile(r"^data:image/png;base64,", re.IGNORECASE)
_SPACE = re.compile(r"\s+")


class SaveFileArgs(BaseModel):
    """Arguments of ``save_file``."""

    model_config = ConfigDict(populate_by_name=True)

    name: str = Field(..., description="File name, e.g. report.csv or charts/q1.png (letters, digits, . _ -).")
    content: str = Field(..., description="The file content: text as is; for image/png, base64 of the PNG bytes.")
    media_type: MediaType = Field("text/plain", alias="mediaType", description="The file's media type.")


def _bad(message: str) -> ToolFailure:
    """An invalid-arguments failure."""
    return ToolFailure("error", "invalid_arguments", message)


def _png_bytes(content: str) -> bytes:
    """The PNG bytes of base64 content (a `data:image/png;base64,` prefix and whitespace allowed)."""
    text = _SPACE.sub("", _DATA_URL.sub("", content.strip()))
    if len(text) > (MAX_FILE_BYTES * 4) // 3 + 4:
        raise _bad(f"file exceeds {MAX_FILE_BYTES} bytes")
    try:
        body = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _bad("image/png content must be base64") from exc
    if not body.startswith(PNG_SIGNATURE):
        raise _bad("content is not a PNG image")
    return body


def encode_content(content: str, media_type: str) -> bytes:
    """The bytes to store for `content` of `media_type`, or an invalid-arguments failure."""
    if media_type == "image/png":
        body = _png_bytes(content)
    else:
        if media_type == "application/json":
            try:
                json.loads(content)
            except ValueError as exc:
                raise _bad("application/json content must be valid JSON") from exc
        body = content.encode("utf-8")
    if len(body) > MAX_FILE_BYTES:
        raise _bad(f"file exceeds {MAX_FILE_BYTES} bytes")
    return body


class SaveFileTool(Tool):
    name = "save_file"
    description = (
        "Save a small file (text, CSV, JSON or a base64 PNG) in this conversation and get a link to it "
        "that works in Markdown (e.g. ![chart](url) or [report](url))."
    )
    args_model = SaveFileArgs
    permissions = frozenset({"data:write"})
    # An explicit command at the start of a sentence: "save this as notes.txt: <content>" / "保存为 a.txt：<内容>".
    quick_match = re.compile(
        r"(?:^|(?<=[.?!。？！\n]))\s*(?:please\s+|请)?"
        r"(?:(?:save|store|write)\s+(?:(?:this|that|it|the\s+following|these\s+notes)\s+)?(?:as|to|into|in)\s+"
        r"|(?:把|将)?(?:这|这些|以下|下面)?(?:内容|文字|笔记)?(?:保存|存)(?:为|成|到)\s*)"
        r"(?P<name>[\w-]+\.(?:csv|txt|json))\s*[:：]",
        re.IGNORECASE,
    )

    def quick_args(self, message: str, match: re.Match[str], ctx_timezone: str) -> dict[str, Any]:
        """The text after the command's colon is the content."""
        name = match.group("name")
        content = message[match.end() :].strip() or message
        extension = name.rsplit(".", 1)[-1].lower()
        media_type = {"csv": "text/csv", "json": "application/json"}.get(extension, "text/plain")
        if media_type == "application/json":
            content = json.dumps({"text": content}, ensure_ascii=False)
        return {"name": name, "content": content, "mediaType": media_type}

    async def run(self, args: Any, ctx: ToolContext) -> Any:
        assert isinstance(args, SaveFileArgs)
        if ctx.blobs is None:
            raise ToolFailure("error", "unavailable", "file storage is not available")
        try:
            chat_id = check_chat_id(ctx.conversation_id)
            name = normalize_data_name(args.name)
        except InvalidPath as exc:
            raise _bad(f"invalid file name: {exc.message}") from exc
        body = encode_content(args.content, args.media_type)
        await ctx.blobs.put(data_key(chat_id, name), body, _STORED_TYPES[args.media_type])
        file = data_file(chat_id, name)
        # Signed on the wall clock (X-Agent-Now never reaches link expiry), and again whenever the result is read
        # back (replay, listings): `file` is the reference the link is re-signed from.
        links = ctx.links or DataLinks(ctx.settings)
        return {
            "file": file,
            "url": links.link(chat_id, file, ctx.public_base_url or ctx.settings.public_base_url.rstrip("/")),
            "mediaType": args.media_type,
            "size": len(body),
        }
