"""Regression tests for confirmed replay bugs (bug hunt edge11): each failed before its fix."""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter
from episodes.replay import (
    EpisodeReplayBuffer,
    EvictedEpisodeError,
    PrioritizedEpisodeReplayBuffer,
)


def _obs(t: float) -> np.ndarray:
    return np.array([float(t)], np.float32)


def _head(id_: Any = "a", n: int = 3, t0: int = 0, **flags: bool) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[_obs(t) for t in range(t0, t0 + n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        infos=[{"t": t} for t in range(t0, t0 + n + 1)],
        extra_model_outputs={"vf": [0.5] * n},
        t_started=t0,
        len_lookback_buffer=0,
        **flags,
    )


def _end(id_: Any = "a", t: int = 3, obs: float | None = None, **flags: bool) -> SingleAgentEpisode:
    """A piece without steps, starting at ``t``, that carries the episode's end."""
    return SingleAgentEpisode(
        id_,
        observations=[_obs(t if obs is None else obs)],
        actions=[],
        rewards=[],
        infos=[{"end": True}],
        t_started=t,
        len_lookback_buffer=0,
        **flags,
    )


def _joined(head: SingleAgentEpisode, end: SingleAgentEpisode) -> SingleAgentEpisode:
    whole = copy.deepcopy(head)
    whole.concat_episode(copy.deepcopy(end))
    return whole


def _stored(buf: EpisodeReplayBuffer) -> list[tuple]:
    """What a buffer holds, per episode: id, length, flags, final observation and info."""
    return [
        (
            ep.id_,
            len(ep),
            ep.is_terminated,
            ep.is_truncated,
            ep.get_observations(-1).tolist(),
            ep.get_infos(-1),
        )
        for ep in buf.get_episodes()
    ] + [buf.get_num_timesteps(), buf.get_counters(), buf.get_evicted_ids()]


def _last_step(buf: EpisodeReplayBuffer, id_: Any = "a", t: int = 2) -> dict[str, list]:
    batch = buf.get_transitions(buf.locate(id_, [t]), n_step=1)
    return {key: batch[key].tolist() for key in ("terminateds", "truncateds", "next_obs", "n_step")}


# ------------------------------------------- 1: a piece without steps that ends the episode
@pytest.mark.parametrize("flag", ["terminated", "truncated"])
@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("separate_adds", [False, True], ids=["one-add", "two-adds"])
def test_stepless_end_piece_ends_the_episode_as_the_joined_episode(flag, cls, separate_adds):
    head, end = _head(), _end(**{flag: True})
    buf = cls(100, seed=0)
    if separate_adds:
        buf.add(head)
        buf.add(end)
    else:
        buf.add([head, end])
    whole = cls(100, seed=0)
    whole.add(_joined(head, end))
    assert _stored(buf) == _stored(whole)
    assert _last_step(buf) == _last_step(whole)
    assert _last_step(buf)[flag + "s"] == [True]
    assert getattr(buf.get_episodes()[0], "is_" + flag)
    seq = buf.sample(4, batch_length_T=3)  # the sequence's last step carries the flag too
    assert seq["is_" + flag][:, -1].all()


def test_stepless_end_piece_is_honoured_by_from_dataset(tmp_path):
    with DatasetWriter(tmp_path / "d") as writer:
        writer.write(_end(terminated=True))  # written first: it waits for its predecessor
        writer.write(_head())
        writer.write(_head("b", terminated=True))
    buf = EpisodeReplayBuffer.from_dataset(tmp_path / "d", seed=0)
    assert _last_step(buf)["terminateds"] == [True]
    assert [ep.is_terminated for ep in buf.get_episodes()] == [True, True]


def test_stepless_truncated_end_with_another_observation_is_refused():
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_head())
    before = _stored(buf)
    with pytest.raises(ValueError, match="observation that differs"):
        buf.add(_end(obs=99.0, truncated=True))
    with pytest.raises(ValueError, match="observation that differs"):  # in one add, too
        buf.add([_head("b"), _end("b", obs=99.0, truncated=True)])
    assert _stored(buf) == before
    assert _last_step(buf)["truncateds"] == [False]


@pytest.mark.parametrize(
    ("chunks", "match"),
    [
        ([_end(t=5, terminated=True)], "starts at t=5"),  # a gap in time
        ([_end(t=2, terminated=True)], "starts at t=2"),  # before the stored end
        ([_end(terminated=True), _end(truncated=True)], "already done"),
    ],
    ids=["gap", "stale", "second-end"],
)
def test_stepless_end_piece_is_checked_like_a_continuing_chunk(chunks, match):
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_head())
    before = _stored(buf)
    with pytest.raises(ValueError, match=match):
        buf.add(chunks)
    assert _stored(buf) == before


