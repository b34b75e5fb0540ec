"""What the host is: procfs, system info, guest or node, failed readers."""
