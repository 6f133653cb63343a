"""Helpers for the devserver contract suite: Flow definitions, process control, and probes."""
