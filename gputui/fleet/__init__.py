"""Every GPU host kept connected: one helper process each, over SSH or as a local child."""

from __future__ import annotations
