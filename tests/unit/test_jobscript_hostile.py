"""Directives from hostile or careless scripts: whatever a ``#GPUTUI`` or ``#SBATCH``
line holds, reading it either gives options or refuses in one short line naming
the file and line; never a traceback, never an endless line, never a limit of
``inf``."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.common.jobscript import DirectiveError, parse_script

MESSAGE_MAX = 300

_OPTIONS = st.sampled_from(
    ["-g", "--gpus", "--time", "--name", "--after", "--after-ok", "--array", "--output",
     "--cwd", "--priority", "-t", "-G", "--gres", "--job-name", "--dependency", "-J"]
)  # fmt: skip
_VALUES = st.one_of(
    st.text(max_size=40),
    st.text(alphabet="0123456789", min_size=1, max_size=5000),
    st.builds(lambda n, u: n + u, st.text(alphabet="0123456789", min_size=300, max_size=400),
              st.sampled_from(["s", "m", "h", "d", ""])),
    st.builds(lambda n: f"gpu:{n}", st.text(alphabet="0123456789", min_size=1, max_size=5000)),
    st.builds(lambda n: f"afterok:{n}", st.text(alphabet="0123456789:", min_size=1, max_size=5000)),
)  # fmt: skip


@settings(max_examples=300)
@given(st.sampled_from(["#GPUTUI", "#SBATCH"]), _OPTIONS, _VALUES, st.booleans())
def test_any_directive_gives_options_or_one_short_line(
    head: str, option: str, value: str, eq: bool
) -> None:
    line = f"{head} {option}={value}" if eq else f"{head} {option} {value!r}"
    text = f"#!/bin/bash\n{line}\necho hi\n"
    try:
        script = parse_script(text, "train.sh")
    except DirectiveError as exc:
        message = str(exc)
        assert message.startswith("train.sh:2: "), message[:200]
        assert "\n" not in message and len(message) <= MESSAGE_MAX, message[:200]
        return
    limit = script.options.get("time")
    assert limit is None or (math.isfinite(limit) and limit > 0)
