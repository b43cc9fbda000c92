from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.runner import EnvRunner, RandomPolicy, autoreset_mode_of
from tests.runner._runner_env import ScriptedEnv, action_policy, make_vec, obs_of, reward_of, stitch

MODES = ["NextStep", "SameStep", "Disabled"]
SCRIPTS = [
    [(3, "term"), (5, "trunc"), (1, "term")],
    [(7, "trunc"), (2, "term")],
    [(4, "term")],
]


def expected_episodes(script, total_steps):
    """(k, length, ending-or-None) of the episodes covering the first ``total_steps`` steps."""
    out, k, left = [], 0, total_steps
    while left > 0:
        length, ending = script[k % len(script)]
        if length <= left:
            out.append((k, length, ending))
        else:
            out.append((k, left, None))
        left -= length
        k += 1
    return out


def sample_all(runner, sizes):
    calls = []
    for n in sizes:
        chunks = runner.sample(n)
        calls.append(chunks)
    return calls


def by_env(calls, num_envs):
    per_env = [[] for _ in range(num_envs)]
    for chunks in calls:
        for ep in chunks:
            per_env[ep.custom_data["env_index"]].append(ep)
    return per_env


def check_episode(ep: SingleAgentEpisode, env_id, k, length, ending):
    assert len(ep) == length and ep.t_started == 0 and ep.t == length
    obs = np.asarray(ep.get_observations())
    np.testing.assert_array_equal(obs, np.stack([obs_of(env_id, k, t) for t in range(length + 1)]))
    np.testing.assert_array_equal(ep.get_actions(), [t % 5 for t in range(length)])
    np.testing.assert_array_equal(ep.get_rewards(), [reward_of(k, t + 1) for t in range(length)])
    np.testing.assert_array_equal(
        ep.get_extra_model_outputs("vf"), [100 * k + t for t in range(length)]
    )
    assert [(int(i["k"]), int(i["t"])) for i in ep.get_infos()] == [
        (k, t) for t in range(length + 1)
    ]
    assert ep.is_terminated == (ending == "term")
    assert ep.is_truncated == (ending == "trunc")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("lookback", [0, 1, 3])
@pytest.mark.parametrize("sizes", [[4] * 6, [3, 7, 1, 5, 8]])
def test_boundaries_and_stream(mode, lookback, sizes):
    env = make_vec(SCRIPTS, mode)
    runner = EnvRunner(env, action_policy, len_lookback_buffer=lookback, seed=0)
    assert runner.autoreset_mode == autoreset_mode_of(env)
    calls = sample_all(runner, sizes)
    for chunks, n in zip(calls, sizes, strict=True):
        envs_in_order = [ep.custom_data["env_index"] for ep in chunks]
        assert envs_in_order == sorted(envs_in_order)
        for i in range(len(SCRIPTS)):
            assert sum(len(ep) for ep in chunks if ep.custom_data["env_index"] == i) == n
            assert all(ep.is_numpy for ep in chunks)
    total = sum(sizes)
    for i, chunks in enumerate(by_env(calls, len(SCRIPTS))):
        # Chunk-to-chunk continuity: same id => t continues, lookback holds the previous steps.
        for prev, nxt in zip(chunks, chunks[1:], strict=False):
            if prev.id_ == nxt.id_:
                assert not prev.is_done and nxt.t_started == prev.t
            else:
                assert prev.is_done and nxt.t_started == 0
        for ep in chunks:
            k = int(ep.get_observations(0)[1])
            lb = ep.observations.lookback
            assert lb == min(lookback, ep.t_started)
            assert ep.actions.lookback == ep.rewards.lookback == lb
            for j in range(1, lb + 1):
                t = ep.t_started - j
                np.testing.assert_array_equal(
                    ep.get_observations(-j, neg_index_as_lookback=True), obs_of(i, k, t)
                )
                assert ep.get_actions(-j, neg_index_as_lookback=True) == t % 5
                assert ep.get_rewards(-j, neg_index_as_lookback=True) == reward_of(k, t + 1)
                assert ep.get_extra_model_outputs("vf", -j, neg_index_as_lookback=True) == (
                    100 * k + t
                )
        stitched = stitch(chunks)
        expected = expected_episodes(SCRIPTS[i], total)
        assert len(stitched) == len(expected)
        assert len({ep.id_ for ep in stitched}) == len(stitched)
        for ep, (k, length, ending) in zip(stitched, expected, strict=True):
            check_episode(ep, i, k, length, ending)
        # The env saw exactly the recorded actions, in order (next-step reset steps excluded).
        recorded = [(k, t, t % 5) for k, length, _ in expected for t in range(length)]
        assert env.envs[i].actions[: len(recorded)] == recorded


