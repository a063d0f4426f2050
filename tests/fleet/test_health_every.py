"""``health_every_s`` from hosts.yaml reaches every helper as ``--health-every``."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gputui.config.models import Config
from gputui.fleet.fleet import Fleet
from gputui.fleet.link import helper_argv


def test_the_health_interval_is_a_helper_argument_after_the_interval() -> None:
    host = Config.model_validate({"hosts": [{"name": "h", "sim": "1xa10"}]}).resolved()[0]
    argv = helper_argv(host, 0.5, ("--jobs", "head0001"), 30.0)
    assert argv[:6] == ["--sim", "1xa10", "--interval", "0.5", "--health-every", "30.0"]
    assert argv[6:] == ["--jobs", "head0001"]
    assert "--health-every" not in helper_argv(host, 0.5)


@pytest.mark.parametrize("bad", [0.5, 3601, "often"])
def test_the_health_interval_is_range_checked(bad: object) -> None:
    with pytest.raises(ValidationError, match="health_every_s"):
        Config.model_validate({"health_every_s": bad})
    assert Config().health_every_s == 10.0
    assert Config.model_validate({"health_every_s": 1}).health_every_s == 1.0


async def test_the_fleet_starts_each_helper_with_the_configured_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = Config.model_validate(
        {"health_every_s": 2.5, "hosts": [{"name": "a", "sim": "1xa10", "local": True}]}
    )
    fleet = Fleet(config)
    await fleet.start()
    try:
        link = fleet._links["a"]
        started: list[list[str]] = []

        async def run_local(argv: list[str]) -> None:
            started.append(argv)

        monkeypatch.setattr(link, "_run_local", run_local)
        await link._connect_and_stream([])
        (argv,) = started
        assert argv[argv.index("--health-every") + 1] == "2.5"
    finally:
        await fleet.close()
