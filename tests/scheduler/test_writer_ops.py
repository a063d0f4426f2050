"""The daemon's fast route to the writer (``daemon.WRITER_OPS``) takes exactly the ops
the writer's batches carry out: none that ``_on_line`` answers some other way, and
every op the protocol has is routed one way or the other."""

from __future__ import annotations

import ast
import inspect
import textwrap

from gputui.scheduler.head import batch, daemon, drains
from gputui.scheduler.head.chat import channels
from gputui.scheduler.server import wire


def _compared_ops(func: object) -> set[str]:
    """The op names a function compares ``request.op`` / ``op`` with (``==``, ``in``)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(func)))  # type: ignore[arg-type]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for right in node.comparators:
                if isinstance(right, ast.Constant) and isinstance(right.value, str):
                    names.add(right.value)
                if isinstance(right, ast.Tuple):
                    names |= {str(e.value) for e in right.elts if isinstance(e, ast.Constant)}
    return names


def test_writer_ops_are_the_batches_ops() -> None:
    handled = _compared_ops(batch.Batches._handle) | {"submit"} | set(drains.OPS)
    assert handled == daemon.WRITER_OPS, daemon.WRITER_OPS ^ handled


def test_no_writer_op_is_answered_elsewhere() -> None:
    elsewhere = _compared_ops(daemon.Head._on_line) | daemon.READS
    elsewhere |= set(channels.OPS)
    assert not (daemon.WRITER_OPS & elsewhere), daemon.WRITER_OPS & elsewhere
    assert set(wire.ARGS) <= daemon.WRITER_OPS | elsewhere, set(wire.ARGS) - elsewhere
