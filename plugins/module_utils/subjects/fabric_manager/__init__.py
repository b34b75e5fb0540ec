"""NVIDIA Fabric Manager."""
