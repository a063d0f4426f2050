"""Kernel-log Xid lines -> events matched to GPUs by PCI bus id."""

from __future__ import annotations

from datetime import datetime, timezone

from gputui.remote.kernlog import parse_xid_line, parse_xid_lines, pci_key, read_kmsg, xid_events

BOOT = 1_700_000_000.0
LINES = [
    "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, "
    "GPU has fallen off the bus.",
    "2025-03-02T10:20:30,250000+00:00 NVRM: Xid (PCI:0000:3B:00): 94, pid=4242, "
    "name=python3.10, Ch 00000008",
    "[Mon Mar  3 09:15:00 2025] NVRM: Xid (PCI:0000:af:00): 119, pid=777, name=trainer, "
    "Timeout after 6s of waiting for RPC response from GPU1 GSP!",
    "6,2044,98765432,-;NVRM: Xid (PCI:0001:5e:00): 48, pid='<unknown>', name=<unknown>, "
    "An uncorrectable double bit error (DBE) has been detected on GPU",
    "[ 1300.000000] nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context",
    "[ 1300.100000] NVRM: GPU at PCI:0000:3b:00: GPU-deadbeef",
]


def test_parse_formats() -> None:
    recs = parse_xid_lines(LINES, BOOT)
    assert [(r.pci_bus_id, r.xid) for r in recs] == [
        ("0000:3b:00", 79),
        ("0000:3B:00", 94),
        ("0000:af:00", 119),
        ("0001:5e:00", 48),
    ]
    assert recs[0].time == BOOT + 1234.56789
    assert recs[1].time == datetime(2025, 3, 2, 10, 20, 30, 250000, timezone.utc).timestamp()
    assert recs[2].time is not None
    assert recs[3].time == BOOT + 98.765432
    assert recs[1].text == "pid=4242, name=python3.10, Ch 00000008"
    assert recs[0].text.endswith("GPU has fallen off the bus.")


def test_non_xid_and_garbage_lines() -> None:
    assert parse_xid_line("") is None
    assert parse_xid_line("NVRM: Xid (PCI:zz): nope") is None
    assert parse_xid_line("[ 1.0] NVRM: Xid (PCI:0000:01:00): 13") is not None
    long = "NVRM: Xid (PCI:0000:01:00): 31, " + "x" * 10000
    rec = parse_xid_line(long)
    assert rec is not None and len(rec.text) <= 512


def test_pci_normalisation() -> None:
    assert pci_key("0000:19:00") == pci_key("00000000:19:00.0") == (0, 0x19, 0)
    assert pci_key("00000000:3B:00.0") == pci_key("0000:3b:00")
    assert pci_key("nonsense") is None


def test_events_map_to_gpus() -> None:
    gpus = [
        {"index": 0, "uuid": "GPU-a", "pci_bus_id": "00000000:3B:00.0"},
        {"index": 1, "uuid": "GPU-b", "pci_bus_id": "00000000:AF:00.0"},
    ]
    events = xid_events(parse_xid_lines(LINES, BOOT), gpus, now=5.0)
    assert [(e["gpu_index"], e["xid"]) for e in events] == [(0, 79), (0, 94), (1, 119), (None, 48)]
    assert all(e["type"] == "event" and e["source"] == "kernel-log" for e in events)
    assert events[3]["gpu_uuid"] is None and events[3]["pci_bus_id"] == "0001:5e:00"


def test_unreadable_kmsg_is_skipped(tmp_path: object) -> None:
    assert read_kmsg("/nonexistent/kmsg") is None


def test_nvswitch_sxids_are_read_as_switch_events_not_gpu_xids() -> None:
    lines = [
        "[  120.5] nvidia-nvswitch3: SXid (PCI:0000:c5:00.0): 24007, Fatal,"
        " Link 34 sourcetrack TCEN0 crumbstore ECC DBE Error",
        "[  121.0] nvidia-nvswitch1: SXid (PCI:0000:07:00.0): 12028, Non-fatal,"
        " Link 32 egress non-posted PRIV error (First)",
        "[  122.0] NVRM: Xid (PCI:0000:19:00): 79, pid=1, GPU has fallen off the bus.",
    ]
    records = parse_xid_lines(lines, boot=1000.0)
    assert [(r.kind, r.xid, r.pci_bus_id, r.time) for r in records] == [
        ("sxid", 24007, "0000:c5:00.0", 1120.5),
        ("sxid", 12028, "0000:07:00.0", 1121.0),
        ("xid", 79, "0000:19:00", 1122.0),
    ]
    gpus = [{"uuid": "GPU-a", "index": 0, "pci_bus_id": "00000000:C5:00.0"}]
    events = xid_events(records, gpus, now=2000.0)
    assert [(e["kind"], e["xid"], e["sxid"], e["gpu_uuid"]) for e in events] == [
        ("sxid", None, 24007, None),  # a switch's bus id is never a GPU's
        ("sxid", None, 12028, None),
        ("xid", 79, None, None),
    ]
    assert events[0]["text"].startswith("Fatal, Link 34")
