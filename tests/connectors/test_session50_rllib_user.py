"""Connectors a user migrating from RLlib's new API stack writes, run through the contract
suite (`episodes.testing`), as docs/testing.md describes.

Two custom pieces, the kind RLlib ships as ConnectorV2 pieces or users write as their own:

- ``LastActionsOneHot(k)``: the last ``k`` actions one-hot, written on the lookback getters
  (``neg_index_as_lookback``, ``fill``, ``one_hot_discrete``) as an RLlib user writes them.
- ``RunningMeanStd``: an observation filter with running statistics and
  ``get_state``/``set_state``, updated only by an explicit ``update(episodes)`` call (a filter
  that updates while it reads is a different function on every call: it cannot keep
  ``deterministic`` or ``lookback_across_cuts``, which the suite reports).
"""

from __future__ import annotations

from collections import UserDict
from types import MappingProxyType

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.connectors import (
    AddLearnerColumns,
    ConnectorPipeline,
    EpisodeConnector,
    FlattenObservations,
    FrameStack,
    PrevActionsPrevRewards,
    concat_rows,
    sliding_rows,
)
from episodes.testing import (
    ConnectorContract,
    ConnectorContractError,
    check_connector,
    check_deterministic,
    outputs_equal,
)
from episodes.testing.strategies import episodes as episode_strategy

OBS = gym.spaces.Box(-5.0, 5.0, (3,), np.float32)
ACT = gym.spaces.Discrete(3)


class LastActionsOneHot(EpisodeConnector):
    """``last_actions``: ``[rows, k, n]`` one-hots of the ``k`` actions before each row."""

    def __init__(self, k: int, *, inference: bool = False):
        super().__init__(inference=inference)
        self.k = k

    def __call__(self, episodes, batch):
        parts = []
        for ep in episodes:
            a, b = self.rows(ep)
            if b == a:
                # As the shipped connectors do: a list-mode read of no items is [], whose
                # one-hot width is lost (a numpy'd one is [0, n]): the contract suite's
                # list/numpy check reports a connector that keeps such parts.
                continue
            # Row t needs actions t-k .. t-1: L + k - 1 actions from a - k on; negative
            # indices reach into the lookback (and past it, the fill) as RLlib's do.
            acts = ep.get_actions(
                slice(a - self.k, b - 1),
                neg_index_as_lookback=True,
                fill=0,
                one_hot_discrete=True,
            )
            # An ongoing chunk's last observation has no action yet: b - 1 stops before it.
            parts.append(sliding_rows(np.asarray(acts, np.float32), self.k))
        if not parts:
            return batch
        return {**batch, "last_actions": concat_rows(parts)}


class RunningMeanStd(EpisodeConnector):
    """Normalises Box observations with running statistics (Welford / parallel update)."""

    def __init__(self, shape, *, clip: float = 10.0, inference: bool = False):
        super().__init__(inference=inference)
        self.clip = clip
        self.count = 0
        self.mean = np.zeros(shape, np.float64)
        self.m2 = np.zeros(shape, np.float64)

    def _obs(self, ep):
        a, b = self.rows(ep)
        obs = np.asarray(ep.get_observations(slice(a, b)), np.float64)
        return obs.reshape((b - a, *self.mean.shape))

    def update(self, episodes):
        """Adds the observations the rows of ``episodes`` hold to the statistics."""
        for ep in episodes:
            x = self._obs(ep)
            if not len(x):
                continue
            n, mean, m2 = len(x), x.mean(0), ((x - x.mean(0)) ** 2).sum(0)
            total = self.count + n
            delta = mean - self.mean
            self.mean = self.mean + delta * n / total
            self.m2 = self.m2 + m2 + delta**2 * self.count * n / total
            self.count = total

    def get_state(self):
        return {"count": self.count, "mean": self.mean.copy(), "m2": self.m2.copy()}

    def set_state(self, state):
        self.count, self.mean, self.m2 = state["count"], state["mean"].copy(), state["m2"].copy()

    def __call__(self, episodes, batch):
        std = np.sqrt(self.m2 / max(self.count, 1)) + 1e-8
        parts = [((self._obs(ep) - self.mean) / std).astype(np.float32) for ep in episodes]
        if not parts:
            return batch
        return {**batch, "obs": np.clip(concat_rows(parts), -self.clip, self.clip)}


class UpdatingMeanStd(RunningMeanStd):
    """RLlib's ``MeanStdFilter`` habit: the statistics move on every call."""

    def __call__(self, episodes, batch):
        self.update(episodes)
        return super().__call__(episodes, batch)


def _episode(actions, lookback):
    n = len(actions)
    return SingleAgentEpisode(
        observations=[np.full(3, i, np.float32) for i in range(n + 1)],
        actions=actions,
        rewards=[0.0] * n,
        observation_space=OBS,
        action_space=ACT,
        len_lookback_buffer=lookback,
    )


@pytest.mark.parametrize("k", [1, 2, 3])
def test_last_actions_one_hot_keeps_every_contract(k):
    check_connector(
        LastActionsOneHot(k),
        observation_space=OBS,
        action_space=ACT,
        lookback=k,
        max_examples=15,
        row_keys=["last_actions"],
    )


