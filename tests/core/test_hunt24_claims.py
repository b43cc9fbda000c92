"""Contract audit, round 24: claims of docs/contract.md the code broke, each pinned here.

- A numpy'd episode took a list-mode successor's out-of-space steps through ``concat_episode``
  (§6.3: "as ``add_env_step`` does").
- ``get_sample_batch`` made an object array of dict rows that do not stack (§7: "a
  ``ValueError`` naming the column").
- ``np.asarray(buf)`` of a numpy'd Tuple column came back transposed, of a Dict column 0-d.
- ``get_return`` raised a raw ``TypeError`` for a ``Decimal`` beside a float reward.
- ``extend`` of a failing iterable left list mode changed; a numpy'd buffer refused
  generators and sets.
- A filled read with a negative step beyond int64 raised ``OverflowError``.
"""

from __future__ import annotations

import copy
from decimal import Decimal

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode

BOX = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
ACTIONS = gym.spaces.Discrete(3)


def _episode(numpy: bool) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        "e",
        observations=[np.zeros(2, np.float32)] * 2,
        actions=[0],
        rewards=[1.0],
        observation_space=BOX,
        action_space=ACTIONS,
        len_lookback_buffer=0,
    )
    return ep.to_numpy() if numpy else ep


@pytest.mark.parametrize(
    ("obs", "action", "what"),
    [([5.0, 5.0], 1, "observation"), ([0.5, 0.5], 7, "action")],
    ids=["observation", "action"],
)
def test_a_numpy_episode_refuses_a_list_successors_out_of_space_steps(obs, action, what) -> None:
    ep = _episode(numpy=True)
    nxt = ep.cut()
    nxt = SingleAgentEpisode(
        "e",
        observations=[np.zeros(2, np.float32), np.asarray(obs, np.float32)],
        actions=[action],
        rewards=[1.0],
        t_started=ep.t,
        len_lookback_buffer=0,
    )
    before = copy.deepcopy(ep)
    with pytest.raises(ValueError, match=f"other's {what} .* not in this episode's {what} space"):
        ep.concat_episode(nxt)
    assert ep == before


def test_a_numpy_successor_joins_as_its_columns_hold_it() -> None:
    # Runner chunks and datasets record observations as the env gave them: joined back.
    ep = _episode(numpy=True)
    nxt = SingleAgentEpisode(
        "e",
        observations=[np.zeros(2, np.float32), np.full(2, 5.0, np.float32)],
        actions=[1],
        rewards=[1.0],
        t_started=ep.t,
        len_lookback_buffer=0,
    ).to_numpy()
    ep.concat_episode(nxt)
    assert ep.get_observations(-1).tolist() == [5.0, 5.0]


@pytest.mark.parametrize("ragged", ["leaf-shape", "keys"])
def test_dict_rows_that_do_not_stack_are_a_value_error(ragged) -> None:
    second = {"a": np.zeros(2)} if ragged == "leaf-shape" else {"b": np.zeros(1)}
    ep = SingleAgentEpisode(
        "e",
        observations=[{"a": np.zeros(1)}, second, second],
        actions=[0, 0],
        rewards=[1.0, 1.0],
        len_lookback_buffer=0,
    )
    with pytest.raises(ValueError, match="SampleBatch column 'obs'"):
        ep.get_sample_batch()


PAIR = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Discrete(3)))


def test_list_rows_without_a_space_stay_rows() -> None:
    # A list-mode batch through to_numpy() (tried in this round, then taken back) read plain
    # list rows as structure: a (3, 2) column came back as two arrays of 3.
    ep = SingleAgentEpisode(
        "e",
        observations=[[0.0, 0.1], [1.0, 1.1], [2.0, 2.1], [3.0, 3.1]],
        actions=[0, 0, 0],
        rewards=[1.0] * 3,
        len_lookback_buffer=0,
    )
    obs = ep.get_sample_batch()["obs"]
    assert isinstance(obs, np.ndarray) and obs.shape == (3, 2)


@pytest.mark.parametrize(
    ("items", "space"),
    [
        ([(1, 2.0), (3, 4.0), (5, 6.0)], None),
        ([{"a": 1}, {"a": 2}, {"a": 3}], None),
    ],
    ids=["tuple", "dict"],
)
def test_asarray_of_a_nested_column_is_the_same_in_both_modes(items, space) -> None:
    listed = InfiniteLookbackBuffer(list(items), space=space)
    numpyd = InfiniteLookbackBuffer(list(items), space=space)
    numpyd.finalize()
    a, b = np.asarray(listed), np.asarray(numpyd)
    assert a.shape == b.shape
    assert [np.asarray(x).tolist() if not isinstance(x, dict) else x for x in a.tolist()] == [
        np.asarray(x).tolist() if not isinstance(x, dict) else {k: int(v) for k, v in x.items()}
        for x in b.tolist()
    ]


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_get_return_adds_a_decimal_and_a_float(numpy) -> None:
    ep = SingleAgentEpisode(
        "e",
        observations=[0, 1, 2],
        actions=[0, 0],
        rewards=[Decimal("1.5"), 0.5],
        len_lookback_buffer=0,
    )
    if numpy:
        ep.to_numpy()
    assert ep.get_return() == 2.0


def _fails_after_two():
    yield 1
    yield 2
    raise RuntimeError("source failed")


@pytest.mark.parametrize("finalized", [False, True], ids=["list", "numpy"])
def test_extend_reads_an_iterable_whole_first(finalized) -> None:
    buf = InfiniteLookbackBuffer([0])
    if finalized:
        buf.finalize()
    with pytest.raises(RuntimeError, match="source failed"):
        buf.extend(_fails_after_two())
    assert np.asarray(buf.get()).tolist() == [0]
    for items in ((x for x in (1, 2)), {1, 2}, range(1, 3)):
        other = InfiniteLookbackBuffer([0])
        if finalized:
            other.finalize()
        other.extend(items)
        assert sorted(np.asarray(other.get()).tolist()) == [0, 1, 2]


@pytest.mark.parametrize("finalized", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("step", [-(2**63), -(2**64), -(2**70)])
def test_a_filled_read_with_a_step_beyond_int64_reads_its_few_items(finalized, step) -> None:
    buf = InfiniteLookbackBuffer([10, 11, 12])
    if finalized:
        buf.finalize()
    got = np.asarray(buf.get(slice(2**70, -(2**70), step), fill=0))
    assert got.shape == (-(-(2**71) // -step),)


def test_concat_with_a_2d_multidiscrete_space_warns_nothing() -> None:
    import warnings

    space = gym.spaces.MultiDiscrete([[2, 3], [4, 5]])
    ep = SingleAgentEpisode(
        "e",
        observations=[np.zeros((2, 2), np.int64)] * 2,
        actions=[0],
        rewards=[1.0],
        observation_space=space,
        len_lookback_buffer=0,
    )
    nxt = ep.cut()
    nxt.add_env_step(np.ones((2, 2), np.int64), 1, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ep.concat_episode(nxt)
    assert len(ep) == 2
