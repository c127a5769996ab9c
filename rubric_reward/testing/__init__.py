"""Helpers for tests that need external processes (e.g. a vLLM CPU server)."""
