"""The tune: the part registry, the loop, the snapshot, the boot program."""
