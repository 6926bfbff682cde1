"""The OpenAI-compatible API: Responses, Conversations and Chat Completions, over the native runtime.

It depends on the runtime as `api` does; the runtime never imports it (the worker's handler for background
responses is wired in `context.py`, which also builds the one `ResponseStore`).

- `request.py`: the Responses request body, its parameter rules, its input items as chat messages
- `items.py`: chat messages as conversation items; the API's cursor-paged lists
- `encoder.py`: native run events -> Responses stream events; a stored Response replayed as events
- `aggregate.py`: the Response object, folded from those events (blocking answers, storage, retrieval)
- `plan.py`: a Responses request as a planned turn (agent, chat, input, request-scoped deps), then the turn
- `execution.py`: streaming, blocking and background runs; the Response saved at the end
- `client_tools.py`: the client's function tools, the agent's tools and LLM options for a request
- `client_turn.py`: a UI wire's turn (AG-UI, Vercel AI SDK) in a chat the client names, planned as above
- `store.py`: stored Responses and OpenAI conversation metadata (`ResponseStore`)
- `chat_completions_request.py`, `chat_completions_encoder.py`, `chat_completions_execution.py`: Chat
  Completions as a stateless Responses request: its body, its chunks, its run
- `routes/`: `/v1/responses` and `/v1/models`, `/v1/conversations`, `/v1/chat/completions` (stream function)
"""
