"""The helper's main loop: ``hello``, then a ``sample`` per interval, requests on stdin.

Output is JSON lines on stdout, one object per line, flushed. Requests arrive as
JSON lines on stdin; EOF there means the connection is gone, and the helper exits 0
so none is ever orphaned on a host.
"""

from __future__ import annotations

import contextlib
import math
import os
import queue
import sys
import threading
import time
from typing import IO, TYPE_CHECKING, Any

from . import HELPER_VERSION, PROTOCOL_VERSION
from .amd import AmdGpu, load_amdsmi, open_amd
from .clocklock import ClockLocks
from .dispatch import MAX_INTERVAL, MIN_INTERVAL, Workers, handle_line
from .gpu_health import MAX_HEALTH_EVERY, MIN_HEALTH_EVERY, HealthClock
from .gpureset import NvmlReset, Resetter, SmiReset
from .gpus import Gpu
from .nvml import NA, amd_error_name, error_text, is_nvml_error, load_pynvml, query, text
from .procs import ProcessTable, boot_time
from .signals import pidfd_supported
from .wire import MAX_REQUEST_BYTES, Output, OutputClosed, read_requests
from .xid_watch import register_xid_events, send_kernel_history, watch_xid_events

if TYPE_CHECKING:
    from .jobops import JobService
    from .ptyops import Terminals

# The simulator (the .sim package) is imported only in --sim mode: a real
# host never pays for it at start-up.

EXIT_AFTER_EOF_S = 5.0

EXIT_FATAL = 2
MAX_GPUS = 64
"""GPUs one host reports at most (the wire's ``MAX_GPUS``)."""


