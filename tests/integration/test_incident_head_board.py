"""``gputui incident`` with a head tells the head's story: each problem first seen when
the head first saw it (not when this probe looked), the head's own problems (a drain)
too, and the Xids the head received. On the demo cluster's real head."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from clikit import ROOT

from gputui.demo.cluster import DemoCluster
from gputui.scheduler.client import HeadClient

DEADLINE_S = 60.0


async def test_incident_uses_the_heads_board_and_its_xids() -> None:
    # Host 3 of the demo has Xid 94 on its GPU 3 (an NVML event and a kernel-log line).
    async with DemoCluster(hosts=3, gpus=12, faults=True, head=True, workloads=0) as cluster:
        config = cluster.config()
        assert config.head is not None
        host = config.hosts[2].name
        sock = Path(config.head.socket)

        def call(op: str, args: dict[str, object]) -> Any:
            with HeadClient(sock) as client:
                return client.call(op, args)

        async def head_problem(code: str) -> dict[str, Any]:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE_S
            while True:
                board = await asyncio.to_thread(call, "health", {"hosts": [host]})
                found = [p for p in board["problems"] if p["code"] == code and p["gpu"] == 3]
                if found:
                    return found[0]
                assert loop.time() < deadline, f"the head's board never had {code}"
                await asyncio.sleep(0.05)

        xid = await head_problem("xid-94")
        await asyncio.to_thread(call, "drain", {"target": f"{host}:3", "reason": "loud fan"})
        drained = await head_problem("drained")
        argv = [sys.executable, "-m", "gputui.entry", "--hosts", str(cluster.config_path)]
        done = await asyncio.to_thread(
            subprocess.run,
            [*argv, "incident", f"{host}:3", "--json", "--since", "2d"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        entries = json.loads(done.stdout)["entries"]
        problems = [e for e in entries if e["kind"] == "problem"]
        # The head's board: its drain is a problem, first seen when the head saw it.
        ours = [e for e in problems if "drained" in e["text"].lower()]
        assert [e["time"] for e in ours] == [drained["first_seen"]], problems
        xids = [e for e in problems if "Xid 94" in e["text"]]
        assert [e["time"] for e in xids] == [xid["first_seen"]], problems
        # The Xids the head received are in the timeline.
        received = [
            e for e in entries if e["kind"] == "xid" and "received by the head" in e["text"]
        ]
        assert received and all("Xid 94" in e["text"] and e["gpu"] == 3 for e in received)
