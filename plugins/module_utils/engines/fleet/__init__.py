"""The fleet checks over one report's documents."""
