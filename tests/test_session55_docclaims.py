"""Today's doc claims, one small test each, named after the claim (session 55).

Pages: docs/from_sb3.md, docs/episodes.md ("Relabelling rewards after collection"),
docs/format.md (the ``load_episode(..., numpy=True)`` paragraph on pieces in other dtypes) and
the docs/api.md entries on ``episodes.shapes``, ``MeanStdFilter``'s settings, ``time_major``
and ``add_rollouts``. Expected values come from plain numpy arithmetic or from the env's own
script, not from the code under test.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.connectors import MeanStdFilter
from episodes.converter import episodes_to_batch, episodes_to_rollout
from episodes.replay import EpisodeReplayBuffer
from episodes.rollout import RolloutStorage
from episodes.runner import EnvRunner
from tests.runner._runner_env import make_vec

NEXT = gym.vector.AutoresetMode.NEXT_STEP
SAME = gym.vector.AutoresetMode.SAME_STEP
DISABLED = gym.vector.AutoresetMode.DISABLED
GAMMA = 0.9


def scripted_policy(obs: Any) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    obs = np.asarray(obs)
    values = (100 * obs[:, 1] + obs[:, 2]).astype(np.float32)
    return np.zeros(len(obs), np.int64), {"vf_preds": values, "action_logp": values * 0}


def value_of(obs: Any) -> np.ndarray:
    return np.asarray(obs, np.float64)[:, 2] * 0.5


def scripted_runner(scripts, mode=NEXT, window="transitions", lookback=1):
    return EnvRunner(
        make_vec(scripts, mode), scripted_policy, len_lookback_buffer=lookback, window=window
    )


class EndsTogether(gym.Env):
    """Terminated at step 3 where a ``TimeLimit(3)`` truncates it too."""

    observation_space = gym.spaces.Box(-10.0, 10.0, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.k = 0
        return np.array([0.0, 0.0, 0.0], np.float32), {}

    def step(self, action):
        self.k += 1
        return np.array([0.0, 0.0, self.k], np.float32), 1.0, self.k == 3, False, {}


# --- docs/from_sb3.md: the names table ------------------------------------------------------


@pytest.mark.parametrize("mode", [NEXT, SAME, DISABLED], ids=lambda m: m.value)
def test_sb3_any_autoreset_mode_read_from_the_env_and_storage_is_n_steps_by_n_envs(mode):
    env = gym.make_vec(
        "CartPole-v1", 3, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}
    )
    chunks = EnvRunner(env, scripted_cartpole, seed=0).sample(7)
    assert [sum(len(c) for c in chunks if c.custom_data["env_index"] == i) for i in range(3)] == [
        7,
        7,
        7,
    ]
    rollout = episodes_to_rollout(chunks, gamma=GAMMA, value_fn=lambda o: np.zeros(len(o)))
    assert tuple(rollout.storage.observations.shape) == (7, 3, 4)
    assert tuple(rollout.storage.rewards.shape[:2]) == (7, 3)


def scripted_cartpole(obs):
    obs = np.asarray(obs)
    zeros = np.zeros(len(obs), np.float32)
    return (obs[:, 2] > 0).astype(np.int64), {"vf_preds": zeros, "action_logp": zeros}


VALUE_FORMS = {
    "numpy [N]": lambda v: v,
    "numpy [N, 1]": lambda v: v[:, None],
    "tensor [N]": lambda v: torch.as_tensor(v),
    "tensor [N, 1]": lambda v: torch.as_tensor(v)[:, None],
}


@pytest.mark.parametrize("form", list(VALUE_FORMS))
def test_sb3_policy_values_N_or_N1_numpy_or_tensor(form):
    def policy(obs):
        actions, extras = scripted_policy(obs)
        extras = {k: VALUE_FORMS[form](v) for k, v in extras.items()}
        if form.startswith("tensor"):
            actions = torch.as_tensor(actions)
        return actions, extras

    runner = EnvRunner(make_vec([[(3, "term")], [(4, "trunc")]], NEXT), policy)
    rollout = episodes_to_rollout(runner.sample(6), gamma=GAMMA, value_fn=value_of)
    observed = rollout.storage.observations.numpy()
    expected = 100 * observed[..., 1] + observed[..., 2]
    assert np.allclose(rollout.storage.values.numpy()[..., 0], expected)


def test_sb3_timeout_fix_adds_gamma_v_final_obs_with_value_fn_called_once_batched():
    calls = []

    def value_fn(obs):
        calls.append(np.asarray(obs).copy())
        return value_of(obs)

    # Sub-env 0 truncates at steps 2 and 4, sub-env 1 at step 3, sub-env 2 terminates.
    runner = scripted_runner([[(2, "trunc")], [(3, "trunc")], [(2, "term")]])
    rollout = episodes_to_rollout(runner.sample(5), gamma=GAMMA, value_fn=value_fn)
    assert len(calls) == 1
    rewards = rollout.storage.rewards.numpy()[..., 0]
    obs = rollout.storage.observations.numpy()
    for t in range(5):
        for i in range(3):
            # The scripted env pays 10 * k + t for reaching step t of its episode k.
            k, step = obs[t, i, 1], obs[t, i, 2] + 1
            raw = 10 * k + step
            truncated = i < 2 and step == (2, 3)[i]
            expected = raw + (GAMMA * 0.5 * step if truncated else 0.0)
            assert rewards[t, i] == pytest.approx(expected), (t, i)


@pytest.mark.parametrize("mode", [NEXT, SAME], ids=lambda m: m.value)
def test_sb3_terminated_and_truncated_at_once_terminated_wins_no_bootstrap(mode):
    env = gym.vector.SyncVectorEnv(
        [lambda: gym.wrappers.TimeLimit(EndsTogether(), 3)], autoreset_mode=mode
    )
    runner = EnvRunner(env, scripted_policy)
    rollout = episodes_to_rollout(runner.sample(3), gamma=GAMMA, value_fn=lambda o: np.ones(len(o)))
    assert rollout.storage.rewards.numpy()[..., 0].tolist() == [[1.0], [1.0], [1.0]]


@pytest.mark.parametrize(
    "script, last_value_zero",
    [([(4, "term")], True), ([(4, "trunc")], True), ([(6, "term")], False)],
    ids=["terminated_at_window_end", "truncated_at_window_end", "still_running"],
)
def test_sb3_last_values_zero_where_the_last_episode_ended_in_the_window(script, last_value_zero):
    runner = scripted_runner([script])
    rollout = episodes_to_rollout(runner.sample(4), gamma=GAMMA, value_fn=lambda o: np.ones(len(o)))
    assert (float(rollout.last_values.reshape(-1)[0]) == 0.0) == last_value_zero


def test_sb3_compute_returns_normalize_false_gives_returns_advantages_plus_values():
    runner = scripted_runner([[(3, "term")], [(4, "trunc")]])
    rollout = episodes_to_rollout(runner.sample(6), gamma=GAMMA, value_fn=value_of)
    st = rollout.storage
    st.compute_returns(rollout.last_values, GAMMA, 0.95, normalize_advantage=False)
    assert torch.allclose(st.returns, st.advantages + st.values)
    assert abs(float(st.advantages.mean())) > 1e-3  # not normalised


def filled_storage(T=5, N=2, normalize_per_batch=False):
    st = RolloutStorage(
        "rl", N, T, (1,), (1,), normalize_advantage_per_mini_batch=normalize_per_batch
    )
    st.observations[..., 0] = torch.arange(T * N, dtype=torch.float32).view(T, N)
    st.rewards.copy_(torch.arange(T * N, dtype=torch.float32).view(T, N, 1) ** 1.5)
    st.step = T
    return st


def test_sb3_compute_returns_normalises_the_whole_batch_by_default():
    st = filled_storage()
    st.compute_returns(torch.zeros(2), 0.99, 0.95)
    assert abs(float(st.advantages.mean())) < 1e-5
    assert float(st.advantages.std()) == pytest.approx(1.0, abs=1e-4)


@pytest.mark.parametrize("epochs, batches", [(1, 3), (3, 3), (2, 10), (4, 1)])
def test_sb3_every_sample_once_per_epoch_fresh_permutation_each_epoch(epochs, batches):
    st = filled_storage()
    st.compute_returns(torch.zeros(2), 0.99, 0.95, normalize_advantage=False)
    gen = torch.Generator().manual_seed(3)
    out = list(st.mini_batch_generator(batches, num_epochs=epochs, generator=gen))
    assert len(out) == epochs * batches  # a count of batches, not a size
    orders = []
    for e in range(epochs):
        ids = torch.cat([b.observations[:, 0] for b in out[e * batches : (e + 1) * batches]])
        assert sorted(ids.tolist()) == list(range(10))
        orders.append(ids.tolist())
    if epochs > 1 and batches > 1:
        assert len({tuple(o) for o in orders}) > 1


def test_sb3_mini_batches_follow_the_generator_seed():
    def ids(seed):
        st = filled_storage()
        st.compute_returns(torch.zeros(2), 0.99, 0.95)
        gen = torch.Generator().manual_seed(seed)
        return [b.observations[:, 0].tolist() for b in st.mini_batch_generator(2, 2, generator=gen)]

    assert ids(5) == ids(5) and ids(5) != ids(6)


@pytest.mark.parametrize("where", ["generator", "storage"])
def test_sb3_normalize_advantage_per_mini_batch_on_the_generator_or_the_storage(where):
    st = filled_storage(normalize_per_batch=where == "storage")
    st.compute_returns(torch.zeros(2), 0.99, 0.95, normalize_advantage=False)
    kwargs = {"normalize_advantage_per_mini_batch": True} if where == "generator" else {}
    gen = torch.Generator().manual_seed(0)
    for batch in st.mini_batch_generator(2, 1, generator=gen, **kwargs):
        idx = batch.observations[:, 0].long()
        raw = st.advantages.view(-1)[idx].double()
        expected = (raw - raw.mean()) / (raw.std() + 1e-8)
        assert torch.allclose(batch.advantages[:, 0].double(), expected, atol=1e-5)


def test_sb3_rlbatch_fields_are_B_by_1_columns():
    st = filled_storage()
    st.compute_returns(torch.zeros(2), 0.99, 0.95)
    (batch,) = st.mini_batch_generator(1, 1, generator=torch.Generator().manual_seed(0))
    for name in ("actions", "values", "old_actions_log_prob", "advantages", "returns"):
        assert tuple(getattr(batch, name).shape) == (10, 1), name


def pendulum_policy(obs):
    obs = np.asarray(obs)
    actions = (10.0 * obs[:, 1:2]).astype(np.float32)  # well beyond [-2, 2]
    zeros = np.zeros(len(obs), np.float32)
    return actions, {"vf_preds": zeros, "action_logp": zeros}


def test_sb3_the_runner_records_the_policys_actions_unclipped():
    seen = []

    def policy(obs):
        actions, extras = pendulum_policy(obs)
        seen.append(actions.copy())
        return actions, extras

    env = gym.wrappers.vector.ClipAction(gym.make_vec("Pendulum-v1", 2, vectorization_mode="sync"))
    chunks = EnvRunner(env, policy, seed=0).sample(5)
    recorded = np.stack([chunks.take("actions")[t] for t in range(5)])
    assert np.array_equal(recorded, np.stack(seen))
    assert np.abs(recorded).max() > 2.0


def test_sb3_normalize_observation_wrapper_records_what_the_policy_saw():
    seen = []

    def policy(obs):
        seen.append(np.asarray(obs).copy())
        return pendulum_policy(obs)

    env = gym.wrappers.vector.NormalizeObservation(
        gym.make_vec("Pendulum-v1", 2, vectorization_mode="sync")
    )
    chunks = EnvRunner(env, policy, seed=0).sample(4)
    assert np.array_equal(chunks.take("observations")[:4], np.stack(seen))


def test_sb3_episode_returns_are_sums_of_the_recorded_normalised_rewards():
    env = gym.wrappers.vector.NormalizeReward(
        gym.make_vec("CartPole-v1", 2, vectorization_mode="sync", max_episode_steps=5), gamma=0.9
    )
    runner = EnvRunner(env, scripted_cartpole, seed=0)
    chunks = runner.sample(10)
    metrics = runner.get_metrics()
    finished = [c for c in chunks if c.is_done and c.t_started == 0]
    recorded = sorted(float(np.sum(c.get_rewards())) for c in finished)
    assert sorted(metrics["episode_returns"]) == pytest.approx(recorded)
    assert sorted(metrics["episode_lengths"]) == [5] * len(finished)
    assert all(abs(r - 5.0) > 1e-3 for r in recorded)  # normalised, not CartPole's raw 5


def test_sb3_same_seed_same_chunks():
    def run():
        env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        return EnvRunner(env, scripted_cartpole, seed=7).sample(6).take("observations").copy()

    assert np.array_equal(run(), run())


# (name in the table, callable, parameters the table passes by name)
TABLE_SIGNATURES = [
    ("EnvRunner(env, policy, seed=..., window=...)", EnvRunner, ["seed", "window"]),
    (
        "episodes_to_rollout(chunks, gamma=..., value_fn=..., obs_fn=..., layout=...)",
        episodes_to_rollout,
        ["gamma", "value_fn", "obs_fn", "layout"],
    ),
    (
        "storage.compute_returns(last_values, gamma, lam, normalize_advantage=False)",
        RolloutStorage.compute_returns,
        ["last_values", "gamma", "lam", "normalize_advantage"],
    ),
    (
        "storage.mini_batch_generator(num_mini_batches, num_epochs=, generator=, "
        "normalize_advantage_per_mini_batch=)",
        RolloutStorage.mini_batch_generator,
        ["num_mini_batches", "num_epochs", "generator", "normalize_advantage_per_mini_batch"],
    ),
    (
        "RolloutStorage(..., normalize_advantage_per_mini_batch=)",
        RolloutStorage,
        ["normalize_advantage_per_mini_batch"],
    ),
    ("filt.shared(update=False)", MeanStdFilter.shared, ["update"]),
    ("MeanStdFilter(update=False)", MeanStdFilter, ["update"]),
    (
        "gym.wrappers.vector.NormalizeReward(env, gamma=...)",
        gym.wrappers.vector.NormalizeReward,
        ["gamma"],
    ),
]


@pytest.mark.parametrize(
    "fn, names", [c[1:] for c in TABLE_SIGNATURES], ids=[c[0] for c in TABLE_SIGNATURES]
)
def test_sb3_name_table_signatures(fn, names):
    import inspect

    params = inspect.signature(fn).parameters
    assert [n for n in names if n not in params] == []


def test_sb3_name_table_metrics_and_state_names():
    from episodes.rollout import RLBatch

    runner = EnvRunner(make_vec([[(2, "term")]], NEXT), scripted_policy)
    runner.sample(3)
    assert {"episode_returns", "episode_lengths"} <= set(runner.get_metrics())
    filt = MeanStdFilter()
    assert {"count", "mean", "m2"} <= set(filt.get_state())
    fields = {"observations", "actions", "values", "old_actions_log_prob", "advantages", "returns"}
    assert fields <= set(RLBatch.__dataclass_fields__)


# --- docs/from_sb3.md: "What differs" ---------------------------------------------------------


class CountingSteps(gym.vector.VectorWrapper):
    def __init__(self, env):
        super().__init__(env)
        self.steps = 0

    def step(self, actions):
        self.steps += 1
        return self.env.step(actions)


def test_sb3_vector_steps_window_is_n_env_steps_with_reset_steps_masked_advantage_0():
    env = CountingSteps(make_vec([[(2, "term")], [(3, "trunc")]], NEXT))
    runner = EnvRunner(env, scripted_policy, window="vector_steps")
    chunks = runner.sample(6)
    assert env.steps == 6
    rollout = episodes_to_rollout(chunks, gamma=GAMMA, value_fn=value_of)
    st = rollout.storage
    assert st.valid is not None and tuple(st.valid.shape[:2]) == (6, 2)
    # Sub-env 0 ends at vector steps 2 and 5 (its reset steps are 3 and 6, the 6th one
    # being outside the window); sub-env 1 ends at step 3, resetting at step 4.
    valid = st.valid.reshape(6, 2)
    assert valid[:, 0].tolist() == [True, True, False, True, True, False]
    assert valid[:, 1].tolist() == [True, True, True, False, True, True]
    st.compute_returns(rollout.last_values, GAMMA, 0.95, normalize_advantage=False)
    assert (st.advantages.reshape(6, 2)[~valid] == 0).all()


def test_sb3_transitions_window_gives_n_steps_transitions_per_sub_env_in_next_step_mode():
    env = CountingSteps(make_vec([[(2, "term")], [(3, "trunc")]], NEXT))
    chunks = EnvRunner(env, scripted_policy).sample(6)
    per_env = [sum(len(c) for c in chunks if c.custom_data["env_index"] == i) for i in (0, 1)]
    assert per_env == [6, 6] and env.steps > 6


@pytest.mark.parametrize(
    "total, parts, sizes", [(10, 3, [4, 3, 3]), (10, 4, [3, 3, 2, 2]), (7, 7, [1] * 7)]
)
def test_sb3_remainder_spread_over_the_first_batches(total, parts, sizes):
    st = filled_storage(T=total, N=1)
    st.compute_returns(torch.zeros(1), 0.99, 0.95)
    got = [len(b.actions) for b in st.mini_batch_generator(parts, 1, generator=torch.Generator())]
    assert got == sizes


@pytest.mark.parametrize("where", ["generator", "storage"])
def test_sb3_a_mini_batch_of_one_sample_normalises_to_0(where):
    st = filled_storage(T=3, N=1, normalize_per_batch=where == "storage")
    st.compute_returns(torch.zeros(1), 0.99, 0.95, normalize_advantage=False)
    assert (st.advantages != 0).all()
    kwargs = {"normalize_advantage_per_mini_batch": True} if where == "generator" else {}
    batches = list(st.mini_batch_generator(3, 1, generator=torch.Generator(), **kwargs))
    assert [b.advantages.tolist() for b in batches] == [[[0.0]]] * 3


def distinct_rows(chunks) -> np.ndarray:
    """Every observation the chunks hold, lookback and final ones included, each once."""
    rows = {}
    for c in chunks:
        for row in np.asarray(c.observations.data):
            rows[tuple(row.tolist())] = row
    return np.array(list(rows.values()), np.float64)


@pytest.mark.parametrize("mode", [NEXT, SAME], ids=lambda m: m.value)
def test_sb3_mean_std_filter_sample_variance_every_observation_once_final_ones_too(mode):
    runner = scripted_runner([[(3, "term")], [(4, "trunc")]], mode=mode, lookback=1)
    filt = MeanStdFilter()
    first, second = runner.sample(5), runner.sample(5)
    filt(first, {})
    out = filt(second, {})["obs"]
    rows = distinct_rows([*first, *second])  # the env's observations are all distinct
    assert filt.count == len(rows)
    assert np.allclose(filt.mean, rows.mean(0))
    assert np.allclose(filt.var, rows.var(0, ddof=1))
    first_rows = np.concatenate([np.asarray(c.get_observations())[:-1] for c in second])
    expected = (first_rows - rows.mean(0)) / (rows.std(0, ddof=1) + 1e-6)
    assert np.allclose(out, np.clip(expected, -10, 10), atol=1e-5)


def test_sb3_mean_std_filter_output_clipped_to_10():
    obs = np.zeros((301, 1), np.float32)
    obs[-1] = 1.0  # about sqrt(300) sample stds from the mean
    ep = SingleAgentEpisode(
        observations=obs,
        actions=[0] * 300,
        rewards=[0.0] * 300,
        observation_space=gym.spaces.Box(-5, 5, (1,)),
        len_lookback_buffer=0,
    )
    filt = MeanStdFilter()
    filt([ep], {})
    z = (1.0 - obs.mean()) / (obs.astype(np.float64).std(ddof=1) + 1e-6)
    assert z > 10
    assert float(filt.normalize(np.ones((1, 1)))[0, 0]) == pytest.approx(10.0)


def test_sb3_filter_as_obs_fn_normalises_storage_and_bootstrap_with_the_same_statistics():
    runner = scripted_runner([[(2, "trunc")], [(3, "trunc")]])
    chunks = runner.sample(4)
    filt = MeanStdFilter()
    filt(chunks, {})
    seen = []

    def value_fn(obs):
        seen.append(np.asarray(obs).copy())
        return np.zeros(len(obs))

    raw = chunks.take("observations")[:4].astype(np.float64).copy()
    finals = [np.asarray(c.get_observations())[-1] for c in chunks if c.is_truncated]
    rollout = episodes_to_rollout(chunks, gamma=GAMMA, value_fn=value_fn, obs_fn=filt.normalize)
    assert np.allclose(rollout.storage.observations.numpy(), filt.normalize(raw), atol=1e-6)
    (boot,) = seen  # one batched call: the truncations' finals and the windows' last obs
    assert len(boot) == len(finals) + 1  # sub-env 1 is mid-episode at the window's end
    for final in filt.normalize(np.stack(finals)):
        assert np.isclose(boot, final, atol=1e-6).all(1).any()


class OnePerStep(gym.Env):
    observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), 1.0, False, False, {}


# docs/from_sb3.md: next-step carries the return over a truncation; disabled mode's partial
# reset goes through the wrapper's reset(), which restarts it (every sub-env's).
@pytest.mark.parametrize(
    "mode, carried",
    [
        pytest.param(NEXT, True, id="next_step"),
        pytest.param(DISABLED, False, id="disabled"),
        pytest.param(SAME, False, id="same_step"),
    ],
)
def test_sb3_gymnasium_normalize_reward_return_runs_on_over_a_truncation(mode, carried):
    vec = gym.vector.SyncVectorEnv(
        [lambda: gym.wrappers.TimeLimit(OnePerStep(), 2)], autoreset_mode=mode
    )
    env = gym.wrappers.vector.NormalizeReward(vec, gamma=0.5)
    env.reset(seed=0)
    action = np.zeros(1, np.int64)
    env.step(action)
    env.step(action)  # truncated: its discounted return is 1 * 0.5 + 1
    if mode == DISABLED:
        env.reset(options={"reset_mask": np.array([True])})
    elif mode == NEXT:
        env.step(action)  # the reset step
    env.step(action)  # the new episode's first step
    expected = 1.5 * 0.5 + 1.0 if carried else 1.0
    assert float(env.accumulated_reward[0]) == pytest.approx(expected)


def test_sb3_gymnasium_normalize_reward_does_not_clip():
    class Spike(gym.Env):
        observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            self.t = 0
            return np.zeros(1, np.float32), {}

        def step(self, action):
            self.t += 1
            return np.zeros(1, np.float32), 1e4 if self.t == 300 else 1e-3, False, False, {}

    env = gym.wrappers.vector.NormalizeReward(gym.vector.SyncVectorEnv([Spike]), gamma=0.99)
    env.reset(seed=0)
    rewards = [env.step(np.zeros(1, np.int64))[1][0] for _ in range(300)]
    assert rewards[-1] > 10.0


@pytest.mark.parametrize("freeze", ["update = False", "shared(update=False)"])
def test_sb3_filter_frozen_for_evaluation_and_restored_by_state(freeze):
    runner = scripted_runner([[(3, "term")], [(4, "trunc")]])
    filt = MeanStdFilter()
    filt(runner.sample(4), {})
    state = filt.get_state()
    if freeze == "update = False":
        frozen = filt
        frozen.update = False
    else:
        frozen = filt.shared(update=False)
    more = runner.sample(4)
    out = frozen(more, {})["obs"]
    assert frozen.count == filt.count == state["count"]
    restored = MeanStdFilter(update=False)
    restored.set_state(state)
    assert np.array_equal(restored(more, {})["obs"], out)


def test_sb3_gymnasium_normalize_observation_update_running_mean_and_obs_rms():
    env = gym.wrappers.vector.NormalizeObservation(
        gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    )
    env.reset(seed=0)
    env.update_running_mean = False
    before = copy.deepcopy(env.obs_rms)
    env.step(np.zeros(2, np.int64))
    assert env.obs_rms.count == before.count and np.array_equal(env.obs_rms.mean, before.mean)


def test_sb3_record_episode_statistics_per_env_and_tally_give_raw_returns():
    from episodes.runner import EpisodeTally

    env = gym.make_vec(
        "CartPole-v1",
        2,
        vectorization_mode="sync",
        max_episode_steps=5,
        wrappers=[gym.wrappers.RecordEpisodeStatistics],
    )
    env = gym.wrappers.vector.NormalizeReward(env, gamma=0.9)
    runner = EnvRunner(env, scripted_cartpole, seed=0)
    done = EpisodeTally().add(runner.sample(12))
    assert done
    for episode in done:
        assert float(episode.last_info["episode"]["r"]) == 5.0  # raw: 1 a step
        assert abs(episode.ret - 5.0) > 1e-3  # the recorded, normalised rewards' sum


def test_sb3_async_vector_env_runs_as_sync():
    def run(mode):
        env = gym.make_vec("CartPole-v1", 2, vectorization_mode=mode)
        try:
            return EnvRunner(env, scripted_cartpole, seed=3).sample(5).take("observations").copy()
        finally:
            env.close()

    assert np.array_equal(run("async"), run("sync"))


# --- docs/episodes.md: "Relabelling rewards after collection" --------------------------------

LONG = [[(7, "term")], [(7, "term")]]  # episodes that run on into the next call


def at(ep, column: str, t: int) -> Any:
    """The column's value at absolute time ``t``, read from its raw data (lookback included)."""
    buf = ep.extra_model_outputs[column] if column == "vf_preds" else getattr(ep, column)
    return np.asarray(buf.data)[buf.lookback + t - ep.t_started]