@pytest.mark.parametrize("mode", ["SameStep", "Disabled"])
def test_metrics_match_finished_episodes(mode):
    env = make_vec(SCRIPTS, mode)
    runner = EnvRunner(env, action_policy, seed=0)
    calls = sample_all(runner, [5, 5, 5])
    metrics = runner.get_metrics()
    finished = [ep for chunks in by_env(calls, 3) for ep in stitch(chunks) if ep.is_done]
    assert sorted(metrics["episode_lengths"]) == sorted(len(ep) for ep in finished)
    assert sorted(metrics["episode_returns"]) == sorted(ep.get_return() for ep in finished)
    assert metrics["num_env_steps"] == metrics["total_env_steps"] == 45
    assert metrics["num_vector_steps"] == 15
    assert metrics["env_steps_per_s"] > 0
    again = runner.get_metrics()
    assert again["num_episodes"] == 0 and math.isnan(again["mean_episode_return"])
    assert again["total_episodes"] == len(finished)


def test_next_step_metrics_and_reset_steps_not_counted():
    env = make_vec([[(1, "term")], [(2, "trunc")]], "NextStep")
    runner = EnvRunner(env, action_policy, seed=0)
    runner.sample(3)
    metrics = runner.get_metrics()
    # Env 0 needs 5 vector steps (3 steps, 2 reset steps); env 1 records 4 transitions there
    # (one reset step), one more than asked for.
    assert metrics["num_vector_steps"] == 5
    assert metrics["num_env_steps"] == 3 + 4
    assert sorted(metrics["episode_lengths"]) == [1, 1, 1, 2, 2]
    assert metrics["episode_returns"][:1] == [reward_of(0, 1)]


def test_next_step_overflow_is_returned_by_next_call():
    scripts = [[(1, "term")], [(50, "trunc")]]
    env = make_vec(scripts, "NextStep")
    runner = EnvRunner(env, action_policy, len_lookback_buffer=2, seed=0)
    calls = sample_all(runner, [5, 5, 2, 9])
    per_env = by_env(calls, 2)
    for chunks, n in zip(calls, [5, 5, 2, 9], strict=True):
        assert [sum(len(c) for c in chunks if c.custom_data["env_index"] == i) for i in (0, 1)] == [
            n,
            n,
        ]
    (long_ep,) = stitch(per_env[1])
    check_episode(long_ep, 1, 0, 21, None)
    assert [len(ep) for ep in stitch(per_env[0])] == [1] * 21


@pytest.mark.parametrize("mode", MODES)
def test_recurrent_state_resets_per_env(mode):
    class Counter:
        """State = steps since the episode began, shaped [1, N] (env axis 1)."""

        def initial_state(self, n):
            return np.zeros((1, n), dtype=np.int64)

        def __call__(self, obs, state):
            actions, extras = action_policy(obs)
            extras["h"] = state[0].copy()
            return actions, extras, state + 1

    env = make_vec(SCRIPTS, mode)
    runner = EnvRunner(env, Counter(), state_batch_axis=1, seed=0)
    assert runner.is_recurrent
    calls = sample_all(runner, [4, 6, 5])
    for chunks in by_env(calls, 3):
        for ep in stitch(chunks):
            np.testing.assert_array_equal(ep.get_extra_model_outputs("h"), np.arange(len(ep)))


@pytest.mark.parametrize("mode", MODES)
def test_final_obs_is_kept_apart_from_next_reset_obs(mode):
    env = make_vec([[(2, "term")]], mode)
    runner = EnvRunner(env, action_policy, seed=0, numpy_episodes=False)
    (only,) = runner.sample(2)  # the new episode has no step yet: it starts the next call
    assert only.is_terminated
    np.testing.assert_array_equal(only.get_observations(-1), obs_of(0, 0, 2))
    first, second = runner.sample(3)
    assert first.is_terminated and second.t_started == 0 and len(second) == 1
    np.testing.assert_array_equal(first.get_observations(0), obs_of(0, 1, 0))
    np.testing.assert_array_equal(first.get_observations(-1), obs_of(0, 1, 2))
    np.testing.assert_array_equal(second.get_observations(0), obs_of(0, 2, 0))
    assert not first.is_numpy and isinstance(first.get_observations(), list)


def test_rejects_bad_arguments():
    env = make_vec([[(2, "term")]], "SameStep")
    with pytest.raises(ValueError, match="len_lookback_buffer"):
        EnvRunner(env, action_policy, len_lookback_buffer=-1)
    runner = EnvRunner(env, action_policy)
    with pytest.raises(ValueError, match="num_steps"):
        runner.sample(0)


