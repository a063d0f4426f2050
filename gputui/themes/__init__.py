"""Colour themes shipped with gputui (YAML files, one theme each)."""
