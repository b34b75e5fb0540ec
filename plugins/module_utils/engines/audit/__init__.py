"""The audit: the facts read once, the check registry, the run, capture."""
