"""Pydantic models shared by every layer."""
