"""Nvidia_peermem and the NVIDIA module settings."""
