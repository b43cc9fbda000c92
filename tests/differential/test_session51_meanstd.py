"""Differential tests: RLlib 2.60's env-to-module ``MeanStdFilter`` against ours.

Seeded random episodes are stepped as an env runner steps them. RLlib's filter is called after
each reset/step on the running episodes and writes the normalized latest observation into them;
ours, with ``inference=True``, is called on the same (raw) episodes and returns the rows.

- one env: every step's output agrees (float32 tolerance), and so do the statistics;
- several envs: RLlib normalizes each episode's observation before counting the next
  episode's, ours counts a call's observations first (docs/deviations.md): the last
  episode's row and the statistics agree;
- learner rows: RLlib's learner reads the observations as normalized at their step; ours
  normalizes a chunk's rows with the statistics of the call, which is RLlib's filter frozen
  (``update_stats=False``) at the end: those agree;
- merging two runners' statistics: RLlib's ``merge_states`` and our ``merge`` agree;
- a Dict observation space: RLlib 2.60's filter fails building its statistics (a
  ``TypeError``), ours normalizes each leaf (docs/deviations.md).

Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_session51_meanstd.py
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("ray.rllib")

from ray.rllib.connectors.env_to_module import MeanStdFilter as RMeanStdFilter  # noqa: E402
from ray.rllib.env.single_agent_episode import SingleAgentEpisode as RSAE  # noqa: E402

from episodes import SingleAgentEpisode as OSAE  # noqa: E402
from episodes.connectors import MeanStdFilter  # noqa: E402

BOX = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
MATRIX = gym.spaces.Box(-np.inf, np.inf, (2, 3), np.float64)
NESTED = gym.spaces.Dict(
    {
        "pos": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
        "vel": gym.spaces.Box(-np.inf, np.inf, (2, 2), np.float32),
    }
)
ACT = gym.spaces.Discrete(2)
SPACES = {"box": BOX, "matrix": MATRIX}


def _rllib_filter(space, **kwargs):
    # RLlib's constructor builds its output space before it sets clip_by_value: spaces are
    # given afterwards, as its pipelines do.
    # Its output space is a Box of [-clip, clip], which clip_by_value=None cannot build: the
    # clip is taken off after (its statistics are made at the first call, from the attribute).
    clip = kwargs.pop("clip_by_value", 10.0)
    filt = RMeanStdFilter(**kwargs)
    filt.input_action_space = ACT
    filt.input_observation_space = space
    filt.clip_by_value = clip
    return filt


def _draw(space, rng):
    def box(part):
        return (rng.normal(size=part.shape) * 3.0 + 1.5).astype(np.float32)

    if isinstance(space, gym.spaces.Dict):
        return {key: _draw(part, rng) for key, part in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_draw(part, rng) for part in space.spaces)
    return box(space)


def _leaves(value):
    if isinstance(value, dict):
        return [leaf for key in sorted(value) for leaf in _leaves(value[key])]
    if isinstance(value, tuple):
        return [leaf for part in value for leaf in _leaves(part)]
    return [np.asarray(value)]


def _rows(value, i):
    """Row ``i`` of a batch column (a struct of ``[rows, ...]`` leaves) as flat leaves."""
    return [leaf[i] for leaf in _leaves(value)]


def _close(got, want):
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), atol=2e-5)


def _run(space, n_envs, steps, seed, **kwargs):
    """Steps both filters; gives their per-step outputs, filters and our raw episodes."""
    rng = np.random.default_rng(seed)
    theirs = _rllib_filter(space, **kwargs)
    rename = {"clip_by_value": "clip"}
    ours = MeanStdFilter(inference=True, **{rename[k]: v for k, v in kwargs.items()})
    r_eps = [RSAE(observation_space=space, action_space=ACT) for _ in range(n_envs)]
    o_eps = [OSAE(observation_space=space, action_space=ACT) for _ in range(n_envs)]
    for r_ep, o_ep in zip(r_eps, o_eps):
        obs = _draw(space, rng)
        r_ep.add_env_reset(obs)
        o_ep.add_env_reset(obs)
    outputs = []
    for step in range(steps + 1):
        theirs(rl_module=None, batch={}, episodes=r_eps, explore=False, shared_data={})
        want = [_leaves(ep.get_observations(-1)) for ep in r_eps]
        got = ours(o_eps, {})["obs"]
        outputs.append((want, [_rows(got, i) for i in range(n_envs)]))
        if step < steps:
            for r_ep, o_ep in zip(r_eps, o_eps):
                obs, action = _draw(space, rng), int(rng.integers(2))
                r_ep.add_env_step(obs, action, 1.0)
                o_ep.add_env_step(obs, action, 1.0)
    return outputs, theirs, ours, o_eps


def _check_stats(theirs, ours):
    stats = theirs._filters[None].running_stats
    means, vars_ = _leaves(ours.mean), _leaves(ours.var)
    for stat, mean, var in zip(_leaves_of_stats(stats), means, vars_, strict=True):
        assert stat.n == ours.count
        np.testing.assert_allclose(mean, stat.mean, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(var, stat.var, rtol=1e-5)  # RLlib's variance is float32


def _leaves_of_stats(stats):
    if isinstance(stats, dict):
        return [leaf for key in sorted(stats) for leaf in _leaves_of_stats(stats[key])]
    if isinstance(stats, tuple):
        return [leaf for part in stats for leaf in _leaves_of_stats(part)]
    return [stats]


@pytest.mark.parametrize("clip", [10.0, 0.5, None], ids=["clip10", "clip0.5", "noclip"])
@pytest.mark.parametrize("space", sorted(SPACES))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_env_every_step_agrees(space, seed, clip):
    outputs, theirs, ours, _ = _run(SPACES[space], 1, 25, seed, clip_by_value=clip)
    for want, got in outputs:
        _close(got[0], want[0])
    _check_stats(theirs, ours)


@pytest.mark.parametrize("n_envs", [2, 4])
@pytest.mark.parametrize("space", sorted(SPACES))
def test_several_envs_last_row_and_statistics_agree(space, n_envs):
    outputs, theirs, ours, _ = _run(SPACES[space], n_envs, 15, 7)
    for want, got in outputs:
        _close(got[-1], want[-1])
    _check_stats(theirs, ours)


@pytest.mark.parametrize("space", sorted(SPACES))
def test_learner_rows_are_rllibs_frozen_filter_at_the_end(space):
    _, theirs, ours, o_eps = _run(SPACES[space], 2, 12, 3)
    learner = ours.shared(inference=False)
    batch = learner(o_eps, {})["obs"]
    assert learner.count == ours.count  # every observation was counted once, while acting
    frozen = _rllib_filter(SPACES[space], update_stats=False)
    frozen.set_state(theirs.get_state())
    r_eps = [
        RSAE(observation_space=SPACES[space], action_space=ACT, observations=[obs])
        for ep in o_eps
        for obs in ep.get_observations(slice(0, len(ep)))
    ]
    frozen(rl_module=None, batch={}, episodes=r_eps, explore=False, shared_data={})
    for i, r_ep in enumerate(r_eps):
        _close(_rows(batch, i), _leaves(r_ep.get_observations(-1)))


def test_merged_runner_statistics_agree():
    runs = [_run(BOX, 2, 10, seed) for seed in (11, 12)]
    central = _rllib_filter(BOX)
    merged = central.merge_states([run[1].get_state() for run in runs])
    ours = MeanStdFilter()
    ours.merge(*(run[2] for run in runs))
    stat = central._filters[None].running_stats
    assert stat.n == ours.count == sum(run[2].count for run in runs)
    np.testing.assert_allclose(ours.mean, stat.mean, rtol=1e-9)
    np.testing.assert_allclose(ours.var, stat.var, rtol=1e-5)
    assert merged[None]["running_stats"][0]["num_pushes"] == ours.count


def test_dict_space_rllib_fails_ours_normalizes_each_leaf():
    obs = {"pos": np.ones(2, np.float32), "vel": np.zeros((2, 2), np.float32)}
    with pytest.raises(TypeError):
        _rllib_filter(NESTED)(
            rl_module=None,
            batch={},
            episodes=[RSAE(observation_space=NESTED, action_space=ACT, observations=[obs])],
            explore=False,
            shared_data={},
        )
    rows, ours = _ours_on_four_observations(NESTED)
    assert set(rows) == {"pos", "vel"} and rows["vel"].shape == (1, 2, 2)
    assert ours.count == 4 and rows["vel"].dtype == np.float32


def _ours_on_four_observations(space):
    rng = np.random.default_rng(5)
    ep = OSAE(observation_space=space, action_space=ACT)
    ep.add_env_reset(_draw(space, rng))
    for _ in range(3):
        ep.add_env_step(_draw(space, rng), 0, 1.0)
    filt = MeanStdFilter(inference=True)
    return filt([ep], {})["obs"], filt


def test_discrete_space_rllib_fails_ours_refuses_with_a_clear_error():
    space = gym.spaces.Discrete(3)
    with pytest.raises(TypeError):
        _rllib_filter(space)(
            rl_module=None,
            batch={},
            episodes=[RSAE(observation_space=space, action_space=ACT, observations=[2])],
            explore=False,
            shared_data={},
        )
    ep = OSAE(observation_space=space, action_space=ACT, observations=[2])
    with pytest.raises(ValueError, match="Box observations"):
        MeanStdFilter(inference=True)([ep], {})
