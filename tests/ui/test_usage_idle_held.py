"""The usage screen's totals line says how much of the energy cards held but idle drew
(``power.mode`` report or lock), at 80 columns; without it, nothing is added."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_usage_screen import console, open_usage
from ui_helpers import screen_text
from usage_fakes import fake_usage_head, usage_answer


def with_idle(args: dict[str, Any]) -> dict[str, Any]:
    """The head's answer with ``power.mode: report``: each key's held-but-idle kWh."""
    answer = usage_answer(args)
    for n, total in enumerate(answer["totals"]):
        total.update(idle_held_gpu_h=10.0, idle_held_kwh=2.5 * (n + 1), idle_held_cost=0.75)
    return {**answer, "power_mode": "report"}


async def test_the_totals_line_says_the_held_idle_kwh(tmp_path: Path) -> None:
    with fake_usage_head(tmp_path / "head.sock", answer=with_idle):
        app = console(tmp_path / "head.sock")
        async with app.run_test(size=(80, 24)) as pilot:
            await open_usage(pilot, app)
            totals = screen_text(app).splitlines()[1]
            assert "105.0 kWh (15.0 held idle)" in totals, totals  # 2.5 + 5 + 7.5
            assert len(totals) <= 80
