"""NVLink state and errors."""
