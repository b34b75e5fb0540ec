"""GPUs passed to VMs: VM configs, vfio, verification."""
