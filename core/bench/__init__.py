"""Benchmarks of the session Flow: scripts that print figures, never timed tests."""