@pytest.mark.parametrize("mode", MODES)
def test_cartpole_random_policy(mode):
    import gymnasium as gym

    env = gym.make_vec(
        "CartPole-v1", 3, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}
    )
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=1), len_lookback_buffer=4, seed=1)
    total_done = 0
    for _ in range(3):
        chunks = runner.sample(60)
        for i in range(3):
            assert sum(len(c) for c in chunks if c.custom_data["env_index"] == i) == 60
        for c in chunks:
            c.validate()
            if c.is_terminated:
                # CartPole terminates when the pole or cart leaves its bounds.
                final = c.get_observations(-1)
                assert abs(final[2]) > 0.2095 or abs(final[0]) > 2.4
            total_done += c.is_done
    assert total_done == runner.get_metrics()["num_episodes"] or mode == "NextStep"
    assert total_done > 0


def test_scripted_env_is_deterministic():
    env = ScriptedEnv(0, [(2, "trunc")])
    env.reset()
    assert env.step(0)[1:4] == (1.0, False, False)
    assert env.step(0)[1:4] == (2.0, False, True)


def test_recurrent_tuple_state_env_axis_0_not_mutated_in_place():
    returned = []

    class Pair:
        def initial_state(self, n):
            return (np.zeros(n), np.full(n, 5.0))

        def __call__(self, obs, state):
            actions, extras = action_policy(obs)
            extras["h"], extras["c"] = state[0], state[1]
            new = (state[0] + 1, state[1] + 1)
            returned.append((new, tuple(x.copy() for x in new)))
            return actions, extras, new

    env = make_vec(SCRIPTS, "SameStep")
    runner = EnvRunner(env, Pair(), seed=0, len_lookback_buffer=2)
    calls = sample_all(runner, [5, 5])
    for chunks in by_env(calls, 3):
        for ep in stitch(chunks):
            np.testing.assert_array_equal(ep.get_extra_model_outputs("h"), np.arange(len(ep)))
            np.testing.assert_array_equal(ep.get_extra_model_outputs("c"), 5 + np.arange(len(ep)))
    # The states the policy returned were never reset in place.
    for new, snapshot in returned:
        for leaf, copied in zip(new, snapshot, strict=True):
            np.testing.assert_array_equal(leaf, copied)


def test_sampled_chunks_are_a_sequence():
    """Negative indices, slices, equality with a list of the same chunks, the range check."""
    runner = EnvRunner(make_vec(SCRIPTS, "NextStep"), action_policy, seed=0)
    chunks = runner.sample(6)
    as_list = list(chunks)
    n = len(as_list)
    assert n > len(SCRIPTS)  # an episode ended inside the window: more chunks than envs
    assert chunks[-1] is chunks[n - 1] and chunks[-n] is chunks[0]
    assert chunks[1:3] == as_list[1:3] and chunks[::-1] == as_list[::-1]
    assert chunks == as_list and chunks != as_list[:-1] and chunks != "chunks"
    for bad in (n, -n - 1):
        with pytest.raises(IndexError, match="out of range"):
            chunks[bad]
    assert chunks[np.int64(1)] is chunks[1]
    for bad in (1.5, "0", True, np.bool_(False)):  # were read as int(index)
        with pytest.raises(TypeError):
            chunks[bad]


def test_a_refused_first_call_leaves_the_runner_unstarted():
    # The first call reset the env, then failed to allocate: the retry lost the reset infos.
    class ResetInfos(gym.vector.SyncVectorEnv):
        def reset(self, *, seed=None, options=None):
            obs, _ = super().reset(seed=seed, options=options)
            return obs, {"reset_seed": np.array([3, 4]), "_reset_seed": np.ones(2, bool)}

    class FailsOnce:
        """Refuses its first call, after the runner reset the env (where blocks failed before)."""

        def __init__(self, policy):
            self.policy, self.calls = policy, 0

        def __call__(self, obs):
            self.calls += 1
            if self.calls == 1:
                raise MemoryError("no room for the first call's outputs")
            return self.policy(obs)

    env = ResetInfos([lambda: gym.make("CartPole-v1")] * 2)
    policy = FailsOnce(RandomPolicy(env.action_space, seed=0))
    runner = EnvRunner(env, policy, seed=0)
    with pytest.raises(MemoryError):
        runner.sample(2)
    chunks = runner.sample(2)
    assert [chunks[k].get_infos(0) for k in range(2)] == [{"reset_seed": 3}, {"reset_seed": 4}]


def test_a_first_call_too_long_to_allocate_leaves_the_runner_unstarted():
    # Allocating 2**40 steps is refused where the system refuses it at once; where memory is
    # overcommitted it may be granted and kill the process when touched, so the count stays
    # within what 64-bit numpy refuses by its size alone.
    class ResetInfos(gym.vector.SyncVectorEnv):
        def reset(self, *, seed=None, options=None):
            obs, _ = super().reset(seed=seed, options=options)
            return obs, {"reset_seed": np.array([3, 4]), "_reset_seed": np.ones(2, bool)}

    env = ResetInfos([lambda: gym.make("CartPole-v1")] * 2)
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    with pytest.raises((MemoryError, ValueError, OverflowError)):
        runner.sample(2**61)
    chunks = runner.sample(2)
    assert [chunks[k].get_infos(0) for k in range(2)] == [{"reset_seed": 3}, {"reset_seed": 4}]


