"""The host-side programs that run the engines without Ansible (the scheduled audit) and their
installers."""
