"""A sharing write decides which sources it takes in O(K log K), as the pairwise rule did.

``unalias`` compared every taken source's bytes with every span held before it (quadratic in
the leaves: a 4096-leaf ``write_block(share=True)`` spent most of its time there). The rule
is unchanged: a source is taken unless its bytes overlap a span held by another field (a
field taken before and kept, or one taken earlier in the same write); the first named takes
shared bytes, the later ones copy them; disjoint parts of one allocation are each taken.
``_reference`` below is that rule as it was written, pair by pair.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes.rollout import RolloutStorage, aliasing
from episodes.rollout.aliasing import _refused

Span = tuple[int, int]


def _reference(held: dict[str, Span], wanted: list[tuple[str, Span]]) -> list[int]:
    """The former loop: each wanted span against every span held by another field."""
    spans, refused = dict(held), []
    for k, (n, span) in enumerate(wanted):
        if any(a < span[1] and span[0] < b for m, (a, b) in spans.items() if m != n):
            refused.append(k)
        else:
            spans[n] = span
    return refused


# Small addresses, so spans touch, nest, repeat and overlap often; lengths 0 included.
_spans = st.tuples(st.integers(0, 24), st.integers(0, 8)).map(lambda s: (s[0], s[0] + s[1]))


@settings(max_examples=400, deadline=None)
@given(
    held=st.dictionaries(st.sampled_from(["h0", "h1", "h2", "h3", "x0"]), _spans, max_size=4),
    wanted=st.lists(st.tuples(st.sampled_from([f"x{i}" for i in range(12)]), _spans), max_size=12),
    unique=st.booleans(),
)
def test_refused_is_the_pairwise_rule(held, wanted, unique):
    if unique:  # as a write puts them: each field once, none of the kept ones
        wanted = [(f"w{k}", span) for k, (_, span) in enumerate(wanted)]
    assert _refused(held, wanted) == _reference(held, wanted)


# name -> (held, wanted, refused): the layouts the rule must keep
LAYOUTS = {
    "disjoint parts of one allocation": ({}, [("a", (0, 8)), ("b", (8, 16))], []),
    "identical: the first takes": ({}, [("a", (0, 8)), ("b", (0, 8))], [1]),
    "nested in a kept field": ({"k": (0, 32)}, [("a", (8, 16)), ("b", (32, 40))], [0]),
    "straddling two taken": ({}, [("a", (0, 8)), ("b", (16, 24)), ("c", (4, 20))], [2]),
    "an empty span inside a taken one": ({}, [("a", (0, 8)), ("b", (4, 4))], [1]),
    "an empty span at an edge": ({}, [("a", (0, 8)), ("b", (8, 8)), ("c", (0, 0))], []),
    "a refused span holds nothing": ({}, [("a", (0, 8)), ("b", (4, 12)), ("c", (8, 12))], [1]),
    "a field's own earlier span gives way": ({}, [("a", (0, 8)), ("a", (4, 12))], []),
}


@pytest.mark.parametrize("case", LAYOUTS)
def test_layouts(case):
    held, wanted, refused = LAYOUTS[case]
    assert _refused(held, wanted) == _reference(held, wanted) == refused


T, N = 2, 2
CELLS = T * N


def _view(bases: list[torch.Tensor], base: int, offset: int, width: int) -> torch.Tensor:
    return bases[base][offset : offset + CELLS * width].view(T, N, width)


_leaf = st.tuples(st.integers(0, 2), st.integers(0, 12))  # (base, offset in floats)


@settings(max_examples=150, deadline=None)
@given(
    first=st.lists(_leaf, min_size=3, max_size=3),
    obs=st.lists(_leaf, min_size=1, max_size=8),
)
def test_write_block_takes_what_the_pairwise_rule_takes(first, obs):
    """Two sharing writes of views into three allocations (other storages, one memory)."""
    bases = [torch.zeros(12 + 2 * CELLS) for _ in range(3)]
    spec = {f"k{i}": (1,) for i in range(len(obs))}
    storage = RolloutStorage("rl", N, T, spec, (2,))
    widths = {"actions": 2, "rewards": 1, "values": 1}
    sources = {name: _view(bases, *leaf, widths[name]) for name, leaf in zip(widths, first)}

    def span(t: torch.Tensor) -> Span:
        return t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()

    def taken(name: str, source: torch.Tensor) -> bool:
        return storage.tensors[name].data_ptr() == source.data_ptr()

    refused = _reference({}, [(n, span(s)) for n, s in sources.items()])
    storage.write_block(0, share=True, **sources)
    expected = [k not in refused for k in range(len(sources))]
    assert [taken(n, s) for n, s in sources.items()] == expected
    kept = {n: span(s) for n, s in sources.items() if taken(n, s)}

    leaves = {f"k{i}": _view(bases, *leaf, 1) for i, leaf in enumerate(obs)}
    wanted = [(f"observations/{k}", span(s)) for k, s in leaves.items()]
    refused = _reference(kept, wanted)
    values = {k: s.clone() for k, s in leaves.items()}
    storage.write_block(0, share=True, observations=leaves)
    got = [taken(f"observations/{k}", s) for k, s in leaves.items()]
    assert got == [k not in refused for k in range(len(leaves))]
    for k, value in values.items():  # taken or copied, the values are the sources'
        torch.testing.assert_close(storage.tensors[f"observations/{k}"], value)


def test_a_wide_sharing_write_compares_no_pairs(monkeypatch):
    calls = [0]
    overlap = aliasing._overlap

    def counting(a: Span, b: Span) -> bool:
        calls[0] += 1
        return overlap(a, b)

    monkeypatch.setattr(aliasing, "_overlap", counting)
    k = 256
    spec = {f"k{i:03d}": (1,) for i in range(k)}
    block = torch.randn(k, T, N, 1)  # disjoint parts of one allocation: all taken
    leaves = {name: block[i] for i, name in enumerate(spec)}
    storage = RolloutStorage("rl", N, T, spec, (2,))
    storage.write_block(0, share=True, observations=leaves)
    assert all(storage.observations[n].data_ptr() == leaves[n].data_ptr() for n in spec)
    # Pair by pair it was k * (k - 1) / 2 = 32640 comparisons.
    assert calls[0] <= k, calls[0]
    np.testing.assert_array_equal(storage.observations["k007"].numpy(), block[7].numpy())
