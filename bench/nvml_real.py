"""The helper on a real GPU, beside nvidia-smi.

Only where a real NVIDIA GPU and driver exist (prints a skipped result otherwise).
Runs the real helper (shipped the same way as over SSH, here through a pipe) for a
few samples and, at each sample, one ``nvidia-smi --query-gpu`` call; reports how the
readings agree field by field and the CPU each costs per sample. With ``--workload``
it first starts a small CUDA job (PyTorch) so there is a process on the GPU, checks
that the helper lists it like ``nvidia-smi --query-compute-apps`` does, and at the
end signals it through the helper's verified signal path.

Last line of output: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputui.remote.bundle import helper_command, helper_payload

QUERY = [
    "index",
    "uuid",
    "name",
    "memory.total",
    "memory.used",
    "temperature.gpu",
    "power.draw",
    "power.limit",
    "utilization.gpu",
    "fan.speed",
    "clocks.sm",
    "clocks.mem",
    "pcie.link.gen.current",
    "pcie.link.width.current",
]
HELPER_FIELD = {
    "memory.total": "mem_total_mib",
    "memory.used": "mem_used_mib",
    "temperature.gpu": "temp_c",
    "power.draw": "power_w",
    "power.limit": "power_limit_w",
    "utilization.gpu": "util_gpu",
    "fan.speed": "fan_pct",
    "clocks.sm": "clock_sm_mhz",
    "clocks.mem": "clock_mem_mhz",
    "pcie.link.gen.current": "pcie_gen",
    "pcie.link.width.current": "pcie_width",
}
# How far apart two reads a moment apart may be and still agree.
TOLERANCE = {
    "memory.total": 0,
    "memory.used": 256,
    "temperature.gpu": 3,
    "power.draw": 60,
    "power.limit": 1,
    "utilization.gpu": 35,
    "fan.speed": 5,
    "clocks.sm": 400,
    "clocks.mem": 200,
    "pcie.link.gen.current": 0,
    "pcie.link.width.current": 0,
}

WORKLOAD = """
import os, sys, time, torch
x = torch.randn(4096, 4096, device="cuda")
print("ready", flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(20):
        x = (x @ x).clamp_(-1, 1)
    torch.cuda.synchronize()
    time.sleep(0.05)
"""


def skipped(reason: str) -> int:
    print(json.dumps({"bench": "nvml_real", "skipped": True, "reason": reason}))
    return 0


def number(text: str) -> float | None:
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        return None


def smi_query() -> tuple[list[dict[str, str]], float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        ["nvidia-smi", f"--query-gpu={','.join(QUERY)}", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    rows = [
        dict(zip(QUERY, (c.strip() for c in line.split(",")), strict=False))
        for line in out.splitlines()
        if line.strip()
    ]
    return rows, cpu


def smi_apps() -> list[dict[str, str]]:
    out = subprocess.run(
        [
            "nvidia-smi",
            "--query-compute-apps=pid,gpu_uuid,used_memory,process_name",
            "--format=csv,noheader,nounits",
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    keys = ["pid", "gpu_uuid", "used_memory", "process_name"]
    return [
        dict(zip(keys, (c.strip() for c in line.split(",")), strict=False))
        for line in out.splitlines()
        if line.strip()
    ]


def proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Helper:
    def __init__(self, interval: float) -> None:
        argv = shlex.split(helper_command(sys.executable))
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(helper_payload(["--interval", str(interval)]))
        self.proc.stdin.flush()
        self.next_id = 1

    def read(self, kind: str, timeout: float = 30.0) -> dict[str, Any]:
        assert self.proc.stdout
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                raise RuntimeError(f"helper exited: {err.strip()[-500:]}")
            msg = json.loads(line)
            if msg.get("type") == kind:
                return msg
            if msg.get("type") == "event":
                self.events.append(msg)
        raise TimeoutError(f"no {kind} from the helper in {timeout} s")

    events: list[dict[str, Any]] = []

    def request(self, obj: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin
        obj = {"type": "request", "id": self.next_id, **obj}
        self.next_id += 1
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()
        while True:
            msg = self.read("result")
            if msg.get("id") == obj["id"]:
                return msg

    def close(self) -> int:
        assert self.proc.stdin
        self.proc.stdin.close()
        return self.proc.wait(timeout=10)


def compare(smi: dict[str, str], gpu: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for key, hkey in HELPER_FIELD.items():
        ours = gpu.get(hkey)
        theirs = number(smi.get(key, ""))
        if theirs is None and ours is None:
            agree: bool | None = True
        elif theirs is None or ours is None:
            agree = False
        else:
            agree = abs(float(ours) - theirs) <= TOLERANCE[key]
        fields[key] = {
            "helper": ours,
            "nvidia_smi": smi.get(key),
            "agree": agree,
            "helper_error": gpu.get("errors", {}).get(hkey),
        }
    return fields


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument(
        "--workload", action="store_true", help="start a small PyTorch CUDA job first"
    )
    args = parser.parse_args()

    if shutil.which("nvidia-smi") is None:
        return skipped("no nvidia-smi on this machine")
    try:
        smi_query()
    except (subprocess.CalledProcessError, OSError) as exc:
        return skipped(f"nvidia-smi failed: {exc}")

    workload = None
    if args.workload:
        workload = subprocess.Popen(
            [sys.executable, "-c", WORKLOAD, "600"], stdout=subprocess.PIPE, text=True
        )
        assert workload.stdout
        if workload.stdout.readline().strip() != "ready":
            return skipped("the PyTorch workload did not start")

    helper = Helper(args.interval)
    hello = helper.read("hello")
    report: dict[str, Any] = {
        "bench": "nvml_real",
        "driver": hello.get("driver"),
        "cuda": hello.get("cuda"),
        "nvml": hello.get("nvml"),
        "signal_method": hello.get("signal_method"),
        "gpus": [g.get("name") for g in hello.get("gpus", [])],
        "hello_errors": {
            g["index"]: g.get("errors") for g in hello.get("gpus", []) if g.get("errors")
        },
    }
    if hello.get("errors"):
        report["nvml_error"] = hello["errors"]
    helper.read("sample")  # warm-up
    cpu0 = proc_cpu(helper.proc.pid)
    smi_cpu = 0.0
    agree_counts: dict[str, list[int]] = {}
    last: dict[str, Any] = {}
    for _ in range(args.samples):
        sample = helper.read("sample", timeout=args.interval * 5 + 10)
        rows, cpu = smi_query()
        smi_cpu += cpu
        for row, gpu in zip(rows, sample["gpus"], strict=False):
            last = compare(row, gpu)
            for key, value in last.items():
                tally = agree_counts.setdefault(key, [0, 0])
                tally[0] += bool(value["agree"])
                tally[1] += 1
    cpu1 = proc_cpu(helper.proc.pid)
    report["samples"] = args.samples
    report["helper_cpu_per_sample_us"] = round((cpu1 - cpu0) / args.samples * 1e6, 1)
    report["nvidia_smi_cpu_per_call_us"] = round(smi_cpu / args.samples * 1e6, 1)
    report["cpu_ratio_smi_over_helper"] = (
        round(report["nvidia_smi_cpu_per_call_us"] / report["helper_cpu_per_sample_us"], 1)
        if report["helper_cpu_per_sample_us"]
        else None
    )
    report["agreement"] = {k: f"{v[0]}/{v[1]}" for k, v in agree_counts.items()}
    report["last_comparison_gpu0"] = last
    report["xid_events_seen"] = len(helper.events)

    if workload is not None:
        apps = smi_apps()
        sample = helper.read("sample")
        ours = [
            (p["pid"], g["uuid"], p.get("gpu_mem_mib"), p.get("user"), p.get("command", "")[:60])
            for g in sample["gpus"]
            for p in g.get("processes", [])
        ]
        report["compute_apps_nvidia_smi"] = apps
        report["processes_helper"] = ours
        mine = [p for p in ours if p[0] == workload.pid]
        report["workload_pid"] = workload.pid
        report["workload_seen_by_helper"] = bool(mine)
        target = None
        for g in sample["gpus"]:
            for p in g.get("processes", []):
                if p["pid"] == workload.pid:
                    target = (g["uuid"], p)
        if target is not None:
            uuid, proc = target
            result = helper.request(
                {
                    "op": "signal",
                    "pid": proc["pid"],
                    "signal": "TERM",
                    "gpu_uuid": uuid,
                    "uid": proc.get("uid"),
                    "start_ticks": proc.get("start_ticks"),
                }
            )
            report["signal_result"] = result
            try:
                report["workload_exit"] = workload.wait(timeout=20)
            except subprocess.TimeoutExpired:
                report["workload_exit"] = "still running"
        if workload.poll() is None:
            workload.kill()
            workload.wait()
    report["helper_exit_on_eof"] = helper.close()
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