# name -> (column, time written relative to chunk.t, write)
RELABELS = {
    "set_rewards": ("rewards", -1, lambda c: c.set_rewards(new_data=-5.0, at_indices=-1)),
    "set_extra_model_outputs": (
        "vf_preds",
        -1,
        lambda c: c.set_extra_model_outputs(key="vf_preds", new_data=-5.0, at_indices=-1),
    ),
    "set_observations": (
        "observations",
        -1,  # not the last one, which the next chunk's first observation must equal
        lambda c: c.set_observations(new_data=np.full(3, -5.0, np.float32), at_indices=-2),
    ),
    "chunk.rewards[i] = x": ("rewards", -1, lambda c: c.rewards.__setitem__(-1, -5.0)),
}

# name -> observer taken before the write, read at time t
BEFORE = {
    "cut": lambda c, ch: c.cut(len_lookback_buffer=2),
    "slice": lambda c, ch: c[0 : len(c)],
    "deepcopy": lambda c, ch: copy.deepcopy(c),
    "pickle": lambda c, ch: pickle.loads(pickle.dumps(c)),
}


def first_chunk_of_env0(chunks):
    return next(c for c in chunks if c.custom_data["env_index"] == 0)


@pytest.mark.parametrize("relabel", list(RELABELS))
def test_relabel_reaches_no_other_chunk_no_later_call_no_cut_slice_or_copy_before(relabel):
    column, dt, write = RELABELS[relabel]
    runner, twin = scripted_runner(LONG, lookback=2), scripted_runner(LONG, lookback=2)
    chunks, expected = runner.sample(4), twin.sample(4)
    target = first_chunk_of_env0(chunks)
    t = target.t + dt
    old = np.asarray(at(target, column, t)).copy()
    before = {name: make(target, chunks) for name, make in BEFORE.items()}
    write(target)
    assert np.all(np.asarray(at(target, column, t)) == -5.0)
    for name, seen in before.items():
        assert np.array_equal(at(seen, column, t), old), name
    for chunk, ref in zip(chunks, expected, strict=True):
        if chunk is not target:
            assert np.array_equal(np.asarray(chunk.rewards.data), np.asarray(ref.rewards.data))
            assert np.array_equal(
                np.asarray(chunk.observations.data), np.asarray(ref.observations.data)
            )
    later, later_ref = first_chunk_of_env0(runner.sample(3)), first_chunk_of_env0(twin.sample(3))
    assert np.array_equal(at(later, column, t), at(later_ref, column, t))