def test_stepless_end_piece_of_a_done_stored_episode_is_refused():
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_head(terminated=True))
    before = _stored(buf)
    with pytest.raises(ValueError, match="already done"):
        buf.add(_end(truncated=True))
    assert _stored(buf) == before


def test_stepless_end_piece_of_an_evicted_episode_is_refused_as_evicted():
    buf = EpisodeReplayBuffer(3, seed=0)
    buf.add([_head("a"), _head("b")])  # "a" evicted
    before = _stored(buf)
    with pytest.raises(EvictedEpisodeError):
        buf.add(_end("a", terminated=True))
    assert _stored(buf) == before


@pytest.mark.parametrize(
    "chunk",
    [
        _end("new", terminated=True),  # an id the buffer never held: nothing to end
        _end("a"),  # not done: nothing to store
        _end("a", t=7),  # not done, and not even where "a" ends: still ignored
    ],
    ids=["unknown-id", "not-done", "not-done-gap"],
)
def test_stepless_pieces_that_end_nothing_stored_are_ignored(chunk):
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_head())
    before = _stored(buf)
    buf.add(chunk)
    assert _stored(buf) == before
    assert _last_step(buf)["terminateds"] == [False]


def test_stepless_end_piece_goes_with_its_episode_evicted_in_the_same_add():
    buf = EpisodeReplayBuffer(4, seed=0)
    buf.add(_head("a"))
    buf.add([_head("b"), _end("a", terminated=True)])  # "b" evicts "a"; its end goes too
    assert buf.get_episode_ids() == ["b"] and buf.get_evicted_ids() == ["a"]
    with pytest.raises(ValueError, match="observation that differs"):  # but is still checked
        buf.add([_head("c"), _end("b", obs=42.0, terminated=True)])


def test_stepless_end_piece_needs_no_extra_keys_and_fits_the_columns():
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_head())
    end = SingleAgentEpisode(  # float64 observation, no extra-model-output keys
        "a", observations=[np.array([3.0])], t_started=3, terminated=True, len_lookback_buffer=0
    )
    buf.add(end)
    assert buf.get_episodes()[0].is_terminated
    assert buf.get_episodes()[0].get_observations(-1).dtype == np.float32


# ------------------------------------------------- 2: importance weights past float64's range
def test_importance_weight_of_an_overflowing_priority_ratio_is_not_zero():
    buf = PrioritizedEpisodeReplayBuffer(100, alpha=1.0, seed=0)
    buf.add(_head(n=2))
    buf.update_priorities([1e-12, 1e300], [0, 1])
    batch = buf.sample(64, beta=0.1)
    expected = math.exp(-0.1 * (math.log(1e300) - math.log(1e-12)))
    weights = batch["weights"][batch["indices"] == 1]
    assert len(weights) and np.all(weights == np.float32(expected))
    assert np.all(batch["weights"][batch["indices"] == 0] == 1.0)


@pytest.mark.parametrize("beta", [0.4, 1.0, 2.5])
def test_importance_weights_of_ordinary_priorities_are_unchanged(beta):
    buf = PrioritizedEpisodeReplayBuffer(100, alpha=0.6, seed=0)
    buf.add(_head(n=5))
    priorities = np.array([0.5, 3.0, 1e-3, 7.0, 2.0])
    buf.update_priorities(priorities, np.arange(5))
    batch = buf.sample(256, beta=beta)
    leaves = priorities**0.6
    expected = np.power(leaves[batch["indices"]] / leaves.min(), -beta).astype(np.float32)
    np.testing.assert_array_equal(batch["weights"], expected)


# ----------------------------------------------------- 3: a beta that is not a real number
@pytest.mark.parametrize(
    "beta",
    ["0.5", None, 1j, np.array([0.4, 0.5]), [0.5], True, float("nan"), -1.0, math.inf, 10**400],
    ids=["str", "None", "complex", "array", "list", "bool", "nan", "negative", "inf", "huge"],
)
def test_beta_that_is_not_a_finite_real_number_is_a_value_error(beta):
    buf = PrioritizedEpisodeReplayBuffer(10, seed=0)
    buf.add(_head(n=2))
    batch = buf.sample(2)
    rng_state = buf.rng.bit_generator.state
    with pytest.raises(ValueError, match="beta must be"):
        buf.sample(1, beta=beta)
    assert buf.rng.bit_generator.state == rng_state and buf.get_sampled_timesteps() == 2
    buf.update_priorities([3.0, 3.0])  # the earlier sample's items are still the last ones
    assert buf.get_priorities(batch["indices"]).tolist() == [3.0, 3.0]


@pytest.mark.parametrize("beta", [0, 0.5, np.float32(0.5), np.array(0.5), 1])
def test_beta_real_numbers_are_accepted(beta):
    buf = PrioritizedEpisodeReplayBuffer(10, seed=0)
    buf.add(_head(n=2))
    assert buf.sample(3, beta=beta)["weights"].shape == (3,)
