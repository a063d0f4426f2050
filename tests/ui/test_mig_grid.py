"""MIG slices in the grid: the real helper on a simulated MIG-enabled A100 and H100
(``--sim``), its hello and sample decoded as a client does, drawn at 80 and 200
columns: each slice on an indented line under its GPU."""

from __future__ import annotations

import io
import time

import pytest
from rich.cells import cell_len

from gputui.config.models import HealthThresholds
from gputui.remote.helper import run
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.ui.gpu_view import GpuRow, HostRow, SliceRow
from gputui.ui.head.view import Holder
from gputui.ui.model import SORT_KEYS, ClusterModel
from gputui.ui.widgets.grid_columns import plan_columns
from gputui.ui.widgets.grid_render import Palette, gpu_line, slice_line
from gputui.wire.decode import decode_helper_line
from gputui.wire.messages import Hello, Sample


def _model() -> ClusterModel:
    out = io.BytesIO()
    assert (
        run(["--sim", "a100-80gb-migmix+h100-mig+a100-80gb,name=mig1", "--once"], io.BytesIO(), out)
        == 0
    )
    hello, sample = (decode_helper_line(line) for line in out.getvalue().splitlines()[:2])
    assert isinstance(hello, Hello) and isinstance(sample, Sample)
    now = time.time()
    m = ClusterModel(HealthThresholds())
    m.apply(
        HostSnapshot(
            name="mig1",
            address="10.0.0.9",
            status=HostStatus.LIVE,
            pool="a100",
            hello=hello,
            sample=sample,
            received_at=now,
        )
    )
    return m


def test_slices_follow_their_gpu_in_every_order() -> None:
    m = _model()
    rows = m.rows()
    slices_of_0 = [SliceRow("mig1", 0, s) for s in range(3)]
    slices_of_1 = [SliceRow("mig1", 1, s) for s in range(7)]
    assert rows == [
        HostRow("mig1"),
        GpuRow("mig1", 0),
        *slices_of_0,
        GpuRow("mig1", 1),
        *slices_of_1,
        GpuRow("mig1", 2),
    ]
    flat = m.rows(sort=SORT_KEYS[1], grouped=False)
    for i, row in enumerate(flat):
        if isinstance(row, SliceRow):  # right under its GPU or a sibling slice
            above = flat[i - 1]
            assert above.index == row.index and (
                isinstance(above, SliceRow) or above == GpuRow("mig1", row.index)
            )
    assert m.rows("h100").count(GpuRow("mig1", 1)) == 1 and len(m.rows("h100")) == 1 + 1 + 7


@pytest.mark.parametrize("width", [80, 200])
def test_a_slice_line_shows_profile_memory_and_na_utilisation(width: int) -> None:
    m = _model()
    gpu = m.gpu(GpuRow("mig1", 0))
    assert gpu is not None
    second = gpu.slices[1]
    m.set_holders({second.uuid: Holder("job", 4, "nobody", time.time() - 30, "bert")})
    cols = plan_columns(width, True, 4, held=True)
    palette = Palette.plain()
    now = time.time()
    lines = [slice_line(gpu, m, cols, palette, now, slot=s).text for s in range(3)]
    assert all(cell_len(line) == width for line in lines)
    assert "└3g.40gb" in lines[0] and "└2g.20gb" in lines[1]
    assert all(" n/a " in line for line in lines)  # NVML gives no utilisation on MIG
    assert "0.0/39.2G" in lines[0] and "0.0/19.5G" in lines[2]
    assert "j4 nobody" in lines[1] and "j4" not in lines[0]
    assert all(line.rstrip().endswith("MIG") for line in lines)
    card = gpu_line(gpu, m, cols, palette, now).text
    assert cell_len(card) == width and "A100" in card
