"""Kernel sysctl settings."""