def test_relabel_reaches_no_deep_copy_and_a_shallow_copy_shares_the_columns():
    # docs/episodes.md: "no deep copy made before it (a copy.copy shares the columns ...)"
    runner = scripted_runner(LONG, lookback=2)
    target = first_chunk_of_env0(runner.sample(4))
    shallow, deep = copy.copy(target), copy.deepcopy(target)
    target.set_rewards(new_data=-5.0, at_indices=-1)
    assert shallow.get_rewards(-1) == -5.0 and deep.get_rewards(-1) != -5.0


AFTER = {
    "cut": lambda c: c.cut(len_lookback_buffer=2),
    "slice": lambda c: c[0 : len(c)],
    "get_state": lambda c: SingleAgentEpisode.from_state(c.get_state()),
}


@pytest.mark.parametrize("relabel", list(RELABELS))
def test_relabel_seen_by_cut_slice_get_state_concat_and_converter_taken_after(relabel):
    column, dt, write = RELABELS[relabel]
    runner = scripted_runner(LONG, lookback=2)
    chunks = runner.sample(4)
    target = first_chunk_of_env0(chunks)
    t = target.t + dt
    write(target)
    for name, make in AFTER.items():
        assert np.all(np.asarray(at(make(target), column, t)) == -5.0), name
    joined = copy.deepcopy(target)
    joined.concat_episode(first_chunk_of_env0(runner.sample(2)))
    assert np.all(np.asarray(at(joined, column, t)) == -5.0)
    if column != "observations":
        batch = episodes_to_batch([target])
        rows = batch["rewards" if column == "rewards" else column]
        assert float(rows[-1]) == -5.0
        assert not chunks.unchanged()