class Helper:
    """State of one helper run: the NVML library (real or simulated) and the GPUs."""

    def __init__(
        self,
        lib: Any,
        out: Output,
        hostname: str,
        simulated: bool,
        health: HealthClock | None = None,
        *,
        amd: Any = None,
    ) -> None:
        """``health``: when samples carry the health readings (every 10 s by default);
        ``lib``: NVML (None on a host without it); ``amd``: the ``amdsmi`` module (or
        its simulator), None on a host without AMD's library."""
        self.lib = lib
        self.amd = amd
        self.start_errors: dict[str, str] = {}
        """Why a vendor's library did not start (``nvml_start``/``amdsmi_start`` ->
        reason), when the other's did: said in ``hello``'s errors."""
        self.out = out
        self.hostname = hostname
        self.simulated = simulated
        self.resetter: Resetter = NvmlReset() if simulated else SmiReset()
        """How a GPU is reset: the simulator's NVML call, or ``nvidia-smi`` on a real host."""
        self.gpus: list[Gpu] = []
        self.clocks = ClockLocks()
        """Cards whose clocks this helper locked, and those that cannot be locked."""
        self.table = ProcessTable()
        self.seq = 0
        self.use_pidfd = pidfd_supported()
        self.event_set: Any = None
        self.stop = threading.Event()
        self.interval = 1.0
        self.health = health if health is not None else HealthClock()
        self.workers = Workers()
        self._jobs: JobService | None = None
        self._jobs_lock = threading.Lock()
        self._terminals: Terminals | None = None

    def hello(self) -> dict[str, Any]:
        errors: dict[str, str] = {}
        msg: dict[str, Any] = {
            "type": "hello",
            "protocol": PROTOCOL_VERSION,
            "helper_version": HELPER_VERSION,
            "hostname": text(self.hostname, 128),
            "simulated": self.simulated,
            "signal_method": "pidfd" if self.use_pidfd else "proc-stat",
            "boot_time": boot_time(),
        }
        count: Any = 0
        msg["driver"] = msg["nvml"] = msg["cuda"] = None
        if self.lib is not None:  # None: no NVIDIA library here (an AMD-only host)
            count = self._nvml_system(msg, errors)
        self.gpus = [Gpu(self.lib, i) for i in range(min(int(count), MAX_GPUS))]
        if self.amd is not None:
            amd_gpus, amd_error = open_amd(self.amd, len(self.gpus), MAX_GPUS - len(self.gpus))
            if amd_error is not None:
                errors["amd_gpus"] = amd_error
            self.gpus.extend(amd_gpus)
        inventory = [gpu.inventory() for gpu in self.gpus]
        for gpu, info in zip(self.gpus, inventory):
            info["vendor"], info["vendor_index"] = gpu.vendor, gpu.vendor_index
        nvidia = [(g, i) for g, i in zip(self.gpus, inventory) if g.vendor == "nvidia"]
        self.event_set = register_xid_events(
            self.lib, [g for g, _ in nvidia], [i for _, i in nvidia]
        )
        errors.update(self.start_errors)
        msg["gpus"] = inventory
        msg["errors"] = errors
        return msg

    def _nvml_system(self, msg: dict[str, Any], errors: dict[str, str]) -> Any:
        """NVML's driver, NVML and CUDA versions into ``msg``; its GPU count (0 when it
        cannot say)."""
        driver = query(self.lib, "nvmlSystemGetDriverVersion")
        nvml = query(self.lib, "nvmlSystemGetNVMLVersion")
        cuda = query(self.lib, "nvmlSystemGetCudaDriverVersion")
        for key, value in (("driver", driver), ("nvml", nvml)):
            msg[key] = None if isinstance(value, NA) else text(value, 64)
            if isinstance(value, NA):
                errors[key] = value.error
        if isinstance(cuda, NA):
            msg["cuda"] = None
            errors["cuda"] = cuda.error
        else:
            msg["cuda"] = f"{int(cuda) // 1000}.{int(cuda) % 1000 // 10}"
        count = query(self.lib, "nvmlDeviceGetCount")
        if isinstance(count, NA):
            errors["gpus"] = count.error
            return 0
        return count

    def amd_cards(self) -> dict[str, str]:
        """The AMD cards' UUIDs -> their ``ROCR_VISIBLE_DEVICES`` names (``visible``)."""
        return {g.uuid: g.rocr_id for g in self.gpus if isinstance(g, AmdGpu)}

    def sample(self) -> dict[str, Any]:
        self.seq += 1
        health = self.health.due()
        gpus = []
        for gpu in self.gpus:
            try:
                gpus.append(gpu.sample(self.table, health))
            except Exception as exc:  # belt and braces: Gpu.sample never raises
                gpus.append(
                    {
                        "index": gpu.index,
                        "uuid": gpu.uuid,
                        "state": "error",
                        "message": (f"{type(exc).__name__}: {exc}")[:512],
                    }
                )
        pids = [p["pid"] for g in gpus for p in g.get("processes", ())]
        msg = {"type": "sample", "seq": self.seq, "time": round(time.time(), 3), "gpus": gpus}
        parents = self.table.parents(pids)
        if parents:
            msg["parents"] = parents
        self.table.keep_only(pids)
        return msg

    def gpu_pids(self, uuid: str) -> set[int] | None:
        for gpu in self.gpus:
            if gpu.uuid.lower() == uuid.lower():
                return gpu.pids()
        return None

    # -- events -------------------------------------------------------------------

    def kernel_history(self, queue_: queue.Queue[tuple[str, Any]]) -> None:
        """Kernel-log thread: the Xids logged before this run (see ``xid_watch``)."""
        send_kernel_history(self.lib, self.simulated, self.gpus, queue_)

    def watch_events(self, queue_: queue.Queue[tuple[str, Any]]) -> None:
        """NVML event thread: Xid events as they happen (see ``xid_watch``)."""
        watch_xid_events(self.lib, self.event_set, self.gpus, self.stop, queue_)

    # -- jobs ----------------------------------------------------------------------

    def job_service(self) -> JobService:
        """The job requests' state, made on first use (a helper that never sees a job
        request never imports them)."""
        with self._jobs_lock:
            if self._jobs is None:
                from .jobops import JobService

                self._jobs = JobService(self.simulated)
            self._jobs.amd_cards = self.amd_cards()
            return self._jobs

    def terminals(self) -> Terminals:
        """The interactive jobs' terminals forwarded through this helper (first use)."""
        service = self.job_service()
        with self._jobs_lock:
            if self._terminals is None:
                from .ptyops import Terminals

                self._terminals = Terminals(service.store, self.out.send)
            return self._terminals

    def jobs_message(self, ns: str) -> dict[str, Any]:
        return {"type": "jobs", "jobs": self.job_service().store.jobs(ns)}


