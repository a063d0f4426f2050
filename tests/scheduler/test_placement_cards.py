"""Placement and what the head knows of a card: clean cards first, cards with phantom
memory, a rogue process or a health warning last, cards with a critical problem
never (``scheduler.placement``; ``gputui.scheduler.policy.cards``)."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_strategies import views

from gputui.config.scheduler import Placement
from gputui.scheduler.policy import cards, model, passes
from gputui.scheduler.policy.cards import CardProblem
from gputui.scheduler.policy.model import ClusterView, GpuSlot, Want
from gputui.scheduler.policy.reference import decide_ref

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
RULES = Placement()


@st.composite
def judged_views(draw: st.DrawFn) -> tuple[ClusterView, dict[str, tuple[CardProblem, ...]]]:
    """A generated view whose cards each have problems of some kinds, judged by the
    default rules as the head judges them."""
    view = draw(views())
    problems: dict[str, tuple[CardProblem, ...]] = {}
    slots = []
    for slot in view.gpus:
        plain = dataclasses.replace(slot, last=False)
        kinds = draw(st.lists(st.sampled_from(cards.KINDS), max_size=2, unique=True))
        if draw(st.booleans()):
            kinds = []
        problems[slot.uuid] = tuple(CardProblem(k, f"{k} here") for k in kinds)
        slots.append(cards.judged(plain, kinds, RULES))
    return dataclasses.replace(view, gpus=tuple(slots)), problems


@SETTINGS
@given(judged_views())
def test_a_card_with_a_critical_problem_is_never_chosen(
    drawn: tuple[ClusterView, dict[str, tuple[CardProblem, ...]]],
) -> None:
    view, problems = drawn
    decisions = passes.decide(view)
    assert decisions == decide_ref(view)
    critical = {u for u, found in problems.items() if any(p.kind == "critical" for p in found)}
    for place in decisions.place:
        assert not critical & set(place.gpu_uuids), place


@SETTINGS
@given(judged_views(), st.integers(0, 30))
def test_a_clean_card_is_preferred_over_a_dirty_one_when_both_fit(
    drawn: tuple[ClusterView, dict[str, tuple[CardProblem, ...]]], pick: int
) -> None:
    view, _ = drawn
    line = [w for w in view.waiting if w.blocked is None and not w.off_hours_only]
    if not line:
        return
    want = dataclasses.replace(line[pick % len(line)], over_quota=False)
    alone = dataclasses.replace(view, waiting=(want,))
    for decide in (passes.decide, decide_ref):
        placed = decide(alone).place
        if not placed:
            continue
        (place,) = placed
        chosen = [g for g in alone.gpus if g.uuid in place.gpu_uuids]
        dirty = sum(1 for g in chosen if g.last)
        if dirty == 0:
            continue
        # It took a card placement avoids: no host had as many clean ones free.
        for host, slots in model.by_host(alone.gpus).items():
            clean = [g for g in slots if g.free and not g.last and want.fits(g)]
            assert len(clean) < want.gpus or (want.named and host != place.host), (host, place)
        on_host = [g for g in alone.gpus if g.host == place.host and g.free and want.fits(g)]
        assert dirty == max(0, want.gpus - sum(1 for g in on_host if not g.last))


def _slot(host: str, index: int, *, last: bool = False) -> GpuSlot:
    return GpuSlot(f"GPU-{host}-{index}", host, index, last=last)


def test_best_fit_gives_way_to_a_host_of_clean_cards() -> None:
    # node1 is the better fit (fewer free), but its free card has phantom memory.
    gpus = (
        _slot("node1", 0, last=True),
        _slot("node1", 1).held(busy=True),
        _slot("node2", 0),
        _slot("node2", 1),
    )
    want = Want("job", 1, 1)
    decided = passes.decide(ClusterView(gpus=gpus, waiting=(want,)))
    assert decided.place == (model.Place("job", 1, "node2", ("GPU-node2-0",)),)
    hosts = model.by_host(gpus)
    assert model.best_fit(want, hosts, set()) == decided.place[0]


def test_on_one_host_the_clean_cards_go_first_and_a_dirty_one_only_to_make_up() -> None:
    gpus = (_slot("n", 0, last=True), _slot("n", 1), _slot("n", 2, last=True), _slot("n", 3))
    two = passes.decide(ClusterView(gpus=gpus, waiting=(Want("job", 1, 2),)))
    assert two.place[0].gpu_uuids == ("GPU-n-1", "GPU-n-3")
    three = passes.decide(ClusterView(gpus=gpus, waiting=(Want("job", 1, 3),)))
    assert three.place[0].gpu_uuids == ("GPU-n-1", "GPU-n-3", "GPU-n-0")


def test_only_critical_cards_fit_so_it_waits_fenced() -> None:
    slot = cards.judged(_slot("n", 0), ["critical"], RULES)
    decided = passes.decide(ClusterView(gpus=(slot,), waiting=(Want("job", 1, 1),)))
    assert decided.place == ()
    assert decided.wait[0].reason == model.FENCED


def test_the_rules_are_configurable() -> None:
    rogue_never = Placement(avoid=["phantom"], never=["rogue", "critical"])
    assert cards.standing(["rogue"], rogue_never) == cards.NEVER
    assert cards.standing(["warning"], rogue_never) == cards.CLEAN
    assert cards.standing(["phantom", "warning"], rogue_never) == cards.LAST
    nothing = Placement(avoid=[], never=[])
    slot = _slot("n", 0)
    assert cards.judged(slot, ["critical"], nothing) is slot


def test_explain_names_the_cards_passed_over_and_why() -> None:
    gpus = (_slot("node1", 2), _slot("node1", 3), _slot("node2", 0))
    problems = {
        "GPU-node1-3": (CardProblem("phantom", "20.0 GiB held by no process"),),
        "GPU-node2-0": (CardProblem("critical", "HW slowdown in 12 of the last 15 minutes"),),
    }
    lines = [p.line() for p in cards.passed_over(Want("job", 1, 1), gpus, problems, RULES)]
    assert lines == [
        "gpu3 on node1 passed over: 20.0 GiB held by no process (used last)",
        "gpu0 on node2 passed over: HW slowdown in 12 of the last 15 minutes (never used)",
    ]
    # An allocated card is not passed over (it was never free to take).
    busy = {"GPU-node1-3"}
    assert len(cards.passed_over(Want("job", 1, 1), gpus, problems, RULES, busy)) == 1


_owners = st.sampled_from(["alice", "bob", None])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 2**22), _owners, st.integers(0, 70_000)), max_size=5),
    st.one_of(st.none(), st.integers(0, 100)),
    st.integers(0, 81_920),
)
def test_a_cards_line_is_its_words_english_made_when_read(
    procs: list[tuple[int, str | None, int]], util: int | None, used: int
) -> None:
    """A rogue or phantom card's line is made only when read (the head finds a card's
    problems every sample; placement reads their kinds): it is its words' English, and
    a problem with it equals one given the line made at once."""
    from gputui.scheduler.head.watch.cards import of_gpu
    from gputui.wire.messages import GpuSample, ProcessSample

    gpu = GpuSample(
        index=0,
        uuid="GPU-a",
        util_gpu=util,
        mem_used_mib=used,
        processes=tuple(ProcessSample(pid=p, uid=u, user=n) for p, n, u in procs),
    )
    for problem in of_gpu(gpu, (), exempt_users=()):
        assert problem.said is not None
        line = problem.said.english()
        assert problem.why == line and problem.why is problem.why  # made once
        assert problem == CardProblem(problem.kind, line, problem.said)
        assert problem.words() is problem.said
        assert copy.deepcopy(problem) == problem == pickle.loads(pickle.dumps(problem))
        with pytest.raises(AttributeError):
            problem.kind = "clean"  # type: ignore[misc]