def test_relabel_in_place_change_of_a_getters_result_writes_into_the_runners_blocks():
    runner = scripted_runner(LONG, lookback=2)
    chunks = runner.sample(4)
    target = first_chunk_of_env0(chunks)
    rewards = target.get_rewards()
    rewards += 1000.0
    assert chunks.take("rewards")[:, 0].tolist() == [1001.0, 1002.0, 1003.0, 1004.0]
    assert chunks.unchanged()  # no setter ran: the fast path reads the written blocks


def test_relabel_converter_reads_new_rewards_values_and_bootstraps_time_major_what_was_recorded():
    runner = scripted_runner([[(3, "trunc")], [(7, "term")]])
    chunks = runner.sample(4)
    recorded = chunks.time_major(["vf_preds"])
    rec_rewards = recorded["rewards"].copy()
    for chunk in chunks:
        chunk.set_rewards(new_data=np.asarray(chunk.get_rewards()) + 100.0)
        chunk.set_extra_model_outputs(key="vf_preds", new_data=np.full(len(chunk), 7.0, np.float32))
        if chunk.is_truncated:
            chunk.set_observations(new_data=np.array([0, 0, 40], np.float32), at_indices=-1)
    assert not chunks.unchanged()
    rollout = episodes_to_rollout(chunks, gamma=GAMMA, value_fn=value_of)
    st = rollout.storage
    assert (st.values == 7.0).all()
    rewards = st.rewards.numpy()[..., 0]
    # Sub-env 0 truncates at step 3 (row 2): bootstrap from the relabelled final obs, t = 40.
    expected = rec_rewards + 100.0
    expected[2, 0] += GAMMA * 0.5 * 40
    assert np.allclose(rewards, expected)
    again = chunks.time_major(["vf_preds"])
    assert np.array_equal(again["rewards"], rec_rewards)
    assert not (again["extras"]["vf_preds"] == 7.0).all()
    assert np.array_equal(chunks.take("rewards"), rec_rewards)


