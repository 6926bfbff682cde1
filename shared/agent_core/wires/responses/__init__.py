"""The OpenAI Responses wire (with the Conversations items it lists), over the native runtime.

- `request.py`: the Responses request body, its parameter rules, its input items as chat messages
- `items.py`: chat messages as conversation items; the API's cursor-paged lists
- `encoder.py`: native run events -> Responses stream events; a stored Response replayed as events
- `aggregate.py`: the Response object, folded from those events (blocking answers, storage, retrieval)
- `plan.py`: a Responses request as a planned turn (its checks, then `wires/turn.py`)
- `execution.py`: streaming, blocking and background runs; the Response saved at the end
- `idempotency.py`: `Idempotency-Key` on create

Stored Responses are `store/responses.py`; the routes are `api/routes/responses.py`, `openai_conversations.py`.
"""
