"""LXC container configs and their GPU device rules."""
