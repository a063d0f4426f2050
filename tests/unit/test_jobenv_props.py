"""Properties of what a job runs in (``gputui.common.jobenv``, and the helper's own
copy in ``gputui.remote.containers``): names and images checked, ``--env`` and
``--export`` taken as Slurm takes them, limits kept, and a runtime's argv that carries
no value of the environment and every GPU by its UUID."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from gputui.common import jobenv
from gputui.remote import containers
from gputui.remote.signals import RequestError

SHELL_META = set(" \t\n;&|<>()$`\\\"'*?[]{}!#~=,%")
names = st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,20}\Z")
values = st.text(
    st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=40
)
environs = st.dictionaries(names, values, max_size=12)
uuids = st.uuids().map(lambda u: f"GPU-{u}")


@given(st.text(max_size=600))
def test_an_accepted_image_has_no_whitespace_metacharacter_or_leading_dash(text: str) -> None:
    try:
        image = jobenv.check_image(text)
    except jobenv.JobEnvError as exc:
        assert "\n" not in str(exc)
        with pytest.raises(RequestError):  # the helper refuses it too
            containers.check_image(text)
        return
    assert image == text == containers.check_image(text)
    assert not SHELL_META & set(image) and not image.startswith("-")
    assert 1 <= len(image) <= jobenv.IMAGE_MAX and image.isascii()


@given(st.text(max_size=80))
def test_head_and_helper_agree_on_every_conda_name_and_venv_path(text: str) -> None:
    for head_check, helper_check in (
        (jobenv.check_conda, containers.check_conda),
        (
            lambda v: jobenv.check_env_path(v, "venv"),
            lambda v: containers.check_env_path(v, "venv"),
        ),
    ):
        try:
            ours = head_check(text)
        except jobenv.JobEnvError:
            with pytest.raises(RequestError):
                helper_check(text)
            continue
        assert helper_check(text) == ours
        assert ":" not in ours and not ours.startswith("-")  # safe on PATH, never an option
        assert all(c.isprintable() for c in ours)


@given(environ=environs, pairs=st.lists(st.tuples(names, values), max_size=6))
def test_export_none_takes_only_the_env_pairs(
    environ: dict[str, str], pairs: list[tuple[str, str]]
) -> None:
    pairs = [(k, v) for k, v in pairs if k not in jobenv.RESERVED_ENV]
    got = jobenv.job_environment(jobenv.parse_export("NONE"), pairs, environ, jobenv.RESERVED_ENV)
    assert got == dict(pairs)


@given(environ=environs, pairs=st.lists(st.tuples(names, values), max_size=6))
def test_export_all_takes_the_environment_then_the_pairs_win(
    environ: dict[str, str], pairs: list[tuple[str, str]]
) -> None:
    pairs = [(k, v) for k, v in pairs if k not in jobenv.RESERVED_ENV]
    environ = {**environ, "CUDA_VISIBLE_DEVICES": "0", "BASH_FUNC_x%%": "() { :; }"}
    got = jobenv.job_environment(jobenv.parse_export("ALL"), pairs, environ, jobenv.RESERVED_ENV)
    expected = {k: v for k, v in environ.items() if k.isidentifier() and k.isascii()}
    expected.pop("CUDA_VISIBLE_DEVICES")
    expected.update(pairs)
    assert got == expected


@given(environ=environs, chosen=st.lists(names, min_size=1, max_size=5))
def test_export_names_take_those_set_and_leave_out_the_rest(
    environ: dict[str, str], chosen: list[str]
) -> None:
    chosen = [n for n in chosen if n not in jobenv.RESERVED_ENV]
    assume(chosen)
    export = jobenv.parse_export(",".join(chosen))
    assert export == jobenv.Export(all=False, names=tuple(chosen))
    got = jobenv.job_environment(export, [], environ, jobenv.RESERVED_ENV)
    assert got == {n: environ[n] for n in chosen if n in environ}


@given(st.text(max_size=40))
def test_any_export_text_is_a_choice_or_one_line(text: str) -> None:
    try:
        export = jobenv.parse_export(text)
    except jobenv.JobEnvError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("--export")
        return
    assert all(jobenv.check_env_name(n) == n for n in export.names)


@given(st.text(max_size=60))
def test_an_env_pair_is_a_checked_name_and_the_value_as_given(text: str) -> None:
    try:
        name, value = jobenv.env_pair(text)
    except jobenv.JobEnvError as exc:
        assert "\n" not in str(exc)
        return
    assert f"{name}={value}" == text and name.isidentifier()


def test_an_environment_over_the_limits_is_one_line() -> None:
    big = {f"V{i}": "x" for i in range(jobenv.ENV_MAX_VARS + 1)}
    with pytest.raises(
        jobenv.JobEnvError, match=r"^--export=ALL: 257 variables .* \(--export=KEY1,KEY2\)$"
    ):
        jobenv.job_environment(jobenv.parse_export("ALL"), [], big, jobenv.RESERVED_ENV)
    huge = [("BIG", "x" * jobenv.ENV_MAX_BYTES)]
    with pytest.raises(jobenv.JobEnvError, match="over a job's"):
        jobenv.job_environment(jobenv.Export(), huge, {}, jobenv.RESERVED_ENV)


@given(
    runtime=st.sampled_from(["docker", "podman"]),
    gpus=st.lists(uuids, max_size=8, unique=True),
    env=environs,
    uid=st.integers(0, 2**31),
    key=st.integers(1, 2**53),
    cwd=st.sampled_from(["/", "/srv/dir", "/home/a b/c"]),
)
def test_a_runtimes_argv_names_gpus_by_uuid_and_carries_no_value(
    runtime: str, gpus: list[str], env: dict[str, str], uid: int, key: int, cwd: str
) -> None:
    env = {**env, "SECRET_TOKEN": "s3cr3t-value"}
    argv = ["python", "train.py"]
    box = containers.container(
        runtime, f"/usr/bin/{runtime}", "team/img:1", argv,
        uid=uid, gid=uid, gpus=gpus, env=env, cwd=cwd, ns="abcdefgh", key=key,
    )  # fmt: skip
    head = box.argv[: -len(argv) - 1]
    assert box.argv[-len(argv) - 1 :] == ["team/img:1", *argv]
    assert not any("s3cr3t-value" in a for a in box.argv)
    assert head[head.index("--user") + 1] == f"{uid}:{uid}"
    passed = [head[i + 1] for i, a in enumerate(head) if a == "--env"]
    assert "SECRET_TOKEN" in passed and "PATH" not in passed
    if runtime == "docker":
        wanted = ['"device=' + ",".join(gpus) + '"'] if gpus else []
        assert [head[i + 1] for i, a in enumerate(head) if a == "--gpus"] == wanted
    else:
        devices = [head[i + 1] for i, a in enumerate(head) if a == "--device"]
        assert devices == [f"nvidia.com/gpu={u}" for u in gpus]
    assert box.cleanup == [[f"/usr/bin/{runtime}", "rm", "--force", box.name]]
    # The working directory is bound at its own path, except the host's root.
    mounts = [head[i + 1] for i, a in enumerate(head) if a == "--mount"]
    assert mounts == ([] if cwd == "/" else [f"type=bind,source={cwd},target={cwd}"])


def test_the_wrapping_combinations_that_make_no_sense_are_refused() -> None:
    with pytest.raises(jobenv.JobEnvError, match="not both"):
        jobenv.check_wrapping("base", "/opt/v", None, None)
    with pytest.raises(jobenv.JobEnvError, match="--conda with --image"):
        jobenv.check_wrapping("base", None, "ubuntu", None)
    with pytest.raises(jobenv.JobEnvError, match="--runtime needs --image"):
        jobenv.check_wrapping(None, None, None, "docker")
    jobenv.check_wrapping(None, None, "ubuntu", "apptainer")
    with pytest.raises(jobenv.JobEnvError, match="cannot be bound into a container"):
        jobenv.check_wrapping(None, None, "ubuntu", None, "/data/a,b")
    jobenv.check_wrapping(None, None, "ubuntu", "apptainer", "/data/a,b")  # binds it itself


@given(
    image=st.none() | st.text(max_size=40),
    conda=st.none() | st.text(max_size=20),
    venv=st.none() | st.text(max_size=20),
    runtime=st.none() | st.sampled_from(["docker", "podman", "apptainer", "lxc"]),
)
def test_the_head_takes_a_submission_exactly_when_the_client_rules_do(
    image: str | None, conda: str | None, venv: str | None, runtime: str | None
) -> None:
    """The head checks again what the CLI and the form checked: the same answer."""
    from pydantic import ValidationError

    from gputui.scheduler.server.op_args import SubmitArgs

    fields = {"image": image, "conda": conda, "venv": venv, "runtime": runtime}
    body = {"argv": ["train"], "cwd": "/work", **{k: v for k, v in fields.items() if v is not None}}
    try:
        for value, check in ((image, jobenv.check_image), (conda, jobenv.check_conda)):
            if value is not None:
                check(value)
        if venv is not None:
            jobenv.check_env_path(venv, "venv")
        if runtime is not None:
            jobenv.check_runtime(runtime)
        jobenv.check_wrapping(conda, venv, image, runtime, "/work")
        ours = True
    except jobenv.JobEnvError:
        ours = False
    try:
        SubmitArgs.model_validate(body)
        theirs = True
    except ValidationError as exc:
        assert all("\n" not in e["msg"] for e in exc.errors())
        theirs = False
    assert ours == theirs


_NAME_CHARS = st.characters(blacklist_categories=("Cs",))
"""Any character: ASCII letters and digits, ``_``, ``=``, a newline, a Unicode digit or
letter (``٣``, ``é``), NUL."""


@given(
    st.one_of(
        names,
        st.text(_NAME_CHARS, max_size=140),
        st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{120,135}\Z"),  # about the 128 limit
        names.map(lambda n: n + "\n"),
    )
)
def test_cli_head_wire_and_helper_agree_on_every_environment_variable_name(name: str) -> None:
    """``--env NAME=v`` is taken by the command line exactly when the head's submit and
    the wire's launch take it (and the helper's own copy): one rule, everywhere."""
    from pydantic import ValidationError

    from gputui.scheduler.server.op_args import SubmitArgs
    from gputui.wire.ops import LaunchRequest

    assume(name not in jobenv.RESERVED_ENV)
    try:
        jobenv.check_env_name(name)  # --env's (``env_pair``) and --export's check
        cli = True
    except jobenv.JobEnvError:
        cli = False
    try:
        SubmitArgs(argv=["true"], env={name: "v"})
        head = True
    except ValidationError:
        head = False
    try:
        LaunchRequest(ns="abcdefgh", job_id=1, argv=["true"], env={name: "v"})
        wire = True
    except ValidationError:
        wire = False
    helper = containers.ENV_NAME_RE.fullmatch(name) is not None
    assert cli == head == wire == helper == jobenv.is_env_name(name), name
