"""What every layer uses: host file access under a root (hostfs), the command runner and command
outputs, bounded reads, argument specs and validation, the findings vocabulary, unit install, the
run lock, the snapshot store."""
