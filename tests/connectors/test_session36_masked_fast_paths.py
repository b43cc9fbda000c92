"""Masked arrays with masked entries in the Box reads' shortcuts, and in ``get_sample_batch``.

FlattenObservations (learner and inference rows) and FrameStack (inference rows) read the
observations of Box episodes in one stack; ``np.asarray`` there dropped a masked array's mask,
and the placeholder values under it were written to the batch as data, where the general path
(``batched_items``), ``to_numpy`` and the setters refuse such an item. The shortcuts now leave
it to the general path, which refuses it naming the column and item. ``get_sample_batch``
stacked a list-mode episode's columns the same way; it now refuses such rows naming the
column, as ``to_numpy`` does. A masked array with nothing masked is the plain array it holds:
every read gives what plain arrays give, the shortcuts' results the general path's.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import FlattenObservations, FrameStack, observations

BOX = gym.spaces.Box(-1e3, 1e3, (2,), np.float32)
SHORTCUTS = ("_last_box_rows", "_box_rows", "_last_box_frames")


def masked(values: list[float], mask: list[int]) -> np.ma.MaskedArray:
    return np.ma.masked_array(np.asarray(values, np.float32), mask=mask)


def episode(at: int | None, *, plain: bool = False, steps: int = 3) -> SingleAgentEpisode:
    """A list-mode Box episode whose observation ``at`` has its second entry masked (-999).

    Every other observation is a masked array with nothing masked (``plain``: a plain array).
    """
    obs: list[Any] = []
    for t in range(steps + 1):
        values = [float(t), -999.0 if t == at else 0.5]
        item = masked(values, [0, int(t == at)])
        obs.append(np.asarray(item) if plain else item)
    return SingleAgentEpisode(
        observations=obs,
        actions=[0] * steps,
        rewards=[0.0] * steps,
        observation_space=BOX,
        extra_model_outputs={"vf": [masked([0.5], [0]) for _ in range(steps)]},
        len_lookback_buffer=0,
    )


def general(connector: Any, eps: list[SingleAgentEpisode]) -> Any:
    """The connector's batch with the shortcuts switched off (the general path)."""
    saved = {name: getattr(observations, name) for name in SHORTCUTS}
    try:
        for name in SHORTCUTS:
            setattr(observations, name, lambda *args: None)
        return connector(eps, {})
    finally:
        for name, shortcut in saved.items():
            setattr(observations, name, shortcut)


CONNECTORS = [
    # (connector, the masked observation each refusal names: (step, item of items))
    (lambda: FlattenObservations(), 1, "item 1 of 3"),
    (lambda: FlattenObservations(inference=True), 3, "item 0 of 1"),
    (lambda: FrameStack(2, inference=True), 3, "item 1 of 2"),
    (lambda: FrameStack(2, inference=True), 2, "item 0 of 2"),
    (lambda: FrameStack(2), 1, "item 2 of 4"),  # the general path: refused before too
]


@pytest.mark.parametrize(("make", "at", "item"), CONNECTORS)
def test_masked_observations_are_refused(make: Any, at: int, item: str) -> None:
    eps = [episode(None), episode(at)]
    connector = make()
    name = "FlattenObservations'" if isinstance(connector, FlattenObservations) else "FrameStack's"
    want = f"^{name} 'obs' column: {item}: a numpy masked array with masked entries"
    with pytest.raises(ValueError, match=want):
        connector(eps, {})
    with pytest.raises(ValueError, match=want):  # the general path's refusal, word for word
        general(connector, eps)


@pytest.mark.parametrize("make", [make for make, _, _ in CONNECTORS])
def test_nothing_masked_reads_as_plain_arrays(make: Any) -> None:
    """The shortcuts give what plain arrays give, and what the general path gives."""
    got = make()([episode(None), episode(None)], {})["obs"]
    plain = make()([episode(None, plain=True), episode(None, plain=True)], {})["obs"]
    slow = general(make(), [episode(None), episode(None)])["obs"]
    for other in (plain, slow):
        assert type(got) is np.ndarray and got.dtype == other.dtype
        assert np.array_equal(got, other)


SAMPLE_BATCH = [
    # (the masked entry: column, step; the message's start)
    ("obs", 1, "SampleBatch column 'obs': item 1 of 3"),
    ("vf", 2, "SampleBatch column 'vf': item 2 of 3"),
]


@pytest.mark.parametrize(("column", "at", "want"), SAMPLE_BATCH)
def test_sample_batch_refuses_masked_rows(column: str, at: int, want: str) -> None:
    ep = episode(at if column == "obs" else None)
    if column == "vf":
        ep.extra_model_outputs["vf"][at] = masked([0.5], [1])
    with pytest.raises(ValueError, match=f"^{want}: a numpy masked array with masked entries"):
        ep.get_sample_batch()
    with pytest.raises(ValueError, match="masked entries"):  # what to_numpy says of them
        ep.to_numpy()


def test_sample_batch_nested_masked_rows_are_refused() -> None:
    rows = [{"a": np.zeros(2)}, {"a": np.ma.masked_array([1.0, 2.0], mask=[0, 1])}]
    with pytest.raises(ValueError, match=r"^SampleBatch column 'obs': item 1 of 2: a numpy mask"):
        SingleAgentEpisode(
            observations=[*rows, rows[0]],
            actions=[0, 0],
            rewards=[0.0, 0.0],
            len_lookback_buffer=0,
        ).get_sample_batch()


def test_sample_batch_nothing_masked_is_the_numpy_batch() -> None:
    got = episode(None).get_sample_batch()
    plain = episode(None, plain=True).get_sample_batch()
    numpied = episode(None).to_numpy().get_sample_batch()
    assert got.keys() == plain.keys() == numpied.keys()
    for key in ("obs", "actions", "rewards", "vf", "t"):
        for other in (plain, numpied):
            assert type(got[key]) is np.ndarray and got[key].dtype == other[key].dtype
            assert np.array_equal(got[key], other[key])
