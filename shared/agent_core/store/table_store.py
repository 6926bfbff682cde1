"""TableStore: every Store role on one table (DynamoDB, SQLite or in-memory), composed of the role modules.

| role | module | class |
|---|---|---|
| ChatStore: chats and messages | store/chat_table.py | ChatTable |
| TurnStore: a turn's begin and end | store/turn_table.py | TurnTable |
| TurnStore: runs, leases, cancellation | store/run_table.py | RunTable |
| WaitStore: frontend waits | store/wait_table.py | WaitTable |
| MemoryStore (MemoryReader): summaries, sessions, days, profiles | store/memory_hierarchy.py | HierarchyTable |

All share `TableRole` (store/table_role.py): the table, the spiller, the memory records and the messages of a span.
The composition root builds one TableStore and hands each consumer the role it uses (`container.RunDeps`).
"""

from __future__ import annotations

from agent_core.store.base import Store
from agent_core.store.chat_table import ChatTable
from agent_core.store.memory_hierarchy import HierarchyTable
from agent_core.store.turn_table import TurnTable
from agent_core.store.wait_table import WaitTable


class TableStore(ChatTable, TurnTable, WaitTable, HierarchyTable, Store):
    """Every role of the Store port over one table (its constructor is TableRole's: the table, the blob store)."""
