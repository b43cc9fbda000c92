"""Differential test: slices with a negative step, read and written, against RLlib 2.60.

RLlib resolves a slice's bounds onto storage positions and then lets Python slice the data
with the given step; we compute the same positions (``indexing.slice_positions``). Explicit
bounds, no fill: both libraries must agree item for item. (With ``start=None`` / ``stop=None``
RLlib reads nothing for a negative step; we read from the last item back to ``ts=0``: see
docs/deviations.md.)

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_negative_step.py
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("ray.rllib")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from ray.rllib.env.single_agent_episode import SingleAgentEpisode as RllibEpisode  # noqa: E402

from episodes import SingleAgentEpisode  # noqa: E402
from tests.differential._rllib_ops import OBuf, RBuf, assert_same, assert_same_outcome, call  # noqa: E402

pytestmark = pytest.mark.differential

SETTINGS = settings(derandomize=True, deadline=None, max_examples=400)


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    size = draw(st.integers(1, 8))
    lookback = draw(st.integers(0, size))
    bound = st.integers(-size - 3, size + 3)
    return {
        "data": list(range(10, 10 + size)),
        "lookback": lookback,
        "slice": slice(draw(bound), draw(bound), draw(st.sampled_from([-1, -2, -3]))),
        "neg": draw(st.booleans()),
        "finalized": draw(st.booleans()),
    }


def _pair(case: dict[str, Any]) -> tuple[Any, Any]:
    ours = OBuf(list(case["data"]), lookback=case["lookback"])
    theirs = RBuf(list(case["data"]), lookback=case["lookback"])
    if case["finalized"]:
        ours.finalize()
        theirs.finalize()
    return ours, theirs


@SETTINGS
@given(cases())
def test_negative_step_reads_match_rllib(case: dict[str, Any]) -> None:
    ours, theirs = _pair(case)
    kwargs = {"neg_index_as_lookback": case["neg"]}
    assert_same_outcome(
        call(ours.get, case["slice"], **kwargs), call(theirs.get, case["slice"], **kwargs), "get"
    )


@SETTINGS
@given(cases())
def test_negative_step_writes_match_rllib(case: dict[str, Any]) -> None:
    ours, theirs = _pair(case)
    addressed = len(ours.get(case["slice"], neg_index_as_lookback=case["neg"]))
    values = [-1 - i for i in range(addressed)]
    kwargs = {"at_indices": case["slice"], "neg_index_as_lookback": case["neg"]}
    outcome = call(theirs.set, list(values), **kwargs)
    if outcome.error is not None:
        return  # RLlib refuses some writes it could address; ours is pinned in tests/core
    call(ours.set, list(values), **kwargs)
    assert_same(ours.data, theirs.data, "data after set")


def test_the_issue_example_writes_positions_3_and_2() -> None:
    ours = OBuf(list(range(6)), lookback=2)
    ours.set([-1, -4], at_indices=slice(3, 1, -1), neg_index_as_lookback=True)
    assert ours.data == [0, 1, 2, 3, -4, -1]


def test_deviation_negative_step_defaults() -> None:
    # docs/deviations.md "negative-step-defaults": RLlib reads nothing, we read backwards.
    data = list(range(10, 16))
    theirs = RBuf(list(data), lookback=2)
    ours = OBuf(list(data), lookback=2)
    assert list(theirs.get(slice(None, None, -1))) == []
    assert ours.get(slice(None, None, -1)) == [15, 14, 13, 12]


def test_deviation_flag_types() -> None:
    # docs/deviations.md "flag-types": RLlib stores a string flag, we refuse it unchanged.
    theirs = RllibEpisode()
    theirs.add_env_reset(0)
    theirs.add_env_step(1, 0, 0.0, terminated="yes")
    assert theirs.is_terminated == "yes"
    ours = SingleAgentEpisode()
    ours.add_env_reset(0)
    with pytest.raises(TypeError, match="terminated must be a bool"):
        ours.add_env_step(1, 0, 0.0, terminated="yes")
    assert len(ours) == 0 and not ours.is_done
