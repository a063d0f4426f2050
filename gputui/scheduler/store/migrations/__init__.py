"""Alembic migrations of the head's database (applied on start by ``engine.upgrade``)."""