@pytest.mark.parametrize("axis", [1, -1])
def test_recurrent_state_axis_may_count_from_the_end(axis):
    # axis -1 reset row i of the state (unit i of every env) instead of env i's column.
    class Counter:
        def initial_state(self, n):
            return np.zeros((2, n), dtype=np.int64)  # [units, envs]

        def __call__(self, obs, state):
            actions, extras = action_policy(obs)
            extras["h"] = state[0].copy()
            return actions, extras, state + 1

    runner = EnvRunner(make_vec(SCRIPTS, "NextStep"), Counter(), state_batch_axis=axis, seed=0)
    for chunks in by_env(sample_all(runner, [4, 6, 5]), 3):
        for ep in stitch(chunks):
            np.testing.assert_array_equal(ep.get_extra_model_outputs("h"), np.arange(len(ep)))


def _cartpole_policy(as_lists: bool):
    """Deterministic actions and extras from the observations, as arrays or as Python lists."""

    def policy(obs):
        actions = (obs[:, 2] > 0).astype(np.int64)
        logp = obs[:, 0].astype(np.float32)
        dist = {"mean": obs[:, :2]}  # a structured extra output
        if as_lists:
            return actions.tolist(), {"logp": logp.tolist(), "dist": dist}
        return actions, {"logp": logp, "dist": dist}

    return policy


@pytest.mark.parametrize("mode", MODES)
def test_policies_may_return_python_lists(mode):
    """A list is the batch of one leaf (one entry per sub-env), as gymnasium's vector envs
    take it; only dicts and tuples are structures."""
    import gymnasium as gym

    def runner(as_lists):
        env = gym.make_vec(
            "CartPole-v1",
            3,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode(mode)},
        )
        return EnvRunner(env, _cartpole_policy(as_lists), seed=0)

    runs = [runner(False), runner(True)]
    for _ in range(3):
        arrays, lists = (run.sample(5) for run in runs)
        assert len(arrays) == len(lists)
        for a, b in zip(arrays, lists, strict=True):
            for key in ("logp", "dist"):
                assert_same_item(a.get_extra_model_outputs(key), b.get_extra_model_outputs(key))
            np.testing.assert_array_equal(a.get_actions(), b.get_actions())
            assert a.get_actions().dtype == np.int64


