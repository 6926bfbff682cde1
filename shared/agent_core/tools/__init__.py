"""Tools: registry, governance, built-ins."""
