"""Each text column's cap, read from its table: a row is cut to its columns' lengths
in one place (``Tx.audit``, ``Tx.notice``), whoever built it, since SQLite itself keeps a text of
any length in a ``VARCHAR(128)``.
"""

from __future__ import annotations

from functools import cache
from typing import TypeVar

from sqlalchemy import inspect
from sqlmodel import SQLModel

Row = TypeVar("Row", bound=SQLModel)


@cache
def text_caps(model: type[SQLModel]) -> tuple[tuple[str, int], ...]:
    """(attribute, length) of every text column of ``model`` that has a length."""
    out = []
    for column in inspect(model).columns:
        length = getattr(column.type, "length", None)  # String, or sqlmodel's AutoString
        if isinstance(length, int) and length > 0:
            out.append((column.key, length))
    return tuple(out)


def capped(row: Row) -> Row:
    """``row`` with each text cut to its column's length (in place; returned)."""
    for name, length in text_caps(type(row)):
        value = getattr(row, name)
        if isinstance(value, str) and len(value) > length:
            setattr(row, name, value[:length])
    return row