def _hostname() -> str:
    """The host's name, as ``socket.gethostname`` gives it (without importing socket)."""
    return os.uname().nodename


class Args:
    """The helper's command line: ``[--sim SPEC] [--interval SECONDS]
    [--health-every SECONDS] [--jobs NS] [--once]``."""

    def __init__(self) -> None:
        self.sim: str | None = None
        self.interval = 1.0
        self.health_every = HealthClock().every
        self.once = False
        self.jobs: str | None = None


def _parse_args(argv: list[str]) -> Args:
    """A few fixed options, parsed by hand: argparse costs ~4 ms of every start."""
    args = Args()
    items = iter(argv)
    for item in items:
        name, eq, inline = item.partition("=")
        if name == "--once" and not eq:
            args.once = True
        elif name in ("--sim", "--interval", "--health-every", "--jobs"):
            value = inline if eq else next(items, None)
            if value is None:
                raise ValueError(f"{name} needs a value")
            if name == "--sim":
                args.sim = value
            elif name == "--jobs":
                from .supervisor import NS_RE

                if not NS_RE.fullmatch(value):
                    raise ValueError("--jobs needs a namespace of 8 to 32 [a-z0-9]")
                args.jobs = value
            elif name == "--health-every":
                every = float(value)  # ValueError for a non-number
                if not MIN_HEALTH_EVERY <= every <= MAX_HEALTH_EVERY:  # NaN fails too
                    raise ValueError(
                        f"--health-every must be {MIN_HEALTH_EVERY:g} to "
                        f"{MAX_HEALTH_EVERY:g} seconds, not {value[:20]!r}"
                    )
                args.health_every = every
            else:
                args.interval = float(value)  # ValueError for a non-number
                if math.isnan(args.interval):
                    raise ValueError("--interval must be a number")
        else:
            raise ValueError(f"unknown argument {item[:40]!r}")
    return args


def _fatal_start(out: Output, hostname: str, simulated: bool, reason: str) -> int:
    out.send(
        {
            "type": "hello",
            "protocol": PROTOCOL_VERSION,
            "helper_version": HELPER_VERSION,
            "hostname": text(hostname, 128),
            "simulated": simulated,
            "driver": None,
            "cuda": None,
            "nvml": None,
            "signal_method": "pidfd" if pidfd_supported() else "proc-stat",
            "gpus": [],
            "errors": {"nvml": reason[:256]},
        }
    )
    out.send({"type": "error", "fatal": True, "message": "NVML could not start: " + reason})
    return EXIT_FATAL


def run(
    argv: list[str],
    stdin: IO[bytes],
    stdout: IO[bytes],
    *,
    exit_after_eof: float | None = None,
) -> int:
    """Run the helper; with ``exit_after_eof``, the process ends that many seconds after
    its input closes even if a sample is stuck in NVML (so helpers never pile up)."""
    out = Output(stdout)
    try:
        args = _parse_args(argv)
    except ValueError as exc:
        message = f"bad helper arguments {str(argv)[:200]}: {exc}"
        out.send({"type": "error", "fatal": True, "message": message})
        return EXIT_FATAL
    lib: Any
    amd: Any
    if args.sim:
        from .sim.amdsmi import SimAmdSmi
        from .sim.engine import SimNvml
        from .sim.spec import parse_spec

        try:
            spec = parse_spec(args.sim)
        except ValueError as exc:
            return _fatal_start(out, _hostname(), True, f"bad sim spec: {exc}")
        lib = SimNvml(spec)
        amd = SimAmdSmi(lib) if lib.amd_devices else None
        hostname = lib.hostname
    else:
        lib, amd, hostname = load_pynvml(), load_amdsmi(), _hostname()
        if lib is None and amd is None:
            return _fatal_start(
                out,
                hostname,
                False,
                "LibraryNotFound: the pynvml module "
                f"(nvidia-ml-py) is not installed for {sys.executable}",
            )
    lib, amd, started = _start_libraries(lib, amd)
    if lib is None and amd is None:
        return _fatal_start(out, hostname, bool(args.sim), "; ".join(started.values()))
    helper = Helper(lib, out, hostname, bool(args.sim), HealthClock(args.health_every), amd=amd)
    # The other vendor's started: this one's failure is a note in hello, not fatal
    # (``errors["nvml"]`` in hello says the helper could not start at all).
    helper.start_errors = {f"{key}_start": reason[:256] for key, reason in started.items()}
    helper.interval = max(MIN_INTERVAL, min(MAX_INTERVAL, args.interval))
    try:
        out.send(helper.hello())
        jobs = helper.jobs_message(args.jobs) if args.jobs else None
        if jobs is not None:
            out.send(jobs)
        if args.once:
            out.send(helper.sample())
            return 0
        if args.jobs and jobs is not None:
            service, ns, last = helper.job_service(), args.jobs, jobs["jobs"]
            threading.Thread(
                target=service.watch, args=(ns, out.send, helper.stop, last), daemon=True
            ).start()
        return _loop(helper, stdin, exit_after_eof)
    except OutputClosed:
        return 0
    finally:
        helper.stop.set()
        helper.clocks.reset_all(helper.gpus)


