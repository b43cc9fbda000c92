"""Differential pins of validation hunt 20: vector returns, bookkeeping rows, infos agreements.

Each deviation test names its docs/deviations.md tag and asserts both sides; the agreement
tests pin where we now record what RLlib 2.60 records. Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_validate20.py
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

pytest.importorskip("ray.rllib")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from tests.differential._rllib_ops import OSAE, RSAE, OBuf, RBuf  # noqa: E402

pytestmark = pytest.mark.differential


def _stepped(cls: Any, rewards: list[Any] | None = None) -> Any:
    ep = cls("x")
    ep.add_env_reset(0)
    for i, reward in enumerate(rewards if rewards is not None else [1.0, 1.0, 1.0]):
        ep.add_env_step(i + 1, 0, reward)
    return ep


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_return_of_vector_rewards(numpy: bool) -> None:  # "return-vector-rewards"
    rewards = [np.array([1.0, 10.0]), np.array([1.0, 10.0])]
    theirs, ours = _stepped(RSAE, rewards), _stepped(OSAE, rewards)
    if numpy:
        theirs.to_numpy()
        ours.to_numpy()
    assert theirs.get_return().tolist() == [2.0, 20.0]
    with pytest.raises(ValueError, match=r"one number per step .* shape \(2, 2\)"):
        ours.get_return()
    assert "return=?" in repr(ours)


def test_validate_checks_t_against_the_rewards() -> None:  # "validate-time-steps"
    for change in ({"t": 10}, {"t_started": 2}):
        theirs, ours = _stepped(RSAE), _stepped(OSAE)
        for ep in (theirs, ours):
            for name, value in change.items():
                setattr(ep, name, value)
        theirs.validate()  # passes: RLlib checks the column lengths only
        with pytest.raises(AssertionError, match="rewards after the lookback"):
            ours.validate()


def test_an_int_index_on_an_episode() -> None:  # "episode-int-index"
    with pytest.raises(NotImplementedError, match="Only slice"):
        _stepped(RSAE)[1]
    with pytest.raises(TypeError, match="only slices"):
        _stepped(OSAE)[1]


def test_episode_equality_and_hash() -> None:  # "episode-eq-by-value"
    theirs, ours = _stepped(RSAE), _stepped(OSAE)
    assert theirs != copy.deepcopy(theirs) and theirs == theirs  # identity
    assert isinstance(hash(theirs), int)
    assert ours == copy.deepcopy(ours)
    with pytest.raises(TypeError, match="unhashable"):
        hash(ours)


def test_cut_with_a_negative_lookback() -> None:  # "cut-negative-lookback"
    with pytest.raises(AssertionError):
        _stepped(RSAE).cut(-1)
    ours = _stepped(OSAE)
    before = copy.deepcopy(ours)
    with pytest.raises(ValueError, match="len_lookback_buffer must be >= 0"):
        ours.cut(-1)
    assert ours == before


def test_buffer_with_a_negative_lookback() -> None:  # "buffer-negative-lookback"
    assert len(RBuf([0, 1], lookback=-1)) == 3  # more items than it holds
    with pytest.raises(ValueError, match="lookback must be >= 0"):
        OBuf([0, 1], lookback=-1)


# ------------------------------------------------------------------------------ agreements
@pytest.mark.parametrize("infos", [[], (), 0, "", False, None], ids=repr)
def test_falsy_infos_record_an_empty_dict_in_both(infos: Any) -> None:
    got = []
    for cls in (OSAE, RSAE):
        ep = cls("x")
        ep.add_env_reset(0, infos)
        ep.add_env_step(1, 0, 1.0, infos)
        got.append(ep.get_infos())
    assert got[0] == got[1] == [{}, {}]


def test_an_empty_infos_buffer_means_default_infos_in_both() -> None:
    got = [
        cls(observations=[0, 1], infos=buf(), actions=[0], rewards=[1.0], len_lookback_buffer=0)
        for cls, buf in ((OSAE, OBuf), (RSAE, RBuf))
    ]
    assert got[0].get_infos() == got[1].get_infos() == [{}, {}]
    got[0].validate()


def test_scalar_returns_still_agree() -> None:
    rewards = [1.0, np.float64(2.5), 3]
    assert _stepped(OSAE, rewards).get_return() == _stepped(RSAE, rewards).get_return() == 6.5


def _four_steps(cls: type) -> Any:
    return cls(
        "x",
        observations=[0, 1, 2, 3, 4],
        actions=[0, 1, 2, 3],
        rewards=[1.0, 2.0, 3.0, 4.0],
        len_lookback_buffer=0,
    )


def test_slice_with_a_negative_lookback() -> None:  # "slice-negative-lookback"
    assert _four_steps(RSAE).slice(slice(1, 3), len_lookback_buffer=-1).observations.lookback == -1
    ours = _four_steps(OSAE)
    before = copy.deepcopy(ours)
    with pytest.raises(ValueError, match="len_lookback_buffer must be >= 0"):
        ours.slice(slice(1, 3), len_lookback_buffer=-1)
    assert ours == before


def test_bool_lookbacks() -> None:  # "bool-lookback"
    columns = dict(observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 2.0])
    assert RSAE("x", **columns, len_lookback_buffer=True).observations.lookback is True
    assert _four_steps(RSAE).cut(True).observations.lookback == 1
    with pytest.raises(TypeError, match="len_lookback_buffer"):
        OSAE("x", **columns, len_lookback_buffer=True)
    with pytest.raises(TypeError, match="len_lookback_buffer"):
        _four_steps(OSAE).cut(True)
    with pytest.raises(TypeError, match="lookback"):
        OBuf([0, 1], lookback=True)


def test_buffer_state_is_read_only() -> None:  # "buffer-state-read-only"
    theirs = RBuf([0, 1, 2], lookback=1)
    theirs.data = [5, 6, 7, 8]
    assert theirs.get() == [6, 7, 8]
    assert RBuf([0], space=gym.spaces.Dict({"a": gym.spaces.Discrete(4)})).space_struct == {
        "a": gym.spaces.Discrete(4)
    }
    ours = OBuf([0, 1, 2], lookback=1)
    for name, value in (("data", [5, 6, 7, 8]), ("finalized", False)):
        with pytest.raises(AttributeError):
            setattr(ours, name, value)
    assert not hasattr(ours, "space_struct")
    ours.lookback = 2  # an assignment both take, unchecked in both
    assert ours.get() == [2]
