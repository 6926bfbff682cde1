"""A Response whose run was interrupted (its process died, runtime/interrupted.py): nothing will finish it.

Its stored status stays `in_progress` (the dead process never wrote its end), so it reads as what it is, from
its run: `failed`, with the run's `interrupted` error and its end time, like any failed Response. Nothing is
written: a run settled `interrupted` while it was in fact still alive may end after all and store its Response
as usual.
"""

from __future__ import annotations

from agent_core.domain.models import INTERRUPTED, RunStatus
from agent_core.store.base import TurnStore
from agent_core.store.responses import ACTIVE, ResponseRecord
from agent_core.wires.responses.encoder import failure_error


async def as_settled(turns: TurnStore, record: ResponseRecord) -> ResponseRecord:
    """`record`, or, when it is still active but its run was settled `interrupted`, that run's failure."""
    if record.status not in ACTIVE or record.run_id is None or record.chat_id is None:
        return record
    run = await turns.get_run(record.chat_id, record.run_id)
    if run is None or run.status != RunStatus.FAILED or run.error_code != INTERRUPTED:
        return record
    error = failure_error(INTERRUPTED, run.error_message or "")
    ended = run.ended_at // 1000 if run.ended_at is not None else record.response.get("completed_at")
    response = {**record.response, "status": "failed", "error": error, "completed_at": ended}
    return record.model_copy(update={"status": "failed", "response": response})
