"""The OpenAI Chat Completions wire: a stateless turn planned as the other wires are (`wires/turn.py`).

- `request.py`: the body, its rules, its messages as input items
- `encoder.py`: native run events -> `chat.completion.chunk` objects; the blocking `chat.completion`
- `execution.py`: the run, streamed or folded into one completion

The route is `api/routes/chat_completions.py`.
"""
