"""The wires: one package per protocol a client speaks, each an encoder of the run's typed events.

`encoder` holds what every wire shares (the `WireEncoder` protocol, the open-call bookkeeping, the streaming
loop); `turn` plans a turn from a client's input items for every wire that takes them. The HTTP routes
(`agent_core.api.routes`) sit above the wires; the runtime below them. A wire never imports `api`.
"""
