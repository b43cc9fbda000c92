"""Two converter fixes.

- A chunk without steps that ends an episode belongs to it by id and ``t``, whichever env it
  is filed under: ``episodes_to_rollout`` ends that episode's last step (as
  ``episodes_to_batch`` does) instead of dropping the end and bootstrapping the episode as
  still running (contract §10: an episode's chunks come in time order, none after its end).
- Observations without leaves (an empty ``Dict``/``Tuple`` space's) with ``obs_fn``: the row
  count of the bootstrap batch comes from the chunks, not from a leaf (a raw ``IndexError``
  before); without ``obs_fn`` a leafless ``Dict`` is a clear ``TypeError``.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_batch, episodes_to_rollout, time_major
from episodes.converter.columns import ColumnKeys


def _chunk(id_, n, t0=0, env=None, **kw):
    ep = SingleAgentEpisode(
        id_,
        observations=[np.full(1, t0 + i, np.float32) for i in range(n + 1)],
        actions=[1] * n,
        rewards=[1.0] * n,
        extra_model_outputs={"vf_preds": [0.0] * n, "action_logp": [0.0] * n},
        t_started=t0,
        len_lookback_buffer=0,
        **kw,
    )
    if env is not None:
        ep.custom_data["env_index"] = env
    return ep


def _value(obs):
    return np.full(len(obs), 100.0) + np.asarray(obs, np.float64).reshape(len(obs), -1)[:, 0]


def _end_cases():
    """(chunks as passed, layout): env 0 holds "a" (t 0..2), env 1 "c", and "a"'s end."""

    def flat(first):
        a, c = _chunk("a", 2, env=0), _chunk("c", 2, env=1)
        end = _chunk("a", 0, t0=2, env=1, terminated=True)
        return [end, a, c] if first else [a, c, end]

    def lists():
        return [[_chunk("a", 2)], [_chunk("c", 2), _chunk("a", 0, t0=2, terminated=True)]]

    return {
        "env_index_end_last": (lambda: flat(False), "per_env"),
        "env_index_end_first": (lambda: flat(True), "per_env"),
        "per_env_lists": (lists, "per_env"),
        "per_chunk_env_index": (lambda: flat(False), "per_chunk"),
        "per_chunk_lists": (lists, "per_chunk"),
    }


@pytest.mark.parametrize("case", list(_end_cases()))
def test_stepless_end_filed_under_another_env_ends_its_episode(case):
    make, layout = _end_cases()[case]
    chunks = make()
    rollout = episodes_to_rollout(chunks, gamma=0.5, value_fn=_value, layout=layout)
    dones = rollout.storage.dones[..., 0].T.int().tolist()  # [N, T]
    assert dones[0] == [0, 1]  # "a" terminated on its last step
    assert rollout.last_values[0].item() == 0.0  # nothing bootstraps a terminated episode
    assert rollout.storage.rewards[:, 0, 0].tolist() == [1.0, 1.0]
    if layout == "per_env":
        assert dones[1] == [0, 0] and rollout.last_values[1].item() == 102.0
        ids = [[(c.id_, len(c)) for c in g] for g in rollout.groups]
        assert ids == [[("a", 2), ("a", 0)], [("c", 2)]]
    # Same flags as the batch path, which finds the end by (id, t).
    flat = [c for g in chunks for c in g] if isinstance(chunks[0], list) else chunks
    batch = episodes_to_batch(flat)
    a_rows = np.asarray(batch["eps_id"]) == "a"
    assert batch["terminateds"][a_rows].tolist() == [False, True]


def test_truncating_end_in_another_env_bootstraps_from_the_end_chunk():
    end = _chunk("a", 0, t0=2, truncated=True)
    end.custom_data["bootstrap_value"] = 8.0
    chunks = [[_chunk("a", 2)], [_chunk("c", 2), end]]
    chunks[1][0].custom_data["bootstrap_value"] = 3.0  # values from custom_data
    rollout = episodes_to_rollout(chunks, gamma=0.5)
    assert rollout.storage.rewards[:, 0, 0].tolist() == [1.0, 1.0 + 0.5 * 8.0]
    assert rollout.storage.dones[:, 0, 0].tolist() == [False, True]
    assert rollout.last_values.flatten().tolist() == [0.0, 3.0]


