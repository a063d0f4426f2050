"""A GPU reset on a real host: ``nvidia-smi --gpu-reset``, run by the helper.

Each test writes a fake ``nvidia-smi`` (a shell script) into a directory of its own
and points the helper's lookup at it (``SmiReset(search_path=...)``, the same
``shutil.which`` a host uses), as if the helper were root. The card is the
simulator's or the stubbed real ``pynvml``'s; the fake is a real process the helper
starts, waits for, and kills when it hangs (on a fifo no one writes: no sleeps).
"""

from __future__ import annotations

import io
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from nvmlkit import FakeNvml

from gputui.common.text import clean
from gputui.remote import gpureset
from gputui.remote.dispatch import SLOW, _answer
from gputui.remote.gpureset import OUTPUT_CAP, NvmlReset, SmiReset, one_line, run_capped
from gputui.remote.helper import Helper
from gputui.remote.sim.engine import SimNvml
from gputui.remote.sim.spec import parse_spec
from gputui.remote.wire import Output
from gputui.wire.ops import ResetRequest, ResetResult

SPEC = "2xh100,name=reset-host,fault=orphan@1"
SUCCESS = b"GPU 00000000:3B:00.0 was successfully reset.\nAll done.\n"


class Fake:
    """A fake ``nvidia-smi`` in ``root/bin``: what it prints and its exit status are
    files next to it, so one script serves many generated examples."""

    def __init__(self, root: Path) -> None:
        self.bin = root / "bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        self.dev = root / "dev"
        self.dev.mkdir(exist_ok=True)
        self.out, self.code = root / "out", root / "code"
        self.argv, self.env, self.pid = root / "argv", root / "env", root / "pid"
        self.fifo = root / "fifo"
        self.write(SUCCESS, 0)

    def script(self, body: str) -> None:
        path = self.bin / "nvidia-smi"
        path.write_text(
            "#!/bin/sh\n"
            f"echo $$ > '{self.pid}'\n"
            f"printf '%s\\n' \"$@\" > '{self.argv}'\n"
            f"env > '{self.env}'\n" + body
        )
        path.chmod(0o755)

    def write(self, output: bytes, code: int) -> None:
        self.out.write_bytes(output)
        self.code.write_text(str(code))
        self.script(f"cat '{self.out}'\nexit $(cat '{self.code}')\n")

    def resetter(self, euid: int = 0) -> SmiReset:
        return SmiReset(
            search_path=str(self.bin),
            euid=lambda: euid,
            owner_check=lambda path: None,
            dev=str(self.dev),
        )


def _helper(spec: str = SPEC) -> Helper:
    lib = SimNvml(parse_spec(spec))
    lib.nvmlInit()
    helper = Helper(lib, Output(io.BytesIO()), "reset-host", simulated=True)
    helper.hello()
    return helper


def _reset(helper: Helper, index: int = 0, **req: Any) -> dict[str, Any]:
    body = {"type": "request", "id": 1, "op": "reset", "index": index}
    return _answer(helper, 1, SLOW["reset"], {**body, "uuid": helper.gpus[index].uuid, **req})


def _value(helper: Helper, answer: dict[str, Any], index: int = 0) -> ResetResult:
    assert answer["ok"] is True, answer
    return ResetRequest(index=index, uuid=helper.gpus[index].uuid).decode(answer["value"])


@pytest.fixture
def fake(tmp_path: Path) -> Fake:
    return Fake(tmp_path)


def test_a_helper_resets_with_nvidia_smi_on_a_real_host_and_nvml_on_the_simulator() -> None:
    real = Helper(object(), Output(io.BytesIO()), "h", simulated=False)
    assert isinstance(real.resetter, SmiReset) and real.resetter.search_path is None
    assert isinstance(_helper().resetter, NvmlReset)


