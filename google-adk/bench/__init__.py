"""Benchmarks of dex-agents-google-adk: what durability costs."""
