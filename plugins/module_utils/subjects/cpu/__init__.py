"""CPU: frequency drivers, idle states, NUMA balancing."""
