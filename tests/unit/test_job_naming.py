"""A job is named after what it runs: the script, not ``python3``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputui.scheduler.policy.naming import MAX_NAME, job_name


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["python3", "train.py"], "train.py"),
        (["/usr/bin/python3.11", "-u", "src/train.py", "--lr", "3"], "train.py"),
        (["python", "-W", "ignore", "-X", "dev", "eval.py"], "eval.py"),
        (["python", "-m", "pkg.mod", "--x"], "pkg.mod"),
        (["python3", "-mtorch.distributed.run", "a.py"], "torch.distributed.run"),
        (["python3", "-c", "print(1)"], "python3"),
        (["python3"], "python3"),
        (["bash", "run.sh"], "run.sh"),
        (["bash", "-e", "-o", "pipefail", "./jobs/run.sh"], "run.sh"),
        (["sh", "-c", "echo hi"], "sh"),
        (["env", "CUDA_LAUNCH_BLOCKING=1", "-u", "X", "python3", "train.py"], "train.py"),
        (["nice", "-n", "10", "nohup", "python", "t.py"], "t.py"),
        (["uv", "run", "--with", "torch", "python", "train.py"], "train.py"),
        (["uv", "run", "train.py"], "train.py"),
        (["A=1", "B=2", "python3", "train.py"], "train.py"),
        (["torchrun", "--nproc-per-node", "8", "train.py"], "train.py"),
        (["./bin/sweep", "--lr", "3"], "sweep"),
        (["env", "A=1"], "env"),
        (["/"], "job"),
        (["python3", "dir/"], "dir"),
    ],
)
def test_a_job_is_named_after_its_script(argv: list[str], name: str) -> None:
    assert job_name(argv) == name


_WORD = st.text(min_size=0, max_size=300)
_COMMANDS = st.sampled_from(
    [["python3", "train.py"], ["python", "-m", "a.b"], ["bash", "x.sh"], ["./sweep"], ["make"]]
)
_WRAPPERS = st.sampled_from(
    [[], ["env", "A=1"], ["nice", "-n", "5"], ["uv", "run"], ["nohup"], ["time"], ["X=y"]]
)


@given(argv=st.lists(_WORD, min_size=1, max_size=12))
def test_any_command_gets_a_short_name_with_no_slash(argv: list[str]) -> None:
    name = job_name(argv)
    assert 1 <= len(name) <= MAX_NAME and "/" not in name and name.isprintable()


@given(command=_COMMANDS, wrappers=st.lists(_WRAPPERS, max_size=3), rest=st.lists(_WORD))
def test_wrappers_and_arguments_do_not_change_the_name(
    command: list[str], wrappers: list[list[str]], rest: list[str]
) -> None:
    plain = job_name(command)
    assert job_name([w for ws in wrappers for w in ws] + command + rest) == plain
