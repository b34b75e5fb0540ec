"""Kernels, the kernel command line, boot entries, initramfs."""
