"""The saved fleet plan: each host's planned change set, the plan document, its files."""
