"""GPU and host health: nvidia-smi, the kernel log, XIDs, EDAC."""
