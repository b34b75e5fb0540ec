"""DKMS modules and their builds."""
