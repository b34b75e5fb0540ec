"""GPU NUMA placement of containers."""
