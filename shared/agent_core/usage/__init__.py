"""Usage: the per-user ledger of tokens, runs, tool calls and estimated cost, and the budgets and rate limit
checked before the model is called (all on the one table, through the table port)."""