def assert_same_item(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_same_item(a[key], b[key])
    else:
        np.testing.assert_array_equal(a, b)  # a list of float32 values comes back float64


def _outputs_at(step_outputs):
    """A policy returning ``step_outputs(k, n)`` at its ``k``-th call (``n`` sub-envs)."""
    calls = {"k": 0}

    def policy(obs):
        calls["k"] += 1
        return step_outputs(calls["k"], len(obs))

    return policy


BAD_OUTPUTS = {
    "scalar_extra": (lambda k, n: (np.zeros(n, np.int64), {"v": 0.5}), "one entry per sub-env"),
    "short_extra": (
        lambda k, n: (np.zeros(n, np.int64), {"v": np.zeros(n - 1)}),
        "one entry per sub-env",
    ),
    "long_extra": (
        lambda k, n: (np.zeros(n, np.int64), {"v": np.zeros(n + 1)}),
        "one entry per sub-env",
    ),
    "short_actions": (lambda k, n: (np.zeros(n - 1, np.int64), {}), "actions must hold"),
    "nested_leaf_short": (
        lambda k, n: (np.zeros(n, np.int64), {"d": {"a": np.zeros(n), "b": np.zeros(1)}}),
        "extra output 'd'",
    ),
    "key_appears_later": (
        lambda k, n: (np.zeros(n, np.int64), {"v": np.zeros(n)} if k > 2 else {}),
        r"changed from \[\] to \['v'\]",
    ),
    "key_vanishes": (
        lambda k, n: (np.zeros(n, np.int64), {"v": np.zeros(n)} if k <= 2 else {}),
        r"changed from \['v'\] to \[\]",
    ),
    "key_renamed": (
        lambda k, n: (np.zeros(n, np.int64), {"v" if k <= 2 else "w": np.zeros(n)}),
        r"changed from \['v'\] to \['w'\]",
    ),
    # Later steps that lose the env axis or gain a unit one would broadcast into the blocks.
    "extra_loses_env_axis": (
        lambda k, n: (np.zeros(n, np.int64), {"v": np.zeros(n) if k <= 2 else np.float64(1)}),
        r"extra output 'v' changed shape from \(\d+,\) to \(\)",
    ),
    "extra_gains_unit_axis": (
        lambda k, n: (np.zeros(n, np.int64), {"v": np.zeros((n, 3) if k <= 2 else (n, 1))}),
        r"changed shape from \(\d+, 3\) to \(\d+, 1\)",
    ),
    "actions_lose_env_axis": (
        lambda k, n: (np.zeros(n, np.int64) if k <= 2 else np.int64(0), {}),
        r"actions changed shape",
    ),
    # Lists and structures have no .shape: their leaves are compared.
    "list_extra_shrinks": (
        lambda k, n: (np.zeros(n, np.int64), {"v": [1.0] * (n if k <= 2 else 1)}),
        r"extra output 'v' changed shape",
    ),
    "nested_leaf_loses_env_axis": (
        lambda k, n: (
            np.zeros(n, np.int64),
            {"d": {"a": np.zeros((n, 2)) if k <= 2 else np.zeros(2)}},
        ),
        r"extra output 'd' changed shape from \(\(\d+, 2\),\) to \(\(2,\),\)",
    ),
}


@pytest.mark.parametrize(
    "bad",
    [
        "key_appears_later",
        "key_vanishes",
        "key_renamed",
        "extra_loses_env_axis",
        "extra_gains_unit_axis",
        "actions_lose_env_axis",
        "list_extra_shrinks",
        "nested_leaf_loses_env_axis",
    ],
)
def test_changed_outputs_are_refused_before_the_env_steps(bad):
    env = make_vec(SCRIPTS, "NextStep")
    counts = {"policy": 0, "env": 0}
    real_step = env.step

    def step(actions):
        counts["env"] += 1
        return real_step(actions)

    def policy(obs):
        counts["policy"] += 1
        return BAD_OUTPUTS[bad][0](counts["policy"], len(obs))

    env.step = step
    with pytest.raises(ValueError, match=BAD_OUTPUTS[bad][1]):
        EnvRunner(env, policy, seed=0).sample(5)
    assert counts["env"] == counts["policy"] - 1  # the env did not take the refused step


@pytest.mark.parametrize(
    ("kwargs", "steps", "error"),
    [
        ({"len_lookback_buffer": 1.7}, 2, TypeError),  # as the episode refuses it
        ({}, 2.9, ValueError),
        ({}, True, ValueError),
        ({"len_lookback_buffer": -1}, 2, ValueError),
    ],
    ids=["float lookback", "float num_steps", "bool num_steps", "negative lookback"],
)
def test_counts_must_be_whole_numbers(kwargs, steps, error):
    with pytest.raises(error, match="must be an int"):
        EnvRunner(
            make_vec(SCRIPTS, "NextStep"),
            _outputs_at(lambda k, n: (np.zeros(n, np.int64), {})),
            **kwargs,
        ).sample(steps)


def test_numpy_integers_are_whole_numbers():
    runner = EnvRunner(
        make_vec(SCRIPTS, "NextStep"),
        _outputs_at(lambda k, n: (np.zeros(n, np.int64), {})),
        len_lookback_buffer=np.int64(2),
    )
    assert sum(len(c) for c in runner.sample(np.int32(3))) == 3 * runner.num_envs


@pytest.mark.parametrize(("outputs", "message"), BAD_OUTPUTS.values(), ids=BAD_OUTPUTS.keys())
def test_policy_outputs_that_do_not_fit_are_refused(outputs, message):
    """Refused with the reason (a key that appeared later would have no values for the
    earlier steps: the blocks once handed out uninitialised memory there). Once the env has
    stepped in the call, the runner refuses to go on (the env is past what it recorded);
    refused before the call's first env step, it is left as it was and asks the policy again."""
    env = make_vec(SCRIPTS, "NextStep")
    stepped = {"n": 0}
    real_step = env.step

    def step(actions):
        stepped["n"] += 1
        return real_step(actions)

    env.step = step
    runner = EnvRunner(env, _outputs_at(outputs), seed=0)
    with pytest.raises(ValueError, match=message):
        runner.sample(5)
    if stepped["n"]:
        with pytest.raises(RuntimeError, match="failed part-way"):
            runner.sample(5)
    else:
        with pytest.raises(ValueError, match=message):
            runner.sample(5)


def test_check_outputs_reads_any_batch_with_a_shape():
    """Tensors, tuples of arrays and lists count entries along the first axis alike."""
    import torch

    from episodes.runner.policy import check_outputs

    ok = {"vf": torch.zeros(3), "dist": ({"m": np.zeros((3, 2))}, [0.1, 0.2, 0.3])}
    assert check_outputs(torch.zeros(3, 2), ok, 3, None) == ("dist", "vf")
    assert check_outputs([0, 1, 2], {}, 3, None) == ()
    with pytest.raises(ValueError, match=r"extra output 'dist'.*shape \(2,\)"):
        check_outputs(np.zeros(3), {"dist": (np.zeros(3), [0.1, 0.2])}, 3, None)
    assert check_outputs(np.zeros(3), {"b": 1, "a": 2}, 3, ("a", "b")) == ("a", "b")


def _add_column(chunk):
    from episodes import InfiniteLookbackBuffer

    chunk.extra_model_outputs["x"] = InfiniteLookbackBuffer([0.0] * len(chunk))


# (case, a change made to a built chunk outside its setters) -- a copy must keep it.
CHUNK_CHANGES = [
    ("a flag", lambda c: setattr(c, "is_truncated", True)),
    ("a new extra column", _add_column),
    ("the id", lambda c: setattr(c, "id_", "renamed")),
    (
        "the observation space",
        lambda c: setattr(c, "observation_space", gym.spaces.Box(-9, 9, (4,))),
    ),
]


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
@pytest.mark.parametrize("change", [c[1] for c in CHUNK_CHANGES], ids=[c[0] for c in CHUNK_CHANGES])
def test_a_copied_sample_keeps_changes_made_to_its_chunks(change, how):
    # A built chunk was rebuilt from the blocks on the other side: the change was lost.
    import copy
    import pickle

    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(5)
    change(chunks[0])
    assert not chunks.unchanged()
    dup = pickle.loads(pickle.dumps(chunks)) if how == "pickle" else copy.deepcopy(chunks)
    assert list(dup) == list(chunks)
    assert dup[0].id_ == chunks[0].id_ and dup[0].observation_space == chunks[0].observation_space


class _SpaceEnv(gym.Env):
    def __init__(self, observation_space, action_space):
        self.observation_space, self.action_space = observation_space, action_space

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


@pytest.mark.parametrize(
    "observation_space, action_space, kind",
    [
        (gym.spaces.Text(5), gym.spaces.Discrete(2), "Text observations"),
        (gym.spaces.Sequence(gym.spaces.Discrete(2)), gym.spaces.Discrete(2), "Sequence obs"),
        (gym.spaces.Box(0, 1, (2,)), gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Text(3)]),
         "Text actions"),
        (gym.spaces.Dict(a=gym.spaces.OneOf([gym.spaces.Discrete(2)])), gym.spaces.Discrete(2),
         "OneOf observations"),
    ],
    ids=["text", "sequence", "text in a tuple", "one-of in a dict"],
)  # fmt: skip
def test_spaces_without_fixed_shaped_items_are_refused_up_front(
    observation_space, action_space, kind
):
    # The runner failed inside its first sample() with "len() of unsized object".
    env = gym.vector.SyncVectorEnv([lambda: _SpaceEnv(observation_space, action_space)] * 2)
    with pytest.raises(TypeError, match=kind.split()[0]):
        EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)


