"""Built-in tools shipped with the agent core."""