def test_time_major_places_the_end_too():
    groups = [[_chunk("a", 2)], [_chunk("c", 2), _chunk("a", 0, t0=2, terminated=True)]]
    cols = time_major(groups, ColumnKeys())
    assert cols.dones.T.tolist() == [[False, True], [False, False]]
    assert cols.ongoing[0] is None and cols.ongoing[1] is groups[1][0]
    assert len(groups[1]) == 2  # the caller's lists are not changed


_BAD_ENDS = {
    # the end comes before a later chunk of its episode (in env 0)
    "before_later_steps": lambda: [
        [_chunk("a", 2), _chunk("a", 2, t0=2)],
        [_chunk("c", 4), _chunk("a", 0, t0=2, terminated=True)],
    ],
    # the end leaves a gap after the episode's last step
    "gap": lambda: [[_chunk("a", 2)], [_chunk("c", 2), _chunk("a", 0, t0=5, terminated=True)]],
    # two envs hold a chunk of the episode stopping where the end starts
    "two_envs": lambda: [
        [_chunk("a", 2)],
        [_chunk("a", 2)],
        [_chunk("c", 2), _chunk("a", 0, t0=2, terminated=True)],
    ],
}


@pytest.mark.parametrize("case", list(_BAD_ENDS))
def test_stepless_end_that_ends_no_chunk_is_refused_naming_the_episode(case):
    chunks = _BAD_ENDS[case]()
    with pytest.raises(ValueError, match="ended episode 'a' at t=.*ends none of its chunks"):
        episodes_to_rollout(chunks, gamma=0.5, value_fn=_value)


def test_end_of_steps_before_the_window_still_holds_nothing():
    chunks = [[_chunk("a", 2)], [_chunk("c", 2), _chunk("z", 0, t0=7, terminated=True)]]
    rollout = episodes_to_rollout(chunks, gamma=0.5, value_fn=_value)
    assert not rollout.storage.dones.any()
    assert rollout.last_values.flatten().tolist() == [102.0, 102.0]


_LEAFLESS = {
    "empty_dict": (gym.spaces.Dict({}), {}),
    "empty_tuple": (gym.spaces.Tuple(()), ()),
    "dict_of_empty_dict": (gym.spaces.Dict({"a": gym.spaces.Dict({})}), {"a": {}}),
}


def _leafless(case, **kw):
    space, item = _LEAFLESS[case]
    return SingleAgentEpisode(
        observation_space=space,
        observations=[item] * 3,
        actions=[0, 1],
        rewards=[1.0, 1.0],
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.0, 0.0], "action_logp": [0.0, 0.0]},
        **kw,
    )


@pytest.mark.parametrize("case", list(_LEAFLESS))
def test_leafless_observations_with_obs_fn_convert(case):
    # An obs_fn that knows the rows from outside: the [T, N] columns, then the [1, B] batch.
    shapes = iter([(2, 2, 3), (1, 2, 3)])
    handed = []

    def obs_fn(obs):
        handed.append(obs)
        return np.ones(next(shapes), np.float32)

    def value_fn(obs):
        assert obs.shape == (2, 3)
        return np.array([5.0, 6.0])

    rollout = episodes_to_rollout(
        [_leafless(case), _leafless(case)], gamma=0.9, value_fn=value_fn, obs_fn=obs_fn
    )
    assert tuple(rollout.storage.observations.shape) == (2, 2, 3)
    assert rollout.last_values.flatten().tolist() == [5.0, 6.0]
    assert len(handed) == 2


@pytest.mark.parametrize("case", list(_LEAFLESS))
def test_leafless_obs_fn_result_of_wrong_rows_is_a_clear_error(case):
    with pytest.raises(ValueError, match=r"obs_fn returned .*\(1, 1\)"):
        episodes_to_rollout(
            [_leafless(case)],
            gamma=0.9,
            value_fn=lambda obs: np.zeros(len(obs)),
            obs_fn=lambda obs: np.ones((2, 1, 3), np.float32),  # right for the columns only
        )


@pytest.mark.parametrize("case", list(_LEAFLESS))
def test_leafless_observations_without_obs_fn_are_refused(case):
    called = []
    with pytest.raises(TypeError, match="RolloutStorage holds a tensor.*pass obs_fn"):
        episodes_to_rollout(
            [_leafless(case)], gamma=0.9, value_fn=lambda obs: called.append(obs) or [0.0]
        )
    assert not called  # refused before value_fn sees them
