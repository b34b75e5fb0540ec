"""The /dev nodes GPU containers bind, and their boot-time unit."""