def relabelled_vector_steps_window():
    runner = scripted_runner([[(2, "term")], [(7, "term")]], window="vector_steps")
    chunks = runner.sample(5)  # sub-env 0 resets inside the window
    total = 0.0
    for chunk in chunks:
        chunk.set_rewards(new_data=np.asarray(chunk.get_rewards()) * 2.0)
        total += float(np.sum(chunk.get_rewards()))
    return chunks, total


def test_relabel_vector_steps_window_with_reset_steps_has_no_general_path():
    chunks, _ = relabelled_vector_steps_window()
    with pytest.raises(ValueError, match="per_chunk"):
        episodes_to_rollout(chunks, gamma=GAMMA, value_fn=value_of)


def test_relabel_vector_steps_window_converts_with_layout_per_chunk():
    chunks, total = relabelled_vector_steps_window()
    rollout = episodes_to_rollout(chunks, gamma=GAMMA, value_fn=value_of, layout="per_chunk")
    assert float(rollout.storage.rewards.sum()) == pytest.approx(total)


@pytest.mark.parametrize("how", ["list of deepcopies", "deepcopy of SampledChunks"])
def test_relabel_vector_steps_window_copies_convert_per_chunk_only(how):
    runner = scripted_runner([[(2, "term")], [(7, "term")]], window="vector_steps")
    sample = runner.sample(5)
    copies = [copy.deepcopy(c) for c in sample] if how.startswith("list") else copy.deepcopy(sample)
    total = 0.0
    for chunk in copies:
        chunk.set_rewards(new_data=np.asarray(chunk.get_rewards()) * 2.0)
        total += float(np.sum(chunk.get_rewards()))
    # docs/episodes.md: "once a chunk of it is written (or copied), convert with per_chunk"
    with pytest.raises(ValueError):
        episodes_to_rollout(copies, gamma=GAMMA, value_fn=value_of)
    rollout = episodes_to_rollout(copies, gamma=GAMMA, value_fn=value_of, layout="per_chunk")
    assert float(rollout.storage.rewards.sum()) == pytest.approx(total)


