"""One folder per subject of the host: its readers, its checks (*_check.py), its writers and tune
parts; a subject imports platform and lower subjects."""
