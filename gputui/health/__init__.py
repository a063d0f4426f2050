"""Rules that turn readings into problems, shared by the console and the head."""