def test_relabel_replay_buffer_stores_a_copy_and_no_lookback():
    runner = scripted_runner(LONG, lookback=2)
    runner.sample(3)
    chunks = runner.sample(3)  # env 0's chunk has 2 lookback steps
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(list(chunks))
    assert buf.get_num_timesteps() == sum(len(c) for c in chunks)
    for chunk in chunks:
        chunk.set_rewards(new_data=np.full(len(chunk), -9.0))
    batch = buf.sample(20)
    assert not (np.asarray(batch["rewards"]) == -9.0).any()
    indices = np.asarray(batch["indices"])[:3]
    assert buf.set_extra_model_outputs("vf_preds", np.full(3, 42.0, np.float32), indices) > 0
    stored = buf.get_transitions(indices, include_extra_model_outputs=True)["vf_preds"]
    assert np.asarray(stored).tolist() == [42.0] * 3


BAD_COLUMNS = {
    "validate": lambda ep: ep.validate(),
    "to_numpy": lambda ep: ep.to_numpy(),
    "concat_episode": lambda ep: ep.concat_episode(
        SingleAgentEpisode(
            ep.id_,
            observations=[ep.get_observations(-1)],
            t_started=ep.t,
            len_lookback_buffer=0,
        )
    ),
}


@pytest.mark.parametrize("call", list(BAD_COLUMNS))
def test_relabel_a_new_column_not_an_ilb_is_an_assertion_error_naming_the_key(call):
    chunk = first_chunk_of_env0(scripted_runner(LONG).sample(4))
    chunk.extra_model_outputs["my_bonus"] = np.zeros(len(chunk))
    before = copy.deepcopy(chunk)
    with pytest.raises(AssertionError, match="my_bonus") as refused:
        BAD_COLUMNS[call](chunk)
    assert "InfiniteLookbackBuffer" in str(refused.value)  # deviations.md: the way that works
    assert len(chunk) == len(before) and chunk.t == before.t


def test_relabel_a_new_column_not_an_ilb_is_the_writers_unstorable_value_error(tmp_path):
    from episodes.io import DatasetWriter, UnstorableValueError

    chunk = first_chunk_of_env0(scripted_runner(LONG).sample(4))
    chunk.extra_model_outputs["my_bonus"] = np.zeros(len(chunk))
    with pytest.raises(UnstorableValueError, match="my_bonus"):
        with DatasetWriter(tmp_path / "d") as writer:
            writer.write(chunk)


def test_relabel_a_new_ilb_column_one_value_per_action_lookback_included_travels():
    chunks = scripted_runner(LONG, lookback=2).sample(4)
    for chunk in chunks:
        lookback = chunk.actions.lookback
        bonus = np.arange(len(chunk), dtype=np.float64) + 0.5
        chunk.extra_model_outputs["bonus"] = InfiniteLookbackBuffer(
            np.concatenate([np.zeros(lookback), bonus]), lookback=lookback
        )
        chunk.validate()
    batch = episodes_to_batch(list(chunks))
    assert np.allclose(batch["bonus"], np.concatenate([np.arange(len(c)) + 0.5 for c in chunks]))


@pytest.mark.parametrize("fmt", ["v1", "v2"])
@pytest.mark.parametrize("width", [3, 1024], ids=["small", "memory-mapped (1 MiB and more)"])
def test_relabel_a_loaded_datasets_episodes_own_their_arrays(tmp_path, fmt, width):
    from episodes.io import DatasetWriter, EpisodeWriter, load_episodes, read_episodes

    writer_of = {"v1": EpisodeWriter, "v2": DatasetWriter}[fmt]
    episode = SingleAgentEpisode(
        "e",
        observations=np.ones((301, width), np.float32),
        actions=[0] * 300,
        rewards=[1.0] * 300,
        len_lookback_buffer=0,
    ).to_numpy()
    with writer_of(tmp_path / "a") as writer:
        writer.write(episode)
    (loaded,) = read_episodes(tmp_path / "a")
    loaded.set_rewards(new_data=np.full(300, -3.0))
    loaded.set_observations(new_data=np.full(width, -3.0, np.float32), at_indices=5)
    with writer_of(tmp_path / "b") as writer:
        writer.write(loaded)
    (old,) = load_episodes(tmp_path / "a", ["e"])
    (new,) = load_episodes(tmp_path / "b", ["e"])
    assert (np.asarray(old.get_rewards()) == 1.0).all() and (old.get_observations(5) == 1).all()
    assert (np.asarray(new.get_rewards()) == -3.0).all() and (new.get_observations(5) == -3).all()