class _DtypeDriftEnv(gym.vector.VectorEnv):
    """Next-step env whose reset observations are int8 and step observations float64."""

    def __init__(self, num_envs: int = 2):
        self.num_envs = num_envs
        self.single_observation_space = gym.spaces.Box(-100, 100, (2,), np.float64)
        self.single_action_space = gym.spaces.Box(-1, 1, (3,), np.float32)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, 2)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, 2)
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.full((self.num_envs, 2), -3, np.int8), {}

    def step(self, actions):
        self.t += 1
        no = np.zeros(self.num_envs, bool)
        return np.full((self.num_envs, 2), self.t + 0.5), np.ones(self.num_envs), no, no, {}


@pytest.mark.parametrize("numpy_episodes", [True, False])
def test_later_steps_of_a_wider_dtype_are_recorded_exactly(numpy_episodes):
    """The blocks took the first step's dtype and cast later steps into it: 0.7 float actions
    after int zeros were recorded as 0, float observations after int8 ones were truncated."""
    calls = {"k": 0}

    def policy(obs):
        calls["k"] += 1
        if calls["k"] == 1:  # a no-op first action of integer zeros, then real actions
            return np.zeros((len(obs), 3), np.int64), {"logp": np.zeros(len(obs), np.int64)}
        return np.full((len(obs), 3), 0.7, np.float32), {"logp": np.full(len(obs), -0.5)}

    chunks = EnvRunner(_DtypeDriftEnv(), policy, seed=0, numpy_episodes=numpy_episodes).sample(3)
    for chunk in chunks:
        obs, actions = np.asarray(chunk.get_observations()), np.asarray(chunk.get_actions())
        assert obs[:, 0].tolist() == [-3.0, 1.5, 2.5, 3.5]
        assert actions[:, 0].tolist() == [0.0, np.float32(0.7), np.float32(0.7)]
        assert np.asarray(chunk.get_extra_model_outputs("logp")).tolist() == [0.0, -0.5, -0.5]


