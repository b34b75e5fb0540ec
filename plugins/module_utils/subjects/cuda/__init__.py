"""The CUDA probe, its measured tune parts, CUDA inside containers."""
