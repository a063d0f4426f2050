"""Slurm as the scheduler: its commands run as the calling user, read into the head's
wire shapes (``backend.SlurmBackend``)."""
