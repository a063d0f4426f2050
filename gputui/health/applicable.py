"""Whether a check a card could not answer is *unknown* or *not applicable* to it.

A reading NVML could not take is null with its error name. Where the card's model
does not have the feature at all, the check does not apply (it is neither ok nor a
gap to report); anywhere else the check is unknown: not ok, and the view says why.
``verdict`` decides, from the reading's field, NVML's error, the card's name (its
model) and the other readings of the same card:

===============  ============  =============================================  ==============
check            NVML error    the card                                       verdict
===============  ============  =============================================  ==============
NVLink           NotSupported  not registered with an NVSwitch fabric (no     not applicable
                               NVLink links at all: a PCIe card)
NVLink           NotSupported  registered with a fabric (it has NVLinks)      unknown
NVSwitch fabric  NotSupported  any (only NVSwitch systems have a fabric)      not applicable
retired pages    NotSupported  Ampere or later (they remap rows instead), a   not applicable
                               GeForce, or its remapped rows read fine
retired pages    NotSupported  before Ampere, or a model not known            unknown
row remapping    NotSupported  before Ampere (they retire pages instead), a   not applicable
                               GeForce, or its retired pages read fine
row remapping    NotSupported  Ampere or later datacenter, or not known       unknown
any other check  NotSupported  any (ECC on a GeForce stays unknown: its       unknown
                               memory errors cannot be seen)
any check        other errors  any (Unknown, GpuIsLost, Timeout,              unknown
                               NoPermission, FunctionNotFound ...)
===============  ============  =============================================  ==============

(NVSwitch fabric ``not-supported`` is a reading, not an error: it is never listed.)
Pure: no I/O, the same answer for the same readings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from gputui.common.i18n import N_

Verdict = Literal["unknown", "not-applicable"]

NOT_SUPPORTED = N_("NotSupported")
SHOULD_HAVE_IT = N_("NotSupported, though this card should have it")
"""The reason shown for a NotSupported reading on a card whose model has the feature."""

# Card names by architecture: NVML's names ("NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-32GB",
# "NVIDIA GeForce RTX 3090", "NVIDIA H100 80GB HBM3", "NVIDIA L40S", "NVIDIA RTX A6000").
_AMPERE_OR_LATER = re.compile(
    r"\b(?:G?[AHB]\d{1,3}|GB\d{3}|L\d{1,2}S?|RTX A\d{3,4}|RTX \d{4} Ada|RTX PRO"
    r"|RTX [345]0\d0(?: Ti| SUPER)?|A\d{1,3}X?)\b",
    re.IGNORECASE,
)
_BEFORE_AMPERE = re.compile(
    r"\b(?:Tesla|Quadro|TITAN|GTX|RTX 20\d0|[KMP]\d{1,3}|G?V100|T4|T\d{3,4})\b", re.IGNORECASE
)
_FABRIC_STATES = frozenset({"not-started", "in-progress", "completed"})


def on_fabric(state: object) -> bool:
    """Whether a fabric state reading says the card is on an NVSwitch fabric."""
    return state in _FABRIC_STATES


def ampere_or_later(name: str | None) -> bool | None:
    """Whether the card (by its NVML name) is Ampere or later; None when not known."""
    if not name:
        return None
    if _BEFORE_AMPERE.search(name):
        return False
    if _AMPERE_OR_LATER.search(name):
        return True
    return None


def verdict(
    field: str,
    error: str,
    name: str | None,
    errors: Mapping[str, str],
    readings: Mapping[str, object],
) -> tuple[Verdict, str]:
    """Whether the card's ``field`` reading that failed with NVML ``error`` is unknown
    or does not apply to it, and the reason a view shows (NVML's error; for
    NotSupported on a feature the model has, that it should have it). ``name``: the
    card's NVML name; ``errors`` and ``readings``: its other readings' errors and
    values (its health sample)."""
    if error != NOT_SUPPORTED:
        return "unknown", error
    if field == "fabric_state":
        return "not-applicable", error
    if field == "nvlinks":
        fabric = on_fabric(readings.get("fabric_state"))
        return ("unknown", SHOULD_HAVE_IT) if fabric else ("not-applicable", error)
    geforce = bool(name) and "geforce" in str(name).lower()
    modern = ampere_or_later(name)
    if field in _RETIRED:
        remaps = "remap_pending" not in errors and readings.get("remap_pending") is not None
        if geforce or modern is True or remaps:
            return "not-applicable", error
        return "unknown", SHOULD_HAVE_IT if modern is False else error
    if field in _REMAP:
        retires = "retired_pending" not in errors and readings.get("retired_pending") is not None
        if geforce or modern is False or retires:
            return "not-applicable", error
        return "unknown", SHOULD_HAVE_IT if modern is True else error
    return "unknown", error


_RETIRED = frozenset({"retired_pending", "retired_sbe", "retired_dbe"})
_REMAP = frozenset(
    {"remap_pending", "remap_failed", "remapped_correctable", "remapped_uncorrectable"}
)