def _start_libraries(lib: Any, amd: Any) -> tuple[Any, Any, dict[str, str]]:
    """``nvmlInit`` and ``amdsmi_init``: each library that starts is kept, one that
    fails is dropped with its reason (``nvml``/``amdsmi`` -> reason). The helper
    needs one of them; a host with one vendor's cards works with that one."""
    reasons: dict[str, str] = {}
    if lib is not None:
        try:
            lib.nvmlInit()
        except Exception as exc:
            reasons["nvml"] = (
                error_text(exc) if is_nvml_error(exc) else f"{type(exc).__name__}: {exc}"
            )
            lib = None
    if amd is not None:
        try:
            amd.amdsmi_init()
        except Exception as exc:
            name = amd_error_name(exc)
            reasons["amdsmi"] = f"amdsmi_init failed: {name}: {' '.join(str(exc).split())}"
            amd = None
    return lib, amd, reasons


def _loop(helper: Helper, stdin: IO[bytes], exit_after_eof: float | None = None) -> int:
    inbox: queue.Queue[tuple[str, Any]] = queue.Queue()

    def on_eof() -> None:
        if exit_after_eof is not None:
            timer = threading.Timer(exit_after_eof, os._exit, (0,))
            timer.daemon = True
            timer.start()

    threading.Thread(target=read_requests, args=(stdin, inbox, on_eof), daemon=True).start()
    threading.Thread(target=helper.kernel_history, args=(inbox,), daemon=True).start()
    if helper.event_set is not None:
        threading.Thread(target=helper.watch_events, args=(inbox,), daemon=True).start()
    next_at = time.monotonic()  # the first sample now, with the stdin reader already up
    while True:
        now = time.monotonic()
        if now >= next_at:
            helper.out.send(helper.sample())
            next_at = max(next_at + helper.interval, now + helper.interval * 0.5)
            continue
        try:
            kind, item = inbox.get(timeout=next_at - now)
        except queue.Empty:
            continue
        if kind == "eof":
            return 0
        if kind in ("event", "send"):
            if kind == "event" and item.get("kind") == "xid" and item.get("source") == "nvml":
                helper.health.xid_seen()  # an Xid now: the next sample reads health
            helper.out.send(item)
        elif kind == "oversize":
            helper.out.send(
                {
                    "type": "error",
                    "fatal": False,
                    "message": f"request line over {MAX_REQUEST_BYTES} bytes dropped",
                }
            )
        elif kind == "line":
            before = helper.interval
            reply = handle_line(helper, item)
            if reply is not None:
                helper.out.send(reply)
            if helper.interval < before:
                next_at = min(next_at, time.monotonic() + helper.interval)


def main(argv: list[str] | None = None) -> int:
    """Entry point on the host (also what the bundle's boot code calls)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    stdout = sys.stdout.buffer
    try:
        code = run(argv, sys.stdin.buffer, stdout, exit_after_eof=EXIT_AFTER_EOF_S)
    except KeyboardInterrupt:
        code = 0
    try:
        stdout.flush()
    except (OSError, ValueError):
        # The channel is gone: keep the interpreter's own flush at exit from complaining.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), stdout.fileno())
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