# --- docs/format.md: pieces of one id stored numpy'd in other dtypes --------------------------

FINE = 1 + 2**-40  # float32 rounds it to 1.0


def piece(actions: Any, t_started: int, numpy: bool = True) -> SingleAgentEpisode:
    n = len(actions)
    episode = SingleAgentEpisode(
        "a",
        observations=[[float(t)] for t in range(t_started, t_started + n + 1)],
        actions=list(actions) if not numpy else np.asarray(actions),
        rewards=[0.0] * n,
        t_started=t_started,
        len_lookback_buffer=0,
    )
    return episode.to_numpy() if numpy else episode


def two_runs(path, fmt, first, second):
    from episodes.io import DatasetWriter, EpisodeWriter

    for p in (first, second):
        with {"v1": EpisodeWriter, "v2": DatasetWriter}[fmt](path) as writer:
            writer.write(p)


# name -> (first actions, second actions, joined dtype, joined values)
WIDENED = {
    "float32 beside float64, not rounded": (
        np.array([0.5], np.float32),
        np.array([FINE]),
        "float64",
        [0.5, FINE],
    ),
    "int32 beside int64 2**40": (np.array([1], np.int32), np.array([2**40]), "int64", [1, 2**40]),
    "int64 beside uint64 gives float64": (
        np.array([1], np.int64),
        np.array([2**63], np.uint64),
        "float64",
        [1.0, 2.0**63],
    ),
    "bool beside int16": (np.array([True]), np.array([5], np.int16), "int16", [1, 5]),
    "float32 beside complex": (
        np.array([1.5], np.float32),
        np.array([1 + 2j]),
        "complex128",
        [1.5, 1 + 2j],
    ),
    "<U2 beside <U5 gives <U5": (np.array(["ab"]), np.array(["abcde"]), "<U5", ["ab", "abcde"]),
    "bytes |S2 beside |S5": (np.array([b"ab"]), np.array([b"abcde"]), "|S5", [b"ab", b"abcde"]),
    "list-mode piece after a numpy'd first one": (
        np.array([0.5], np.float32),
        [FINE],  # stored in list mode: numpy'd before the join
        "float64",
        [0.5, FINE],
    ),
}


@pytest.mark.parametrize("fmt", ["v1", "v2"])
@pytest.mark.parametrize("case", list(WIDENED))
def test_format_numpy_true_joins_pieces_in_numpys_result_type(tmp_path, fmt, case):
    from episodes.io import load_episode

    first, second, dtype, values = WIDENED[case]
    two_runs(tmp_path, fmt, piece(first, 0), piece(second, 1, numpy=isinstance(second, np.ndarray)))
    actions = load_episode(tmp_path, "a", numpy=True).get_actions()
    assert actions.dtype.str.lstrip("<>|=") == np.dtype(dtype).str.lstrip("<>|=")
    assert actions.tolist() == values


@pytest.mark.parametrize("fmt", ["v1", "v2"])
def test_format_numbers_beside_strings_joined_as_stored_refused_where_they_do_not_fit(
    tmp_path, fmt
):
    from episodes.io import CorruptDatasetError, load_episode

    two_runs(tmp_path / "s", fmt, piece(np.array(["xy"]), 0), piece(np.array([1]), 1))
    assert load_episode(tmp_path / "s", "a", numpy=True).get_actions().dtype == np.dtype("<U2")
    two_runs(tmp_path / "n", fmt, piece(np.array([1]), 0), piece(np.array(["xyz"]), 1))
    with pytest.raises(CorruptDatasetError):
        load_episode(tmp_path / "n", "a", numpy=True)


@pytest.mark.parametrize("fmt", ["v1", "v2"])
def test_format_numpy_none_keeps_the_first_pieces_dtype_rounds_what_fits_refuses_others(
    tmp_path, fmt
):
    from episodes.io import CorruptDatasetError, load_episode

    two_runs(tmp_path / "f", fmt, piece(np.array([0.5], np.float32), 0), piece(np.array([FINE]), 1))
    joined = load_episode(tmp_path / "f", "a").get_actions()
    assert joined.dtype == np.float32 and joined.tolist() == [0.5, 1.0]  # rounded
    two_runs(tmp_path / "i", fmt, piece(np.array([1], np.int32), 0), piece(np.array([2**40]), 1))
    with pytest.raises(CorruptDatasetError):
        load_episode(tmp_path / "i", "a")


def test_format_each_episode_of_load_episodes_keeps_its_own_dtypes(tmp_path):
    from episodes.io import DatasetWriter, load_episodes

    with DatasetWriter(tmp_path) as writer:
        for id_, dtype in (("n", np.float32), ("w", np.float64)):
            writer.write(SingleAgentEpisode(id_, observations=np.zeros((1, 2), dtype)).to_numpy())
    got = load_episodes(tmp_path, ["n", "w"], numpy=True)
    assert [e.get_observations().dtype.name for e in got] == ["float32", "float64"]


def test_format_piece_dtypes_module_names_widen_pieces_and_joined_dtype():
    from episodes.io import piece_dtypes

    assert piece_dtypes.joined_dtype([np.dtype("<U2"), np.dtype(np.int64)]) is None
    assert piece_dtypes.joined_dtype([np.dtype(np.int64), np.dtype(np.uint64)]) == np.float64
    assert callable(piece_dtypes.widen_pieces)


# --- docs/api.md: episodes.shapes ------------------------------------------------------------

SHAPES = [
    ("T,N serves T,N,1", (4, 2), (4, 2, 1), True),
    ("N,T does not serve T,N", (2, 4), (4, 2), False),
    ("1s dropped at the end of each", (4, 1, 1), (4, 1), True),
    ("a 1 inside counts", (3, 1, 2), (3, 2), False),
    ("torch.Size beside a tuple", torch.Size([4, 2, 1]), (4, 2), True),
    ("numpy shape beside torch.Size", np.zeros((4, 2)).shape, torch.Size([4, 2, 1]), True),
    ("same count, other shape", (8,), (4, 2), False),
]


