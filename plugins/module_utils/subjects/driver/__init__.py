"""The NVIDIA driver on the host and in containers, and its upgrade."""
