"""SSH to every GPU host: one connection and one helper process each."""

from __future__ import annotations
