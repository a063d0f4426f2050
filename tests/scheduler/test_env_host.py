"""``gputui env`` and ``gputui run`` on a machine whose hosts.yaml name is not its
hostname: a real head, the real CLI. A ``local: true`` host is this machine; a
machine that is none or several of the head's hosts gets one line naming them."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from headthread import LineClient, ThreadedHead

from gputui.cli import verbs


def test_env_and_run_find_the_local_host_by_its_hosts_yaml_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert socket.gethostname().split(".")[0] != "gpu-a"
    places = {"gpu-a": ("gpu-a", True)}
    with ThreadedHead(tmp_path, {"gpu-a": 2}, host_places=places) as th:
        with LineClient(th.sock) as c:
            claim = c.ok("claim", {"gpus": 1})["claim"]
            assert claim["host"] == "gpu-a"
            code = verbs.main(["--socket", str(th.sock), "env"])
            out = capsys.readouterr()
            assert code == 0, out.err
            uuid = claim["gpu_uuids"][0]
            assert out.out == f"export CUDA_VISIBLE_DEVICES={uuid}\n"
            code = verbs.main(["--socket", str(th.sock), "run", "--", "/bin/true"])
            out = capsys.readouterr()
            assert code == 0, out.err
            held = th.rows("SELECT host FROM claim WHERE id != ? ORDER BY id", claim["id"])
            assert held == [("gpu-a",)]
        assert th.problems == []


@pytest.mark.parametrize(
    ("places", "said"),
    [
        (
            {"gpu-a": ("10.255.0.1", False), "gpu-b": ("10.255.0.2", False)},
            "is none of the head's hosts (gpu-a, gpu-b); name one with --host",
        ),
        (
            {"gpu-a": (socket.gethostname(), False), "gpu-b": (socket.gethostname(), False)},
            "matches several of the head's hosts: gpu-a, gpu-b; name one with --host",
        ),
    ],
)
def test_a_machine_that_is_none_or_several_hosts_is_told_the_choices(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    places: dict[str, tuple[str, bool]],
    said: str,
) -> None:
    with ThreadedHead(tmp_path, {"gpu-a": 1, "gpu-b": 1}, host_places=places) as th:
        for verb in (["env"], ["run", "--", "/bin/true"]):
            code = verbs.main(["--socket", str(th.sock), *verb])
            out = capsys.readouterr()
            assert code != 0 and out.out == ""
            assert out.err.count("\n") == 1 and said in out.err, out.err
        assert th.problems == []