@pytest.mark.parametrize("a, b, match", [c[1:] for c in SHAPES], ids=[c[0] for c in SHAPES])
def test_api_shapes_same_but_trailing_ones(a, b, match):
    from episodes.shapes import same_but_trailing_ones

    assert same_but_trailing_ones(a, b) is match
    assert same_but_trailing_ones(b, a) is match


def test_api_shapes_rollout_leaves_same_but_trailing_ones_is_the_same_function():
    from episodes.rollout import leaves
    from episodes.shapes import same_but_trailing_ones

    assert leaves.same_but_trailing_ones is same_but_trailing_ones


def test_api_shapes_compute_gae_takes_T_N_for_T_N_1_and_refuses_N_T():
    from episodes.rollout import compute_gae

    T, N = 4, 2
    rewards = torch.arange(T * N, dtype=torch.float32).view(T, N, 1)
    values, dones = torch.zeros(T, N, 1), torch.zeros(T, N, 1, dtype=torch.bool)
    wide = compute_gae(rewards, values, dones, torch.zeros(N), 0.9, 0.9)
    flat = compute_gae(
        rewards.view(T, N), values.view(T, N), dones.view(T, N), torch.zeros(N), 0.9, 0.9
    )
    assert torch.allclose(wide.reshape(T, N), flat.reshape(T, N))
    with pytest.raises(ValueError, match="shape"):
        compute_gae(rewards, values.view(N, T), dones, torch.zeros(N), 0.9, 0.9)


@pytest.mark.parametrize("which", ["truncated", "final_values"])
def test_api_shapes_bootstrap_truncated_rewards_mask_and_values(which):
    from episodes.converter import bootstrap_truncated_rewards

    rewards = np.zeros((3, 2, 1))
    args = {"truncated": np.zeros((3, 2, 1), bool), "final_values": np.ones((3, 2, 1))}
    args["truncated"][2, 1] = True
    args[which] = args[which].reshape(3, 2)
    out = bootstrap_truncated_rewards(rewards, args["truncated"], args["final_values"], 0.5)
    assert out.shape == (3, 2, 1) and out[2, 1, 0] == 0.5 and out.sum() == 0.5
    args[which] = args[which].reshape(2, 3)
    with pytest.raises(ValueError, match=which):
        bootstrap_truncated_rewards(rewards, args["truncated"], args["final_values"], 0.5)


def test_api_shapes_storage_writes_take_T_N_for_T_N_1_and_refuse_N_T():
    st = RolloutStorage("rl", 2, 3, (1,), (1,))
    st.write_block(0, rewards=torch.arange(6.0).view(3, 2))
    assert st.rewards[..., 0].tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    before = st.rewards.clone()
    with pytest.raises(ValueError):
        st.write_block(0, rewards=torch.arange(6.0).view(2, 3))
    assert torch.equal(st.rewards, before)


# --- docs/api.md: MeanStdFilter settings assigned later --------------------------------------

BAD_SETTINGS = [
    ("update", "no"),
    ("update", 2),
    ("inference", "yes"),
    ("clip", -1.0),
    ("clip", "10"),
    ("clip", float("nan")),
    ("eps", 0.0),
    ("eps", True),
    ("out_key", 3),
    ("out_key", None),
]


@pytest.mark.parametrize("name, value", BAD_SETTINGS, ids=[f"{n}={v!r}" for n, v in BAD_SETTINGS])
def test_api_mean_std_filter_settings_assigned_later_checked_as_the_constructor(name, value):
    with pytest.raises((TypeError, ValueError)) as made:
        MeanStdFilter(**{name: value})
    filt = MeanStdFilter()
    old = getattr(filt, name)
    with pytest.raises(type(made.value)):
        setattr(filt, name, value)
    assert getattr(filt, name) == old


def test_api_mean_std_filter_settings_assigned_later_take_effect():
    runner = scripted_runner([[(3, "term")], [(4, "trunc")]])
    filt = MeanStdFilter()
    filt(runner.sample(4), {})
    filt.clip, filt.eps, filt.out_key = 0.25, 1.0, "normed"
    out = filt(runner.sample(2), {})["normed"]
    assert np.abs(out).max() == pytest.approx(0.25)
    filt.inference = True
    assert len(filt(runner.sample(2), {})["normed"]) == 2  # one row per episode
    count = filt.count
    filt.update = False
    filt(runner.sample(2), {})
    assert filt.count == count


# --- docs/api.md: add_rollouts refuses a record array -----------------------------------------

B, H = 2, 3
RECORD = np.zeros((B, H), dtype=[("x", np.float32), ("y", np.float32)])
RECORD_OBS = np.zeros((B, H + 1), dtype=[("x", np.float32), ("y", np.float32)])


def rollout_args():
    return {
        "observations": np.zeros((B, H + 1, 2), np.float32),
        "actions": np.zeros((B, H), np.int64),
        "rewards": np.zeros((B, H), np.float32),
    }


RECORD_CASES = {
    "observations": ("observations", lambda a: a.update(observations=RECORD_OBS)),
    "actions": ("actions", lambda a: a.update(actions=RECORD)),
    "rewards": ("rewards", lambda a: a.update(rewards=RECORD)),
    "an extra": (
        "extra_model_outputs['logp']",
        lambda a: a.update(extra_model_outputs={"logp": RECORD}),
    ),
    "a dict leaf": (
        "observations",
        lambda a: a.update(observations={"a": RECORD_OBS}),
    ),
}


@pytest.mark.parametrize("case", list(RECORD_CASES))
def test_api_add_rollouts_record_array_is_a_type_error_naming_argument_shape_dtype(case):
    argument, spoil = RECORD_CASES[case]
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add_rollouts(**rollout_args())
    state_episodes = buf.get_num_episodes()
    args = rollout_args()
    spoil(args)
    with pytest.raises(TypeError) as refused:
        buf.add_rollouts(**args)
    message = str(refused.value)
    assert argument in message and "record array" in message
    assert str(RECORD.dtype) in message and "shape" in message
    if case != "rewards":  # rewards take no dict: one float per step
        assert "as a dict" in message
    assert buf.get_num_timesteps() == B * H and buf.get_num_episodes() == state_episodes
