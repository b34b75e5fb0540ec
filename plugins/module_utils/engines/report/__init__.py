"""Reports, metrics and the rollout summary: rendering and writing."""
