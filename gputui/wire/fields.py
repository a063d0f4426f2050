"""The field types every wire message is made of: cleaned text and ranged numbers.

Shared by the helper's messages (``gputui.wire.messages``) and the requests to it and
their results (``gputui.wire.ops``), so a string or a number from a host is
checked the same way wherever it comes in. Strict: a bool or a numeric string is not
a number (an int is a fine float); NaN and infinity never are.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.fields import FieldInfo

from gputui.common.text import clean

MAX_GPUS = 64
"""GPUs one host reports at most (the helper's simulator keeps its own copy)."""
MAX_ERRORS = 64
MAX_NOTES = 16
_BIG = 2**63 - 1


def _short(value: str) -> str:
    # ``clean``'s own first test, inline: tens of strings a sample, nearly all plain.
    if len(value) <= 128 and value.isascii() and value.isprintable():
        return value
    return clean(value, 128)


def _long(value: str) -> str:
    if len(value) <= 512 and value.isascii() and value.isprintable():
        return value
    return clean(value, 512)


ShortText = Annotated[str, AfterValidator(_short)]
LongText = Annotated[str, AfterValidator(_long)]
ErrorMap = Annotated[dict[ShortText, ShortText], Field(max_length=MAX_ERRORS)]
Notes = Annotated[tuple[ShortText, ...], Field(max_length=MAX_NOTES)]

# Numbers, each with the range a real card or host can produce.
Count = Annotated[int, Field(ge=0, le=_BIG, strict=True)]
GpuIndex = Annotated[int, Field(ge=0, le=MAX_GPUS - 1, strict=True)]
Percent = Annotated[int, Field(ge=0, le=100, strict=True)]
MiB = Annotated[int, Field(ge=0, le=2**24, strict=True)]  # 16 TiB, far above any card
Celsius = Annotated[int, Field(ge=-40, le=200, strict=True)]
MHz = Annotated[int, Field(ge=0, le=100_000, strict=True)]
PcieGen = Annotated[int, Field(ge=0, le=16, strict=True)]
PcieWidth = Annotated[int, Field(ge=0, le=64, strict=True)]
Pid = Annotated[int, Field(ge=1, le=2**22, strict=True)]  # Linux's pid_max ceiling
ParentPid = Annotated[int, Field(ge=0, le=2**22, strict=True)]
"""0: no parent this host can name (pid 1, or a parent outside the pid namespace)."""
Uid = Annotated[int, Field(ge=0, le=2**32 - 2, strict=True)]
XidCode = Annotated[int, Field(ge=0, le=100_000, strict=True)]
Watts = Annotated[float, Field(ge=0, le=10_000, strict=True, allow_inf_nan=False)]
Epoch = Annotated[float, Field(ge=0, le=1e10, strict=True, allow_inf_nan=False)]  # < 2286
Seconds = Annotated[float, Field(ge=0, le=1e9, strict=True, allow_inf_nan=False)]
PTY_AID_MAX = 2**53
"""The largest terminal attachment id (the helper's ``ptyops.AID_MAX``)."""
AttachmentId = Annotated[int, Field(ge=1, le=PTY_AID_MAX, strict=True)]
"""A terminal attachment's id (``aid``), chosen by the client: 1 .. 2**53."""


def decoder_only(value: object) -> tuple[str, ...]:
    """``notes`` say what the decoder did to a message: a helper cannot write them."""
    return ()


class Wire(BaseModel):
    """A message from a helper (or a part of one)."""

    # Unknown fields from a newer helper are ignored; the hello handshake decides
    # whether the versions can talk at all.
    model_config = ConfigDict(extra="ignore", frozen=True)


_T = TypeVar("_T")


def wire_fields(model: type[Any]) -> dict[str, FieldInfo]:
    """The fields of a wire model or of a wire dataclass (``GpuSample``, its processes
    and NVLinks: slotted, for the head's cost per sample), by name."""
    if issubclass(model, BaseModel):
        return model.model_fields
    fields: dict[str, FieldInfo] = getattr(model, "__pydantic_fields__")  # noqa: B009
    return fields


def unchecked(obj: _T, **changes: Any) -> _T:
    """A copy of wire dataclass ``obj`` with ``changes``, values already checked (as a
    model's ``model_copy(update=...)``: nothing is checked again)."""
    copier = _COPIERS.get(type(obj)) or _copier(type(obj))
    new: _T = copier(obj)
    for name, value in changes.items():
        object.__setattr__(new, name, value)
    return new


_COPIERS: dict[type[Any], Callable[[Any], Any]] = {}


def _copier(cls: type[Any]) -> Callable[[Any], Any]:
    """A function that copies a slotted ``cls`` slot by slot, written out for ``cls``:
    each slot read as an attribute and written through its own slot descriptor (the
    class is frozen, so not by assignment). A console copies a GPU for each delta it
    takes: this is 2.4x as fast as a loop over the slots in C (``attrgetter`` and
    ``object.__setattr__``), and ``copy.copy`` (pickling's protocol) is slower still.

    The code is made from the class's own slot names, which are identifiers (a class
    statement made them), never from anything that came in."""
    slots: dict[str, Any] = {}
    for klass in reversed(cls.__mro__[:-1]):  # (``object`` has no slots to copy)
        if "__slots__" not in klass.__dict__:  # its instances have a ``__dict__``
            raise TypeError(f"{cls.__name__}: {klass.__name__} is not slotted")
        for name in klass.__dict__["__slots__"]:
            if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("__"):
                raise TypeError(f"{cls.__name__}: slot {name!r} cannot be copied by name")
            slots[name] = klass.__dict__[name].__set__
    lines = [f"    _{i}(made, obj.{name})" for i, name in enumerate(slots)]
    params = "".join(f", _{i}=_{i}" for i in range(len(slots)))
    source = f"def copy(obj, _new=_new, _cls=_cls{params}):\n    made = _new(_cls)\n"
    source += "\n".join(lines) + "\n    return made\n"
    scope: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    scope.update((f"_{i}", put) for i, put in enumerate(slots.values()))
    exec(compile(source, f"<copy of {cls.__name__}>", "exec"), scope)  # noqa: S102
    copy: Callable[[Any], Any] = scope["copy"]
    _COPIERS[cls] = copy
    return copy