def test_success_runs_exactly_nvidia_smi_gpu_reset_on_that_uuid_and_reads_the_memory(
    fake: Fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTUI_TEST_SECRET", "caller-env")
    helper = _helper()
    helper.resetter = fake.resetter()
    value = _value(helper, _reset(helper, 0))
    assert value.reset is True and value.error is None and value.via == "nvidia-smi"
    assert value.message == "GPU 00000000:3B:00.0 was successfully reset. / All done."
    assert fake.argv.read_text().splitlines() == ["--gpu-reset", "-i", helper.gpus[0].uuid]
    env = dict(line.split("=", 1) for line in fake.env.read_text().splitlines() if "=" in line)
    assert env["PATH"] == gpureset.SEARCH_PATH and "GPUTUI_TEST_SECRET" not in env
    assert env["LC_ALL"] == "C" and set(env) <= {"PATH", "LC_ALL", "LANG", "PWD", "SHLVL", "_"}
    assert value.processes == 0 and value.mem_used_mib is not None
    assert value.mem_used_mib < 1024
    # GPU 1 holds 20 GiB with no process (the fake did not really reset it): said so.
    held = _value(helper, _reset(helper, 1), 1)
    assert held.reset is True and held.mem_used_mib is not None and held.mem_used_mib >= 20000


def test_a_non_zero_exit_is_not_a_reset_and_says_what_nvidia_smi_said(fake: Fake) -> None:
    helper = _helper()
    helper.resetter = fake.resetter()
    fake.write(b"Unable to reset this GPU because it's being used by some other process\n", 255)
    value = _value(helper, _reset(helper))
    assert (value.reset, value.error) == (False, "exit 255")
    assert value.message == (
        "nvidia-smi exited 255 (other error or internal driver error): Unable to reset this "
        "GPU because it's being used by some other process"
    )
    assert value.mem_used_mib is None
    fake.write(b"", 4)
    quiet = _value(helper, _reset(helper))
    assert (quiet.error, quiet.message) == ("exit 4", "nvidia-smi exited 4 (no permission)")


def test_a_hung_nvidia_smi_is_killed_at_the_requests_timeout(fake: Fake) -> None:
    helper = _helper()
    helper.resetter = fake.resetter()
    os.mkfifo(fake.fifo)
    fake.script(f"printf 'resetting GPU\\n'\nexec cat '{fake.fifo}'\n")  # blocks: no writer
    started = time.monotonic()
    value = _value(helper, _reset(helper, timeout_s=0.3))
    assert time.monotonic() - started < 5
    assert (value.reset, value.error) == (False, "timeout")
    assert value.message == (
        "nvidia-smi did not finish in 0.3 s and was killed; the reset may be half done: "
        "resetting GPU"
    )
    pid = int(fake.pid.read_text())
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(pid, 0)


def test_a_flood_of_output_is_read_to_the_end_and_capped(fake: Fake) -> None:
    fake.script("head -c 20000000 /dev/zero | tr '\\0' 'A'\nexit 3\n")
    code, output, timed_out = run_capped([str(fake.bin / "nvidia-smi")], 30, gpureset.SEARCH_PATH)
    assert (code, timed_out, len(output)) == (3, False, OUTPUT_CAP)
    helper = _helper()
    helper.resetter = fake.resetter()
    value = _value(helper, _reset(helper))
    assert value.error == "exit 3" and len(value.message) <= gpureset.LINE_CELLS
    assert value.message.endswith("AAA…")


def test_hostile_bytes_in_the_output_are_cleaned(fake: Fake) -> None:
    hostile = (
        b"\x1b]0;pwned\x07\x1b[2J\x1b[31mGPU\x00 reset\x1b[0m\r\n\xff\xfe"
        b"\xe2\x80\xae gnp.exe\xc2\x9b31m\x08\x08done\x9b\n\n\n"
    )
    helper = _helper()
    helper.resetter = fake.resetter()
    fake.write(hostile, 0)
    value = _value(helper, _reset(helper))
    assert value.message == "GPU reset / \ufffd\ufffd gnp.exe done\ufffd"
    assert value.message.isprintable()


def test_no_nvidia_smi_or_not_root_is_an_answer_and_nothing_runs(fake: Fake) -> None:
    helper = _helper()
    helper.resetter = fake.resetter(euid=1000)
    value = _value(helper, _reset(helper))
    assert (value.reset, value.error) == (False, "not-root")
    assert value.message == "nvidia-smi --gpu-reset needs root: the helper is not"
    assert not fake.argv.exists()
    (fake.bin / "nvidia-smi").unlink()
    helper.resetter = fake.resetter()
    missing = _value(helper, _reset(helper))
    assert (missing.error, missing.message) == (
        "nvidia-smi-missing",
        f"nvidia-smi not found in {fake.bin}",
    )


def test_an_nvidia_smi_others_could_have_written_is_never_run(fake: Fake) -> None:
    helper = _helper()
    helper.resetter = SmiReset(search_path=str(fake.bin), euid=lambda: 0, dev=str(fake.dev))
    smi = fake.bin / "nvidia-smi"
    if os.geteuid() == 0:
        os.chown(smi, 65534, 65534)  # as root: make it someone else's
    value = _value(helper, _reset(helper))
    assert (value.reset, value.error) == (False, "nvidia-smi-missing")
    assert value.message == f"{smi} not run: {smi} is not owned by root"
    assert not fake.argv.exists()
    assert gpureset._trusted(os.path.realpath("/bin/sh")) is None  # root's, and only root's
    if os.geteuid() == 0:
        for path in (fake.bin.parent, fake.bin, smi):
            os.chown(path, 0, 0)
        smi.chmod(0o775)
        assert gpureset._trusted(str(smi)) == f"{smi} is writable by others than root"
        smi.chmod(0o755)
        fake.bin.chmod(0o777)
        assert gpureset._trusted(str(smi)) == f"{fake.bin} is writable by others than root"


def test_a_process_holding_the_card_or_on_it_stops_the_reset_before_it_runs(
    fake: Fake, sim_process: Callable[..., subprocess.Popen[bytes]]
) -> None:
    helper = _helper()
    helper.resetter = fake.resetter()
    (fake.dev / "nvidia0").write_bytes(b"")
    holder = subprocess.Popen(
        ["/bin/sh", "-c", f"exec 7<'{fake.dev}/nvidia0'; exec sleep 60"], stdin=subprocess.DEVNULL
    )
    try:
        # The shell opens the card, then becomes sleep: wait for that before asking.
        comm = Path(f"/proc/{holder.pid}/comm")
        deadline = time.monotonic() + 10
        while comm.read_text().strip() != "sleep":
            assert time.monotonic() < deadline, "the holder never started"
            time.sleep(0.01)
        answer = _reset(helper)
        assert (answer["ok"], answer["code"]) == (False, "in-use")
        assert answer["error"] == (
            f"1 processes hold {fake.dev}/nvidia0 (pid {holder.pid} (sleep 60)): not reset"
        )
        assert not fake.argv.exists()
    finally:
        holder.kill()
        holder.wait()
    # The re-check right before it runs: a process NVML lists on the card.
    gpu = helper.gpus[0]
    squatter = sim_process(gpu.uuid, mem_mib=256)
    deadline = time.monotonic() + 10
    while squatter.pid not in (gpu.pids() or ()):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    with pytest.raises(gpureset.RequestError) as refused:
        fake.resetter().reset(gpu, 5.0, 0)
    assert refused.value.code == "in-use" and f"pids {squatter.pid}" in refused.value.message
    assert not fake.argv.exists()


@pytest.mark.parametrize("bad", [0, 0.05, 601, -1, True, "60", None, float("nan"), [1]])
def test_a_bad_timeout_is_refused(bad: Any) -> None:
    helper = _helper()
    answer = _reset(helper, timeout_s=bad)
    assert (answer["ok"], answer["code"]) == (False, "bad-request")
    assert answer["error"].startswith("timeout_s must be seconds 0.1-600, got ")


def test_the_real_pynvml_binding_resets_through_nvidia_smi(fake_nvml: FakeNvml, fake: Fake) -> None:
    import pynvml

    pynvml.nvmlInit()
    helper = Helper(pynvml, Output(io.BytesIO()), "real", simulated=False)
    helper.hello()
    assert isinstance(helper.resetter, SmiReset)
    helper.resetter = fake.resetter()
    helper.gpus = helper.gpus[:1]
    helper.gpus[0].pids = set  # type: ignore[method-assign]
    value = _value(helper, _reset(helper))
    assert value.reset is True and value.via == "nvidia-smi"
    assert fake.argv.read_text().split() == ["--gpu-reset", "-i", helper.gpus[0].uuid]


_outputs = st.one_of(
    st.binary(max_size=6000),
    st.text(max_size=400).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.lists(st.sampled_from([b"\x1b[", b"\x1b]", b"\x07", b"\r", b"\n", b"\x9b", b"A", b"\xff"]),
             max_size=200).map(b"".join),
)  # fmt: skip


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(output=_outputs, code=st.integers(0, 255))
@example(output=b"\xcc\x80", code=0)  # a lone combining mark: found once, kept
def test_whatever_nvidia_smi_prints_the_answer_is_one_clean_capped_line(
    fake: Fake, output: bytes, code: int
) -> None:
    helper = HYPO_HELPER
    helper.resetter = fake.resetter()
    fake.write(output, code)
    answer = _reset(helper)
    assert answer["ok"] is True and answer["code"] is None, answer
    value = answer["value"]
    assert value["reset"] is (code == 0)
    message = value["message"]
    assert len(message) <= gpureset.LINE_CELLS and message.isprintable(), message
    assert message == message.strip() and "  " not in message and "\x1b" not in message
    shown = ResetRequest(index=0, uuid=helper.gpus[0].uuid).decode(value).message
    # The console reads it through its one sanitiser (which also drops what terminals
    # draw at different widths, such as a combining mark with nothing to sit on);
    # a plain line comes through whole.
    assert shown == clean(message, 512)
    if message.isascii():
        assert shown == message


HYPO_HELPER = _helper(SPEC.replace("reset-host", "reset-hypo"))


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=2000), cells=st.integers(2, 400))
def test_one_line_is_always_one_printable_line_within_its_cells(data: bytes, cells: int) -> None:
    line = one_line(data, cells)
    assert len(line) <= cells and line.isprintable() and "\x1b" not in line
