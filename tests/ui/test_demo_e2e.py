"""End to end: the console on a simulated cluster over real SSH kills a real process."""

from __future__ import annotations

import pytest
from ui_helpers import until

from gputui.demo.cluster import DemoCluster
from gputui.fleet.fleet import Fleet
from gputui.telemetry import HostStatus
from gputui.ui.app import GpuTuiApp
from gputui.ui.gpu_view import GpuRow
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.widgets.process_table import ProcessTable

DEADLINE_S = 60.0


async def test_kill_a_real_workload_through_the_ui() -> None:
    async with DemoCluster(hosts=2, gpus=4) as cluster:
        if not cluster.workloads:
            pytest.skip("the demo could not start workloads here")
        fleet = Fleet(cluster.config())
        app = GpuTuiApp(fleet, cluster.config())
        async with app.run_test(size=(160, 40)) as pilot:
            expected = dict(zip(cluster.names, cluster.counts, strict=True))

            def all_live() -> bool:
                hosts = app.model.hosts
                return all(
                    name in hosts
                    and hosts[name].snapshot.status is HostStatus.LIVE
                    and len(hosts[name].gpus) == count
                    and all(g.sample is not None for g in hosts[name].gpus.values())
                    and all(GpuRow(name, i) in app.main.grid.rows for i in range(count))
                    for name, count in expected.items()
                )

            await until(pilot, all_live, "every host's GPUs live in the grid", DEADLINE_S)
            workload = cluster.workloads[0]
            row = GpuRow(workload.host, workload.gpu_index)

            def listed() -> bool:
                gpu = app.model.gpu(row)
                return gpu is not None and any(p.pid == workload.pid for p in gpu.processes)

            await until(pilot, listed, f"pid {workload.pid} on {row}", DEADLINE_S)
            assert app.main.grid.select(row)
            await pilot.pause()
            table = app.main.query_one(ProcessTable)
            pids = [entry[1].pid for entry in table._entries]
            table.move_cursor(row=pids.index(workload.pid))
            await pilot.pause()
            await pilot.press("K")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmScreen)
            assert f"pid {workload.pid}" in app.screen.question.plain
            await pilot.press("y")
            await until(
                pilot, lambda: workload.process.poll() is not None, "the workload exits", DEADLINE_S
            )
            notes = [n.message for n in app._notifications]
            assert notes, "the outcome is shown"
