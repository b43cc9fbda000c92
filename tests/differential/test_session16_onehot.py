"""Differential pins of session 16: one-hot reads and item-shaped fills against RLlib 2.60.

Each deviation test carries its docs/deviations.md tag and asserts both sides: OUR behaviour and
RLlib's, so it flags the day RLlib changes (then revisit the row). Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_session16_onehot.py
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("ray.rllib")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from tests.differential._rllib_ops import OSAE, RSAE, OBuf, RBuf  # noqa: E402

pytestmark = pytest.mark.differential

D3 = gym.spaces.Discrete(3)
READS = {"int": 0, "slice": slice(0, 2), "list": [0, 1]}


def _pair(items: list[Any], finalized: bool, space: gym.Space[Any] = D3) -> tuple[Any, Any]:
    ours, theirs = OBuf(list(items), 0, space), RBuf(list(items), 0, space)
    if finalized:
        ours.finalize()
        theirs.finalize()
    return ours, theirs


def _rows(value: Any) -> list[Any]:
    return (
        [np.asarray(row).tolist() for row in value] if isinstance(value, list) else value.tolist()
    )


# ------------------------------------------------------------------------------ one-hot-bool
@pytest.mark.parametrize("read", list(READS), ids=list(READS))
def test_one_hot_of_a_numpy_bool_column_is_as_wide_as_the_space(
    read: str,
) -> None:  # "one-hot-bool"
    assert D3.contains(True)
    ours, theirs = _pair([True, False], finalized=True)
    got = ours.get(READS[read], one_hot_discrete=True)
    theirs_got = theirs.get(READS[read], one_hot_discrete=True)
    want = {"int": [0, 1, 0], "slice": [[0, 1, 0], [1, 0, 0]], "list": [[0, 1, 0], [1, 0, 0]]}
    assert got.dtype == np.float32 and got.tolist() == want[read]
    # RLlib one-hots a bool column as if it were Discrete(2).
    assert theirs_got.shape[-1] == 2
    assert (
        theirs_got.tolist()
        == {"int": [0, 1], "slice": [[0, 1], [1, 0]], "list": [[0, 1], [1, 0]]}[read]
    )


@pytest.mark.parametrize("read", list(READS), ids=list(READS))
def test_one_hot_of_list_mode_bools_agrees(read: str) -> None:
    ours, theirs = _pair([True, False], finalized=False)
    got, theirs_got = (b.get(READS[read], one_hot_discrete=True) for b in (ours, theirs))
    assert _rows(got) == _rows(theirs_got)
    assert np.asarray(got).shape[-1] == 3


# ---------------------------------------------------------------------- one-hot-out-of-range
@pytest.mark.parametrize("read", list(READS), ids=list(READS))
@pytest.mark.parametrize("finalized", [False, True], ids=["list", "numpy"])
def test_one_hot_of_a_value_outside_the_space_is_refused(
    finalized: bool, read: str
) -> None:  # "one-hot-out-of-range"
    ours, theirs = _pair([-1, 0], finalized)
    with pytest.raises(ValueError, match="out of range"):
        ours.get(READS[read], one_hot_discrete=True)
    # RLlib: -1 wraps round to the last slot, silently.
    first = np.asarray(theirs.get(READS[read], one_hot_discrete=True)).reshape(-1, 3)[0]
    assert first.tolist() == [0.0, 0.0, 1.0]
    high_ours, high_theirs = _pair([3, 0], finalized)
    with pytest.raises(ValueError, match="out of range"):
        high_ours.get(READS[read], one_hot_discrete=True)
    with pytest.raises(AssertionError):
        high_theirs.get(READS[read], one_hot_discrete=True)


# ------------------------------------------------------ agreement: items that are no value
@pytest.mark.parametrize("read", list(READS), ids=list(READS))
@pytest.mark.parametrize("finalized", [False, True], ids=["list", "numpy"])
def test_one_hot_of_array_items_agrees_with_rllib(finalized: bool, read: str) -> None:
    """An item ``np.array([1])`` (outside Discrete(3)) encodes to (1, 3) in every read form."""
    ours, theirs = _pair([np.array([1]), np.array([2])], finalized)
    got, theirs_got = (b.get(READS[read], one_hot_discrete=True) for b in (ours, theirs))
    assert _rows(got) == _rows(theirs_got)
    per_item = [[[0, 1, 0]], [[0, 0, 1]]]
    assert _rows(got) == (per_item[0] if read == "int" else per_item)


# ---------------------------------------------------------------------- nested-fill-no-space
ITEM = {"h": np.zeros(2, np.float32), "c": np.int64(0)}


def _episodes() -> tuple[Any, Any]:
    pair = []
    for cls in (OSAE, RSAE):
        ep = cls()
        ep.add_env_reset(0)
        for t in range(2):
            state = {"h": np.full(2, t, np.float32), "c": np.int64(t)}
            ep.add_env_step(t + 1, 0, 1.0, extra_model_outputs={"state": state})
        ep.to_numpy()
        pair.append(ep)
    return pair[0], pair[1]


def _layout(batch: Any) -> Any:
    return {key: (leaf.shape, leaf.dtype) for key, leaf in batch.items()}


@pytest.mark.parametrize("index", [[0, 5], [5, 6]], ids=["mixed", "fillers_only"])
def test_index_lists_pad_a_nested_column_alike(index: list[int]) -> None:
    ours, theirs = _episodes()
    got = ours.get_extra_model_outputs("state", index, fill=ITEM)
    theirs_got = theirs.get_extra_model_outputs("state", index, fill=ITEM)
    assert _layout(got) == _layout(theirs_got)
    for key in got:
        np.testing.assert_array_equal(got[key], theirs_got[key])


def test_slices_pad_a_nested_column_without_a_space() -> None:  # "nested-fill-no-space"
    ours, theirs = _episodes()
    mixed = ours.get_extra_model_outputs("state", slice(0, 4), fill=ITEM)
    fillers = ours.get_extra_model_outputs("state", slice(5, 7), fill=ITEM)
    assert _layout(mixed) == {"h": ((4, 2), np.float32), "c": ((4,), np.int64)}
    assert mixed["c"].tolist() == [0, 1, 0, 0]
    assert _layout(fillers) == {"h": ((2, 2), np.float32), "c": ((2,), np.int64)}
    # RLlib pads with an object array of the fill: a mixed slice fails, fillers only are objects.
    with pytest.raises(ValueError, match="same nested structure"):
        theirs.get_extra_model_outputs("state", slice(0, 4), fill=ITEM)
    objects = theirs.get_extra_model_outputs("state", slice(5, 7), fill=ITEM)
    assert isinstance(objects, np.ndarray) and objects.dtype == object and objects.shape == (2,)