def test_last_actions_one_hot_inference_keeps_every_contract():
    check_connector(
        LastActionsOneHot(2, inference=True),
        observation_space=OBS,
        action_space=ACT,
        lookback=2,
        max_examples=15,
    )


@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(
    ep=episode_strategy(OBS, ACT, lookback=(0, 4), max_len=6),
    k=st.integers(1, 4),
    inference=st.booleans(),
)
def test_last_actions_one_hot_equals_prev_actions(ep, k, inference):
    """Written on the getters as an RLlib user writes it, it gives the shipped piece's rows."""
    import warnings

    from episodes.connectors import ShortLookbackWarning

    ours = LastActionsOneHot(k, inference=inference)([ep], {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShortLookbackWarning)
        shipped = PrevActionsPrevRewards(k, 0, fill=0, inference=inference)([ep], {})
    # No rows (a chunk without steps, read for learning): neither adds its column.
    assert ("last_actions" in ours) == ("prev_n_actions" in shipped)
    if shipped:
        np.testing.assert_array_equal(ours["last_actions"], shipped["prev_n_actions"])


def test_frozen_mean_std_keeps_every_contract():
    filt = RunningMeanStd((3,))
    filt.update([_episode([0, 1, 2, 0], 0)])
    check_connector(
        filt, observation_space=OBS, action_space=ACT, lookback=0, max_examples=15, row_keys=["obs"]
    )


def test_updating_mean_std_is_reported():
    """The suite reports an RLlib-style filter that updates while it reads: a chunk's rows
    differ from the whole episode's, since the statistics moved in between."""
    with pytest.raises(ConnectorContractError):
        check_connector(UpdatingMeanStd((3,)), observation_space=OBS, action_space=ACT, lookback=0)
    # Its two calls on one batch agree (the same data twice leaves mean and variance as
    # they were): deterministic alone does not catch it.
    check_deterministic(UpdatingMeanStd((3,)), [_episode([0, 1, 2], 0)])


def test_mean_std_state_round_trip_and_pipeline():
    filt = RunningMeanStd((3,))
    eps = [_episode([0, 1, 2, 0], 1), _episode([1, 1], 0)]
    filt.update(eps)
    flat = np.concatenate([np.asarray(ep.get_observations(slice(0, len(ep)))) for ep in eps])
    np.testing.assert_allclose(filt.mean, flat.mean(0))
    np.testing.assert_allclose(np.sqrt(filt.m2 / filt.count), flat.std(0))
    other = RunningMeanStd((3,))
    other.set_state(filt.get_state())
    pipe = ConnectorPipeline([other, LastActionsOneHot(2)])
    batch = pipe(eps, {})
    np.testing.assert_array_equal(batch["obs"], filt(eps, {})["obs"])
    assert batch["last_actions"].shape == (5, 2, 3)


class TestLastActionsContract(ConnectorContract):
    observation_space = OBS
    action_space = ACT
    lookback = 2
    row_keys = ("last_actions",)
    max_examples = 10

    def make_connector(self):
        return LastActionsOneHot(2)


# --- the batch argument: RLlib's pieces take a dict; ours name the connector otherwise --------

_SHIPPED = {
    "FrameStack": lambda: FrameStack(2),
    "FrameStack-inference": lambda: FrameStack(2, inference=True),
    "FlattenObservations": lambda: FlattenObservations(),
    "FlattenObservations-inference": lambda: FlattenObservations(inference=True),
    "PrevActionsPrevRewards": lambda: PrevActionsPrevRewards(2, 1),
    "PrevActionsPrevRewards-inference": lambda: PrevActionsPrevRewards(2, 1, inference=True),
    "AddLearnerColumns": lambda: AddLearnerColumns(),
}
_NOT_BATCHES = {
    "list": [],
    "str": "obs",
    "read-only": MappingProxyType({"kept": 1}),
    "tuple-pairs": (("obs", 1),),
}


@pytest.mark.parametrize("make", list(_SHIPPED.values()), ids=list(_SHIPPED))
@pytest.mark.parametrize("bad", list(_NOT_BATCHES.values()), ids=list(_NOT_BATCHES))
def test_shipped_connector_names_itself_for_a_batch_that_is_no_dict(make, bad):
    connector = make()
    who = type(connector).__name__
    with pytest.raises(TypeError, match=rf"^{who}: batch must be a dict .* or None, got "):
        connector([_episode([0, 1, 2], 1)], bad)


@pytest.mark.parametrize("make", list(_SHIPPED.values()), ids=list(_SHIPPED))
def test_shipped_connector_takes_none_as_a_new_batch_as_the_pipeline_does(make):
    eps = [_episode([0, 1, 2], 1), _episode([2, 2], 0)]
    alone = make()(eps, None)
    piped = ConnectorPipeline([make()])(eps, None)
    assert set(alone) == set(piped) and alone
    for key in alone:
        assert outputs_equal(alone[key], piped[key], check_dtype=True), key


def test_user_mapping_batch_is_written_into():
    """A mutable mapping of the caller's (not a dict) is taken and written into."""
    batch = UserDict()
    out = AddLearnerColumns(("actions",))([_episode([0, 1, 2], 0)], batch)
    assert out is batch and batch["actions"].tolist() == [0, 1, 2]