@pytest.mark.parametrize("axis", [1, 3, -1])
def test_a_state_batch_axis_without_one_entry_per_sub_env_is_refused(axis):
    """Axis 1 of a [N, H] state reset unit i of every env instead of env i's row (silently);
    an axis beyond the state's dimensions wrapped around."""

    class Recurrent:
        def initial_state(self, n):
            return np.zeros((n, 4))

        def __call__(self, obs, state):
            return np.zeros(len(obs), np.int64), {}, state + 1

    runner = EnvRunner(make_vec(SCRIPTS, "NextStep"), Recurrent(), state_batch_axis=axis, seed=0)
    with pytest.raises(ValueError, match="state_batch_axis"):
        runner.sample(3)


def test_torch_extras_with_grad_are_recorded_detached():
    """They raised numpy's 'requires grad' RuntimeError after the env had stepped, and the
    runner refused every later call."""
    torch = pytest.importorskip("torch")
    weight = torch.ones(1, requires_grad=True)

    def policy(obs):
        n = len(obs)
        return np.zeros(n, np.int64), {"v": weight * torch.arange(n, dtype=torch.float32)}

    runner = EnvRunner(make_vec(SCRIPTS, "NextStep"), policy, seed=0)
    for _ in range(2):
        chunks = runner.sample(3)
    assert [chunk.get_extra_model_outputs("v", 0) for chunk in chunks[:2]] == [0.0, 1.0]


class _InfoBufferEnv(gym.vector.VectorEnv):
    """Reuses one info array across steps, as envs that avoid allocations do."""

    def __init__(self, num_envs: int = 2):
        self.num_envs = num_envs
        self.single_observation_space = gym.spaces.Box(-1e6, 1e6, (1,), np.float64)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, 2)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, 2)
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}
        self.pos = np.zeros((num_envs, 2))
        self.t = 0

    def _infos(self):
        self.pos[:] = self.t
        return {"pos": self.pos, "_pos": np.ones(self.num_envs, bool)}

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros((self.num_envs, 1)), self._infos()

    def step(self, actions):
        self.t += 1
        no = np.zeros(self.num_envs, bool)
        return np.full((self.num_envs, 1), self.t), np.ones(self.num_envs), no, no, self._infos()


def test_info_arrays_an_env_reuses_are_recorded_as_they_were():
    """Each info was a view of the env's array: later steps and calls rewrote earlier
    chunks' infos (contract: a later call never changes a chunk)."""
    runner = EnvRunner(_InfoBufferEnv(), lambda obs: (np.zeros(len(obs), np.int64), {}), seed=0)
    first = runner.sample(3)[0]
    runner.sample(2)
    assert [info["pos"][0] for info in first.get_infos()] == [0.0, 1.0, 2.0, 3.0]


def test_infos_as_a_list_of_dicts_are_refused_with_a_clear_error():
    env = gym.wrappers.vector.DictInfoToList(
        gym.make_vec("CartPole-v1", 2, vectorization_mode="vector_entry_point")
    )
    with pytest.raises(TypeError, match="DictInfoToList"):
        EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(3)


@pytest.mark.parametrize("copier", ["pickle", "deepcopy"])
def test_edits_to_a_chunks_infos_and_ids_survive_a_copy_of_the_sample(copier):
    """The copy rebuilt unchanged-looking chunks from the blocks, which do not hold these."""
    import copy
    import pickle

    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="vector_entry_point")
    chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(4)
    chunk = chunks[0]
    chunk.get_infos(1)["note"] = "annotated"
    chunk.module_id, chunk.agent_id, chunk.multi_agent_episode_id = "policy_b", "agent_1", "ma-7"
    back = pickle.loads(pickle.dumps(chunks)) if copier == "pickle" else copy.deepcopy(chunks)
    assert back[0].get_infos(1) == {"note": "annotated"}
    assert (back[0].module_id, back[0].agent_id, back[0].multi_agent_episode_id) == (
        "policy_b",
        "agent_1",
        "ma-7",
    )
    assert back == chunks


def test_metrics_are_plain_python_numbers():
    """num_env_steps and env_steps_per_s were numpy numbers: json.dumps refused them."""
    import json

    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="vector_entry_point")
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    runner.sample(30)
    metrics = runner.get_metrics()
    json.dumps(metrics)
    assert type(metrics["num_env_steps"]) is int and type(metrics["env_steps_per_s"]) is float
    assert len(repr(runner.metrics)) < 200


def test_a_later_call_that_widens_a_column_leaves_earlier_chunks_as_they_were():
    """Calls that append to the same blocks shared their column objects, so widening a
    column in a later call retyped the earlier call's chunks."""
    import copy

    calls = {"k": 0}

    def policy(obs):
        value = np.zeros(len(obs), np.int32) if calls["k"] < 2 else np.full(len(obs), -0.5)
        return np.zeros(len(obs), np.int64), {"logp": value}

    # Sub-envs that reset unevenly in next-step mode: later calls append to the same blocks.
    env = make_vec([[(1, "term")], [(5, "trunc"), (3, "term")], [(50, "trunc")]], "NextStep")
    runner = EnvRunner(env, policy, seed=0, len_lookback_buffer=1)
    runner.sample(3)
    calls["k"] += 1
    first = runner.sample(5)
    calls["k"] += 1
    before = copy.deepcopy(list(copy.deepcopy(first)))
    second = runner.sample(2)
    assert second.recording.blocks.rewards.base is first.recording.blocks.rewards.base
    assert list(first) == before
    assert first[0].get_extra_model_outputs("logp").dtype == np.int32
    assert second[0].get_extra_model_outputs("logp").dtype == np.float64


