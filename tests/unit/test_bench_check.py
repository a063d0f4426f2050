"""``make bench-check``'s judge (``bench/check.py``): one line per figure with its
target and ok/MISS, and exit 1 when any figure misses, is missing, or a benchmark
does not run. The benchmarks themselves are replaced by their reports here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

CHECK = Path(__file__).resolve().parents[2] / "bench" / "check.py"


def load() -> Any:
    spec = importlib.util.spec_from_file_location("bench_check", CHECK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


SCHED_OK = {
    "submit_per_s": 6000.0,
    "fsync_commits_per_s": 2500.0,
    "ratio_vs_fsync": 2.4,
    "ratio": 4.0,
    "submit_to_running_p99_s": 0.6,
    "preempt_to_sigterm_p99_s": 0.02,
    "cli_submit_ms": 100.0,
    "pass_ms": 30.0,
    "pass_ratio": 500.0,
    "array_submit_s": 0.2,
    "pass_arrays_ratio": 3.0,
}


def judge(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], report: Any
) -> tuple[int, list[str]]:
    check = load()
    monkeypatch.setattr(check, "run", lambda name, argv: report)
    monkeypatch.setattr(sys, "argv", ["check.py", "--only", "sched"])
    code = check.main()
    return code, capsys.readouterr().out.splitlines()


def test_all_met_is_exit_0_with_one_line_per_figure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = judge(monkeypatch, capsys, (SCHED_OK, ""))
    figures = [line for line in out if line.endswith((" ok", " MISS"))]
    assert code == 0 and len(figures) == 9 and all(line.endswith(" ok") for line in figures)
    assert "submissions / fsync commits" in out[0] and ">= 2x" in out[0]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("ratio_vs_fsync", 1.9),
        ("ratio", 2.9),
        ("pass_ms", 51.0),
        ("cli_submit_ms", None),
        ("array_submit_s", 1.5),
        ("pass_arrays_ratio", 0.9),
    ],
)
def test_a_miss_or_a_missing_figure_is_exit_1(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    key: str,
    value: float | None,
) -> None:
    report = {**SCHED_OK, key: value}
    code, out = judge(monkeypatch, capsys, (report, ""))
    assert code == 1
    assert sum(line.endswith(" MISS") for line in out[:-1]) == 1
    assert out[-1] == "bench-check: 1 MISS"


def test_a_benchmark_that_does_not_run_is_a_miss(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = judge(monkeypatch, capsys, (None, "exit 1: head did not start"))
    assert code == 1 and "did not run (exit 1: head did not start)" in out[0]
