"""Orchestration strategies: function calling, ReAct, direct answer, chain (intent -> branch -> enhance).

Each is written against `runtime.run_protocol.AgentRun`; the router (`runtime/router.py`) picks one.
"""
