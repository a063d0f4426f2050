"""head."""
