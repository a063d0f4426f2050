"""Submit scripts' directives and ``--array`` specs, as properties.

An option means the same on the command line, in a ``#GPUTUI`` line and in the
``#SBATCH`` form that maps to it; the command line wins over a directive; text that
is not a directive a person would write (control characters, unclosed quotes, a
flag we do not have, an overlong line) is refused in one line naming file and line,
and never raises anything else.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.cli import args as cli_args
from gputui.common import jobscript
from gputui.common.arrays import (
    MAX_TASKS,
    ArrayError,
    fold,
    folded_name,
    output_path,
    parse_array,
    task_ref,
)
from gputui.common.jobscript import DirectiveError, merged, parse_script, submit_kwargs

_NAME = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,19}", fullmatch=True)
"""A name or file name (one that starts with a dash reads as a flag anywhere)."""


@st.composite
def array_specs(draw: st.DrawFn) -> tuple[str, set[int], int | None]:
    """A spec and the tasks and throttle it stands for."""
    parts: list[str] = []
    tasks: set[int] = set()
    for _ in range(draw(st.integers(1, 4))):
        low = draw(st.integers(0, 500))
        kind = draw(st.sampled_from(("one", "range", "step")))
        if kind == "one":
            parts.append(str(low))
            tasks.add(low)
            continue
        high = draw(st.integers(low, low + 300))
        if kind == "range":
            parts.append(f"{low}-{high}")
            tasks.update(range(low, high + 1))
        else:
            step = draw(st.integers(1, 50))
            parts.append(f"{low}-{high}:{step}")
            tasks.update(range(low, high + 1, step))
    throttle = draw(st.none() | st.integers(1, 64))
    spec = ",".join(parts) + (f"%{throttle}" if throttle is not None else "")
    return spec, tasks, throttle


@st.composite
def job_options(draw: st.DrawFn) -> dict[str, Any]:
    """Options with their values, each as a person would give it (a subset)."""
    chosen: dict[str, Any] = {}
    if draw(st.booleans()):
        chosen["gpus"] = draw(st.integers(1, 64))
    if draw(st.booleans()):
        chosen["time"] = draw(st.integers(1, 100_000))  # minutes, as Slurm's --time N
    if draw(st.booleans()):
        chosen["name"] = draw(_NAME)
    if draw(st.booleans()):
        chosen["array"] = draw(array_specs())[0]
    if draw(st.booleans()):
        chosen["after_ok"] = draw(st.lists(st.integers(1, 10**6), min_size=1, max_size=4))
    if draw(st.booleans()):
        chosen["output"] = draw(_NAME) + draw(st.sampled_from(("", "-%j", "_%A_%a", ".%a.log")))
    return chosen


def _gputui_words(o: dict[str, Any]) -> list[str]:
    words: list[str] = []
    if "gpus" in o:
        words += ["-g", str(o["gpus"])]
    if "time" in o:
        words += ["--time", str(o["time"])]
    if "name" in o:
        words += ["--name", o["name"]]
    if "array" in o:
        words += ["--array", o["array"]]
    if "after_ok" in o:
        words += ["--after-ok", ",".join(map(str, o["after_ok"]))]
    if "output" in o:
        words += ["--output", o["output"]]
    return words


def _sbatch_lines(o: dict[str, Any], gres: bool) -> list[str]:
    lines: list[str] = []
    if "gpus" in o:
        lines.append(f"#SBATCH --gres=gpu:{o['gpus']}" if gres else f"#SBATCH --gpus={o['gpus']}")
    if "time" in o:
        lines.append(f"#SBATCH -t {o['time']}")
    if "name" in o:
        lines.append(f"#SBATCH --job-name={o['name']}")
    if "array" in o:
        lines.append(f"#SBATCH --array={o['array']}")
    if "after_ok" in o:
        lines.append("#SBATCH --dependency=afterok:" + ":".join(map(str, o["after_ok"])))
    if "output" in o:
        lines.append(f"#SBATCH -o {o['output']}")
    return lines


def _script(lines: list[str]) -> str:
    return "\n".join(["#!/bin/bash", *lines, "", "python train.py"]) + "\n"


def _cli(words: list[str]) -> dict[str, Any]:
    space = cli_args.parser().parse_args(["submit", *words, "train.sh"])
    return merged({}, {k: getattr(space, k) for k in jobscript.OPTIONS})


@settings(max_examples=300)
@given(job_options(), st.booleans(), st.booleans())
def test_an_option_means_the_same_on_the_command_line_in_gputui_and_sbatch_lines(
    o: dict[str, Any], one_line: bool, gres: bool
) -> None:
    words = _gputui_words(o)
    from_cli = _cli(words)
    if one_line:
        gputui = [f"#GPUTUI {shlex.join(words)}"] if words else []
    else:
        gputui = [f"#GPUTUI {shlex.join(words[i : i + 2])}" for i in range(0, len(words), 2)]
    from_gputui = parse_script(_script(gputui), "train.sh").options
    from_sbatch = parse_script(_script(_sbatch_lines(o, gres)), "train.sh").options
    assert from_cli == from_gputui == from_sbatch
    assert set(from_cli) == set(o)
    if "time" in o:
        assert from_cli["time"] == o["time"] * 60


@settings(max_examples=200)
@given(job_options(), job_options())
def test_the_command_line_overrides_directives(
    script_o: dict[str, Any], cli_o: dict[str, Any]
) -> None:
    directives = parse_script(_script(_sbatch_lines(script_o, gres=True)), "t.sh").options
    given_ = _cli(_gputui_words(cli_o))
    both = merged(directives, given_)
    for key, value in given_.items():
        assert both[key] == value
    for key in set(directives) - set(given_):
        assert both[key] == directives[key]


def test_a_later_directive_overrides_an_earlier_one_and_the_body_is_not_read() -> None:
    text = _script(["#SBATCH --gpus=2", "# a comment", "#GPUTUI -g 3 --name a"])
    text += "#GPUTUI -g 8\n"  # after the first command: not a directive any more
    assert parse_script(text, "t.sh").options == {"gpus": 3, "name": "a"}


def test_sbatch_options_with_no_meaning_here_are_named_once_each() -> None:
    text = _script(
        [
            "#SBATCH --mem=4G",
            "#SBATCH -N 1 --exclusive",
            "#SBATCH --mem=8G --gres=gpu:a100:2",
            "#SBATCH --partition gpu -c8",
        ]
    )
    script = parse_script(text, "t.sh")
    assert script.ignored == ["--mem", "--exclusive", "-N", "--partition", "-c"]
    assert script.options == {"gpus": 2}


_ONE_LINE = st.text(st.characters(blacklist_characters="\n"), max_size=80)
_CONTROL = st.sampled_from(["\x1b[2J", "\x00", "\x07", "\x1b]0;owned\x07", "\r", "\x7f", "\u202e"])


@settings(max_examples=300)
@given(_ONE_LINE, _CONTROL, st.sampled_from(("#GPUTUI", "#SBATCH")), st.integers(0, 80))
def test_control_characters_in_a_directive_are_refused_in_one_line(
    text: str, bad: str, head: str, at: int
) -> None:
    line = f"{head} {text[:at]}{bad}{text[at:]}"
    with pytest.raises(DirectiveError) as refused:
        parse_script(_script(["#GPUTUI -g 1", line]), "t.sh")
    message = str(refused.value)
    assert message.startswith("t.sh:3: ") and "\n" not in message
    assert message.isprintable()


@settings(max_examples=500)
@given(st.text(max_size=200), st.sampled_from(("#GPUTUI", "#SBATCH")))
def test_any_directive_text_is_read_or_refused_in_one_line(text: str, head: str) -> None:
    try:
        parse_script(_script([f"{head} {text}"]), "t.sh")
    except DirectiveError as exc:
        message = str(exc)
        assert message.startswith("t.sh:2: ") and "\n" not in message


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("#GPUTUI -g 100", "t.sh:2: #GPUTUI: argument -g/--gpus: must be 1 to 64 GPUs"),
        ('#GPUTUI --name "unclosed', "t.sh:2: #GPUTUI: No closing quotation"),
        ("#GPUTUI --rm -rf /", "t.sh:2: #GPUTUI: unrecognized arguments: --rm -rf /"),
        ("#GPUTUI python train.py", "t.sh:2: #GPUTUI: unrecognized arguments: python train.py"),
        ("#SBATCH --array=0-20000", "t.sh:2: #SBATCH: argument --array: more than 10000 tasks"),
        ("#SBATCH --dependency=afternotok:3", "t.sh:2: #SBATCH: --dependency=afternotok:3: only"),
        ("#SBATCH --gres=mps:100", "t.sh:2: #SBATCH: --gres=mps:100: only gpu:N"),
        ("#GPUTUI " + "x" * 5000, "t.sh:2: a directive over 4096 characters"),
    ],
)
def test_a_bad_directive_is_one_line_naming_its_line(line: str, says: str) -> None:
    with pytest.raises(DirectiveError) as refused:
        parse_script(_script([line]), "t.sh")
    assert str(refused.value).startswith(says)
    assert "\n" not in str(refused.value)


def test_a_file_that_is_not_a_script_is_refused(tmp_path: Path) -> None:
    cases = {
        "bin": (b"\x7fELF\x00\x01", "not a text file (a NUL byte)"),
        "noshebang": (b"python train.py\n", "no #! line"),
        "latin1": (b"#!/bin/sh\necho \xe9\n", "not UTF-8 text"),
        "big": (b"#!/bin/sh\n" + b"#" * jobscript.MAX_SCRIPT_BYTES, "over 256 KiB"),
    }
    for name, (data, says) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(DirectiveError, match=re.escape(says)):
            jobscript.load_script(str(path))


def test_the_script_is_read_once_a_later_edit_is_not_seen(tmp_path: Path) -> None:
    path = tmp_path / "train.sh"
    path.write_text("#!/bin/sh\n#GPUTUI -g 2\necho one\n")
    script = jobscript.load_script(str(path))
    path.write_text("#!/bin/sh\n#GPUTUI -g 4\necho two\n")
    assert script.text == "#!/bin/sh\n#GPUTUI -g 2\necho one\n" and script.options == {"gpus": 2}


# -- arrays ------------------------------------------------------------------------------


@settings(max_examples=300)
@given(array_specs())
def test_an_array_spec_stands_for_its_tasks_and_throttle(
    drawn: tuple[str, set[int], int | None],
) -> None:
    spec, tasks, throttle = drawn
    parsed = parse_array(spec)
    assert parsed.tasks == tuple(sorted(tasks)) and parsed.throttle == throttle


@pytest.mark.parametrize(
    "spec",
    ["", "5-1", "0-99:0", "1,,2", "0-31%0", "0-31%x", "-1", "0-1000001", "a-b", "0-10000", "1 2"],
)
def test_a_bad_array_spec_is_one_line(spec: str) -> None:
    with pytest.raises(ArrayError) as refused:
        parse_array(spec)
    assert str(refused.value).startswith("--array: ") and "\n" not in str(refused.value)


def test_an_array_is_capped() -> None:
    assert len(parse_array(f"0-{MAX_TASKS - 1}").tasks) == MAX_TASKS
    with pytest.raises(ArrayError, match="more than 10000"):
        parse_array(f"0-{MAX_TASKS - 1},{MAX_TASKS + 5}")
    with pytest.raises(ArrayError, match="longer than"):
        parse_array("1," * 600)


@settings(max_examples=200)
@given(st.sets(st.integers(0, 300), min_size=2, max_size=40), st.integers(1, 10**6))
def test_a_folded_name_reads_back_as_its_tasks(tasks: set[int], array_id: int) -> None:
    name = folded_name(array_id, sorted(tasks))
    head, _, body = name.partition("_[")
    assert head == str(array_id)
    if body.endswith(",...]"):
        return  # cut to fit a column
    assert set(parse_array(body.rstrip("]")).tasks) == tasks


def test_the_queue_folds_an_arrays_waiting_tasks_only() -> None:
    def task(i: int, state: str) -> dict[str, Any]:
        return {"id": 12 + i, "array_id": 12, "array_task": i, "state": state}

    jobs = [task(0, "completed"), task(1, "running"), *(task(i, "queued") for i in range(4, 32))]
    jobs.insert(2, {"id": 99, "state": "queued"})
    lines = fold(jobs)
    assert [(label, count) for label, _, count in lines] == [
        ("12_0", 1),
        ("12_1", 1),
        ("99", 1),
        ("12_[4-31]", 28),
    ]


def test_task_refs_and_output_patterns() -> None:
    assert task_ref("12") == (12, None) and task_ref("12_7") == (12, 7)
    assert task_ref("12_") is None and task_ref("x_1") is None and task_ref("1_2_3") is None
    assert output_path("o/%A_%a-%j.%%.log", 19, 12, 7) == "o/12_7-19.%.log"
    assert output_path("%A-%a-%x", 5, None, None) == "5-0-%x"


@given(st.sampled_from(("1g.10gb", "2g.20gb", "3g.40gb", "1c.2g.20gb", "1g.10gb+me")))
def test_mig_is_a_job_option_in_gputui_lines_and_on_the_command_line(profile: str) -> None:
    script = parse_script(_script([f"#GPUTUI -g 2 --mig {profile.upper()}"]), "t.sh")
    assert script.options == {"gpus": 2, "mig": profile}
    assert submit_kwargs(script.options) == {"gpus": 2, "mig": profile}
    assert _cli(["--mig", profile]) == {"mig": profile}
    assert merged(script.options, _cli(["--mig", "7g.80gb"]))["mig"] == "7g.80gb"


def test_a_bad_mig_profile_in_a_directive_is_one_line_naming_its_line() -> None:
    with pytest.raises(DirectiveError) as refused:
        parse_script(_script(["#GPUTUI -g 1", "#GPUTUI --mig big"]), "t.sh")
    assert str(refused.value) == (
        "t.sh:3: #GPUTUI: argument --mig: not a MIG profile: 'big' (e.g. 1g.10gb, 2g.20gb, 3g.40gb)"
    )


def test_directives_say_what_a_job_runs_in_and_the_command_line_adds_to_its_env() -> None:
    """``#GPUTUI --conda/--venv/--image/--runtime/--export/--env`` are the command
    line's options too; --env adds up, the command line's last (so it wins)."""
    script = parse_script(
        _script(
            [
                "#GPUTUI --image registry.example.com/team/train:1.0 --runtime podman",
                "#GPUTUI --env SEED=1 --env WANDB_MODE=offline --export HOME,LANG",
            ]
        ),
        "train.sh",
    )
    o = merged(script.options, _cli(["--env", "SEED=2", "--runtime", "docker"]))
    assert o["image"] == "registry.example.com/team/train:1.0"
    assert o["runtime"] == "docker" and o["export"] == "HOME,LANG"
    assert o["env"] == ["SEED=1", "WANDB_MODE=offline", "SEED=2"]
    assert parse_script(_script(["#GPUTUI --conda ml"]), "t.sh").options["conda"] == "ml"
