"""Runnable examples of dex-agents-google-adk."""