def test_lengths_follow_a_built_chunk_that_grew():
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="vector_entry_point")
    chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(3)
    chunk = next(c for c in chunks if not c.is_done)
    k = list(chunks).index(chunk)
    chunk.add_env_step(chunk.get_observations(-1), 0, 1.0)
    assert chunks.lengths()[k] == len(chunk)


def test_a_changed_env_index_sends_the_converter_down_its_general_path():
    """The fast path kept the recorded columns while the general path grouped by the edit."""
    import torch

    from episodes.converter import episodes_to_rollout

    def policy(obs):
        zeros = np.zeros(len(obs))
        return np.zeros(len(obs), np.int64), {"vf_preds": obs[:, 0], "action_logp": zeros}

    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="vector_entry_point")
    chunks = EnvRunner(env, policy, seed=0).sample(3)
    for chunk in chunks:
        chunk.custom_data["env_index"] = 1 - chunk.custom_data["env_index"]
    assert not chunks.unchanged()

    def convert(sample):
        return episodes_to_rollout(sample, gamma=0.9, value_fn=lambda obs: obs[:, 0])

    fast, general = convert(chunks), convert(list(chunks))
    assert torch.equal(fast.storage.observations, general.storage.observations)


@pytest.mark.parametrize("first_list", [True, False], ids=["list then array", "array then list"])
def test_outputs_may_switch_between_a_list_and_an_array(first_list):
    """A list is one batch, shaped as the array it stands for (the shape check refused it)."""
    calls = {"k": 0}

    def policy(obs):
        calls["k"] += 1
        as_list = (calls["k"] == 1) == first_list
        actions = [0] * len(obs) if as_list else np.zeros(len(obs), np.int64)
        return actions, {"v": [0.5] * len(obs) if as_list else np.full(len(obs), 0.5)}

    chunks = EnvRunner(make_vec(SCRIPTS, "NextStep"), policy, seed=0).sample(3)
    assert all(c.get_extra_model_outputs("v").tolist() == [0.5] * len(c) for c in chunks)


def test_float64_steps_of_a_float32_observation_space_stay_float32():
    """Rounding only: the env's own space holds the column (widening made every observation
    float64, outside the space)."""

    class Float64Steps(_DtypeDriftEnv):
        def __init__(self):
            super().__init__()
            self.single_observation_space = gym.spaces.Box(-100, 100, (2,), np.float32)

        def reset(self, *, seed=None, options=None):
            self.t = 0
            return np.zeros((self.num_envs, 2), np.float32), {}

    env = Float64Steps()
    chunks = EnvRunner(env, lambda obs: (np.zeros((len(obs), 3), np.float32), {}), seed=0).sample(3)
    obs = chunks[0].get_observations()
    assert obs.dtype == np.float32 and env.single_observation_space.contains(obs[1])


def test_a_recurrent_state_with_grad_is_kept_detached():
    """It chained every step's autograd graph (and observations) to the next, across calls:
    about 0.8 MB more per call, without bound."""
    torch = pytest.importorskip("torch")
    cell = torch.nn.GRUCell(4, 8)

    class Recurrent:
        def initial_state(self, n):
            return torch.zeros(n, 8)

        def __call__(self, obs, state):
            h = cell(torch.as_tensor(obs, dtype=torch.float32), state)
            return np.zeros(len(obs), np.int64), {"vf_preds": h[:, 0]}, h

    env = gym.make_vec("CartPole-v1", 3, vectorization_mode="vector_entry_point")
    runner = EnvRunner(env, Recurrent(), seed=0)
    for _ in range(3):
        runner.sample(4)
    assert runner.state.grad_fn is None and not runner.state.requires_grad


def test_a_float_column_widens_for_values_beyond_its_range():
    """Rounding keeps a float32 space's column float32, but 1e300 into float16 became inf."""
    calls = {"k": 0}

    def policy(obs):
        calls["k"] += 1
        value = np.zeros(len(obs), np.float16) if calls["k"] == 1 else np.full(len(obs), 1e300)
        return np.zeros(len(obs), np.int64), {"v": value}

    chunks = EnvRunner(make_vec(SCRIPTS, "NextStep"), policy, seed=0).sample(3)
    values = chunks[0].get_extra_model_outputs("v")
    assert values.dtype == np.float64 and values.tolist()[1:] == [1e300] * (len(values) - 1)
