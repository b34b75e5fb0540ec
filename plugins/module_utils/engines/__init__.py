"""What runs the subjects: the audit, the tune, the fleet checks, the reports."""
