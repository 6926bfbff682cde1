"""Deleting a conversation completely, in an order a retry can always finish.

Objects first (data files, then the parts of its items the store keeps in S3), then the chat's items, its
META last: until the META is gone the chat is still found and listed, so a client retrying after any partial
failure deletes the rest. The META also carries the chat's user-level index entries (the user's chat list,
the idle-session index).
"""

from __future__ import annotations

from agent_core.store.base import ChatStore
from agent_core.store.blob import BlobStore
from agent_core.tools.data_path import chat_data_prefix


def chat_blob_prefixes(chat_id: str) -> tuple[str, ...]:
    """The object prefixes a chat owns besides its items' parts (the store deletes those with the items)."""
    return (chat_data_prefix(chat_id),)


async def delete_chat_completely(store: ChatStore, blobs: BlobStore | None, chat_id: str, user_id: str) -> bool:
    """Delete the caller's chat with everything it owns; False when it is not theirs (or already gone)."""
    if await store.get_chat(chat_id, user_id) is None:
        return False
    if blobs is not None:
        # Before any item: a still-valid signed link must not outlive the chat, and a failure here leaves
        # the chat whole, so the retry starts over.
        for prefix in chat_blob_prefixes(chat_id):
            await blobs.delete_prefix(prefix)
    return await store.delete_chat(chat_id, user_id)
