"""A Stable-Baselines3 user's checks, value by value against plain numpy loops of SB3's rules.

SB3 itself is not installed: each reference below is written out from SB3's semantics
(``RolloutBuffer.compute_returns_and_advantage``, the timeout bootstrap in
``OnPolicyAlgorithm.collect_rollouts``, ``RunningMeanStd``), run on the same gymnasium envs.
"""

from __future__ import annotations

import collections

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from episodes.connectors import MeanStdFilter
from episodes.converter import episodes_to_rollout
from episodes.runner import EnvRunner, EpisodeTally

GAMMA, LAM = 0.99, 0.95
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]
WEIGHTS = np.array([0.3, -0.2, 0.5, 0.1])


def value(obs):
    obs = np.asarray(obs, np.float64)
    return obs @ WEIGHTS[: obs.shape[-1]]


def cartpole_action(obs):
    return (np.asarray(obs)[:, 2] > 0).astype(np.int64)


def pendulum_action(obs):
    # Beyond Pendulum's [-2, 2] on purpose: the clipping rows below need such actions.
    return (8.0 * np.asarray(obs)[:, 1:2] - np.asarray(obs)[:, 2:3]).astype(np.float32)


def make_policy(act):
    def policy(obs):
        a = act(obs)
        extras = {
            "vf_preds": value(obs).astype(np.float32),
            "action_logp": np.full(len(a), -0.5, np.float32),
        }
        return a, extras

    return policy


class EndsTogether(gym.Env):
    """Terminates at its third step, where a ``TimeLimit(3)`` truncates it too."""

    observation_space = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.k = 0
        return np.array([0.0, 1.0], np.float32), {}

    def step(self, action):
        self.k += 1
        return np.array([self.k, 1.0], np.float32), 1.0, self.k == 3, False, {}


def make_env(name, mode, num_envs, max_steps):
    if name == "ends_together":
        fns = [lambda: gym.wrappers.TimeLimit(EndsTogether(), 3)] * num_envs
        return gym.vector.SyncVectorEnv(fns, autoreset_mode=mode)
    return gym.make_vec(
        name,
        num_envs=num_envs,
        vectorization_mode="sync",
        max_episode_steps=max_steps,
        vector_kwargs={"autoreset_mode": mode},
    )


def plain_transitions(env, act, mode, needed, seed):
    """Per sub-env ``(obs, action, reward, terminated, truncated, next obs of that episode)``."""
    obs, _ = env.reset(seed=seed)
    out = [[] for _ in range(env.num_envs)]
    prev_done = np.zeros(env.num_envs, bool)
    while min(len(t) for t in out) < needed:
        a = act(obs)
        new, r, te, tr, info = env.step(a)
        for i in range(env.num_envs):
            if mode == AutoresetMode.NEXT_STEP and prev_done[i]:
                continue  # the reset step: no transition
            same_step_end = mode == AutoresetMode.SAME_STEP and (te[i] or tr[i])
            final = info["final_obs"][i] if same_step_end else new[i]
            out[i].append((obs[i], a[i], float(r[i]), bool(te[i]), bool(tr[i]), final))
        prev_done = te | tr
        if mode == AutoresetMode.DISABLED and prev_done.any():
            new, _ = env.reset(options={"reset_mask": prev_done})
        obs = new
    return out


def sb3_advantages(transitions, start, n_steps):
    """SB3's buffer for steps ``[start, start + n_steps)``: timeout bootstrap, then GAE."""
    n_envs = len(transitions)
    rewards, values = np.zeros((n_steps, n_envs)), np.zeros((n_steps, n_envs))
    episode_starts = np.zeros((n_steps, n_envs))
    last_dones, last_values = np.zeros(n_envs), np.zeros(n_envs)
    for i, steps in enumerate(transitions):
        for t in range(n_steps):
            obs, _, r, te, tr, final = steps[start + t]
            # SB3: TimeLimit.truncated is set only where the episode was not terminated.
            rewards[t, i] = r + (GAMMA * value(final) if tr and not te else 0.0)
            values[t, i] = value(obs)
            if t + 1 < n_steps:
                episode_starts[t + 1, i] = te or tr
            else:
                last_dones[i], last_values[i] = te or tr, value(final)
    advantages, gae = np.zeros((n_steps, n_envs)), np.zeros(n_envs)
    for t in reversed(range(n_steps)):
        if t == n_steps - 1:
            non_terminal, next_values = 1.0 - last_dones, last_values
        else:
            non_terminal, next_values = 1.0 - episode_starts[t + 1], values[t + 1]
        delta = rewards[t] + GAMMA * next_values * non_terminal - values[t]
        gae = delta + GAMMA * LAM * non_terminal * gae
        advantages[t] = gae
    return advantages, advantages + values


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
@pytest.mark.parametrize(
    ("name", "act", "max_steps"),
    [
        ("CartPole-v1", cartpole_action, 7),
        ("CartPole-v1", cartpole_action, 5),  # truncated at a window's last step
        ("Pendulum-v1", pendulum_action, 5),
        ("ends_together", lambda obs: np.zeros(len(obs), np.int64), None),
    ],
    ids=["cartpole", "cartpole_window_end", "pendulum", "terminated_and_truncated"],
)
def test_gae_matches_sb3_rollout_buffer(name, act, max_steps, mode):
    n_envs, n_steps, calls, seed = 3, 10, 3, 5
    reference = plain_transitions(
        make_env(name, mode, n_envs, max_steps), act, mode, n_steps * calls, seed
    )
    flags = [(s[3], s[4]) for steps in reference for s in steps[: n_steps * calls]]
    assert any(tr and not te for te, tr in flags) or name == "ends_together"
    if name == "ends_together":
        assert all(te == tr for te, tr in flags) and any(te for te, _ in flags)
    runner = EnvRunner(make_env(name, mode, n_envs, max_steps), make_policy(act), seed=seed)
    for call in range(calls):
        rollout = episodes_to_rollout(
            runner.sample(n_steps), gamma=GAMMA, value_fn=value, dtype=torch.float64
        )
        storage = rollout.storage
        storage.compute_returns(rollout.last_values, GAMMA, LAM, normalize_advantage=False)
        advantages, returns = sb3_advantages(reference, call * n_steps, n_steps)
        np.testing.assert_allclose(storage.advantages[..., 0].numpy(), advantages, atol=1e-5)
        np.testing.assert_allclose(storage.returns[..., 0].numpy(), returns, atol=1e-5)


def welford(rows):
    count, mean, m2 = 0, np.zeros(rows[0].shape), np.zeros(rows[0].shape)
    for x in rows:
        count += 1
        delta = x - mean
        mean = mean + delta / count
        m2 = m2 + delta * (x - mean)
    return count, mean, m2


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_mean_std_filter_is_a_welford_loop_over_each_observation_once(mode):
    env = make_env("CartPole-v1", mode, 2, 6)
    runner = EnvRunner(env, make_policy(cartpole_action), seed=1, len_lookback_buffer=2)
    filt = MeanStdFilter(clip=None)
    seen = {}
    for _ in range(3):
        chunks = runner.sample(5)
        out = filt(chunks, {})["obs"]
        for ch in chunks:
            for t, o in zip(range(ch.t_started, ch.t + 1), ch.get_observations()):
                seen.setdefault((ch.id_, t), o)
        count, mean, m2 = welford(list(seen.values()))
        assert filt.count == count
        np.testing.assert_allclose(filt.mean, mean, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(filt.var, m2 / (count - 1), rtol=1e-9, atol=1e-12)
        rows = np.concatenate([ch.get_observations()[:-1] for ch in chunks])
        expected = (rows - mean) / (np.sqrt(m2 / (count - 1)) + 1e-6)
        np.testing.assert_allclose(out, expected.astype(np.float32), rtol=1e-5, atol=1e-6)


def test_mean_std_filter_frozen_for_evaluation_and_restored_from_state():
    env = make_env("CartPole-v1", AutoresetMode.NEXT_STEP, 2, 20)
    runner = EnvRunner(env, make_policy(cartpole_action), seed=2)
    train = MeanStdFilter()
    train(runner.sample(8), {})
    state = train.get_state()
    frozen = train.shared(update=False)  # evaluation: same statistics, no counting
    evaluation = runner.sample(8)
    normalized = frozen(evaluation, {})["obs"]
    assert train.count == state["count"]
    np.testing.assert_array_equal(train.mean, state["mean"])
    rows = np.concatenate([ch.get_observations()[:-1] for ch in evaluation])
    expected = np.clip((rows - state["mean"]) / (train.std + 1e-6), -10, 10)
    np.testing.assert_allclose(normalized, expected.astype(np.float32), rtol=1e-6)
    restored = MeanStdFilter(update=False)  # a checkpoint's filter, loaded for evaluation
    restored.set_state(state)
    np.testing.assert_array_equal(restored(evaluation, {})["obs"], normalized)
    assert restored.count == train.count
    resumed = MeanStdFilter()  # ... or for training on: it counts on from the saved count
    resumed.set_state(state)
    resumed(evaluation, {})
    assert resumed.count == state["count"] + sum(len(ch) + 1 for ch in evaluation)


def test_flat_mini_batches_give_each_sample_once_per_epoch_and_follow_the_seed():
    env = make_env("CartPole-v1", AutoresetMode.SAME_STEP, 4, 9)
    runner = EnvRunner(env, make_policy(cartpole_action), seed=3)
    rollout = episodes_to_rollout(runner.sample(6), gamma=GAMMA, value_fn=value)
    storage = rollout.storage
    storage.compute_returns(rollout.last_values, GAMMA, LAM, normalize_advantage=False)
    # Each cell told apart by its value estimate and advantage.
    keys = {
        (v, a)
        for v, a in zip(storage.values.flatten().tolist(), storage.advantages.flatten().tolist())
    }
    assert len(keys) == 24

    def epochs(seed):
        gen = torch.Generator().manual_seed(seed)
        batches = storage.mini_batch_generator(4, num_epochs=2, generator=gen)
        return [
            list(zip(b.values.flatten().tolist(), b.advantages.flatten().tolist())) for b in batches
        ]

    first = epochs(7)
    for epoch in (first[:4], first[4:]):
        assert sorted(k for b in epoch for k in b) == sorted(keys)
    assert epochs(7) == first
    assert epochs(8) != first


def test_per_mini_batch_advantage_normalisation_as_sb3():
    env = make_env("CartPole-v1", AutoresetMode.SAME_STEP, 4, 9)
    runner = EnvRunner(env, make_policy(cartpole_action), seed=3)
    rollout = episodes_to_rollout(runner.sample(6), gamma=GAMMA, value_fn=value)
    storage = rollout.storage
    storage.compute_returns(rollout.last_values, GAMMA, LAM, normalize_advantage=False)
    raw = storage.advantages.clone()
    gen = torch.Generator().manual_seed(0)
    batches = list(
        storage.mini_batch_generator(
            3, num_epochs=1, generator=gen, normalize_advantage_per_mini_batch=True
        )
    )
    for batch in batches:
        cells = [
            torch.nonzero(storage.values.flatten() == v)[0].item() for v in batch.values.flatten()
        ]
        adv = raw.flatten()[cells]
        expected = (adv - adv.mean()) / (adv.std() + 1e-8)
        torch.testing.assert_close(batch.advantages.flatten(), expected)


def test_box_actions_clipped_for_the_env_stored_unclipped():
    mode = AutoresetMode.NEXT_STEP
    env = gym.wrappers.vector.ClipAction(make_env("Pendulum-v1", mode, 2, 50))
    runner = EnvRunner(env, make_policy(pendulum_action), seed=4)
    chunks = runner.sample(6)
    reference = plain_transitions(
        make_env("Pendulum-v1", mode, 2, 50),
        lambda obs: np.clip(pendulum_action(obs), -2.0, 2.0),
        mode,
        6,
        4,
    )
    # What the policy gave, beyond the space, as SB3's buffer keeps it.
    assert max(np.abs(ch.get_actions()).max() for ch in chunks) > 2.0
    for ch, steps in zip(chunks, reference):
        np.testing.assert_allclose(ch.get_rewards(), [s[2] for s in steps[:6]], rtol=1e-6)
        np.testing.assert_allclose(ch.get_observations()[1:], [s[5] for s in steps[:6]], rtol=1e-6)


def test_last_100_episodes_as_ep_info_buffer():
    env = make_env("CartPole-v1", AutoresetMode.SAME_STEP, 4, 5)
    runner = EnvRunner(env, make_policy(cartpole_action), seed=0)
    ep_info_buffer = collections.deque(maxlen=100)
    everything = []
    for _ in range(4):
        chunks = runner.sample(40)
        m = runner.get_metrics()
        ep_info_buffer.extend(zip(m["episode_returns"], m["episode_lengths"]))
        everything += [(c.get_return(), len(c)) for c in chunks if c.is_done]
    assert len(everything) > 100
    assert sorted(ep_info_buffer) == sorted(everything[-100:])


def plain_vector_steps(env, act, mode, n_steps, calls, seed):
    """Per call and sub-env, the transitions of ``n_steps`` env.step calls, and which cells."""
    obs, _ = env.reset(seed=seed)
    out = [[[] for _ in range(env.num_envs)] for _ in range(calls)]
    cells = np.zeros((calls, n_steps, env.num_envs), bool)
    prev_done = np.zeros(env.num_envs, bool)
    for call in range(calls):
        for k in range(n_steps):
            a = act(obs)
            new, r, te, tr, info = env.step(a)
            for i in range(env.num_envs):
                if mode == AutoresetMode.NEXT_STEP and prev_done[i]:
                    continue
                cells[call, k, i] = True
                same_step_end = mode == AutoresetMode.SAME_STEP and (te[i] or tr[i])
                final = info["final_obs"][i] if same_step_end else new[i]
                out[call][i].append((obs[i], a[i], float(r[i]), bool(te[i]), bool(tr[i]), final))
            prev_done = te | tr
            if mode == AutoresetMode.DISABLED and prev_done.any():
                new, _ = env.reset(options={"reset_mask": prev_done})
            obs = new
    return out, cells


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_vector_steps_window_is_sb3s_n_steps_with_reset_steps_masked(mode):
    # SB3's buffer holds n_steps env.step calls; a next-step reset step holds no transition,
    # so each sub-env's GAE runs over its transitions alone and the masked cells get 0.
    n_envs, n_steps, calls, seed = 3, 10, 3, 5
    env = make_env("CartPole-v1", mode, n_envs, 7)
    reference, cells = plain_vector_steps(env, cartpole_action, mode, n_steps, calls, seed)
    env = make_env("CartPole-v1", mode, n_envs, 7)
    runner = EnvRunner(env, make_policy(cartpole_action), seed=seed, window="vector_steps")
    assert (~cells).any() == (mode == AutoresetMode.NEXT_STEP)
    for call in range(calls):
        rollout = episodes_to_rollout(
            runner.sample(n_steps), gamma=GAMMA, value_fn=value, dtype=torch.float64
        )
        storage = rollout.storage
        storage.compute_returns(rollout.last_values, GAMMA, LAM, normalize_advantage=False)
        valid = np.ones_like(cells[call]) if storage.valid is None else storage.valid.numpy()
        np.testing.assert_array_equal(valid.reshape(cells[call].shape), cells[call])
        got = storage.advantages[..., 0].numpy()
        for i, steps in enumerate(reference[call]):
            advantages, _ = sb3_advantages([steps], 0, len(steps))
            np.testing.assert_allclose(got[cells[call][:, i], i], advantages[:, 0], atol=1e-5)
            assert (got[~cells[call][:, i], i] == 0).all()


@pytest.mark.parametrize(
    ("name", "value", "error"),
    [
        ("update_string", ("update", "no"), TypeError),
        ("update_none", ("update", None), TypeError),
        ("clip_negative", ("clip", -1.0), ValueError),
        ("clip_string", ("clip", "3"), TypeError),
        ("eps_zero", ("eps", 0.0), ValueError),
        ("inference_string", ("inference", "yes"), TypeError),
        ("out_key_int", ("out_key", 3), TypeError),
    ],
)
def test_mean_std_filter_settings_checked_when_assigned(name, value, error):
    # VecNormalize's ``venv.training = False`` is ``filt.update = False`` here: a setting
    # assigned later is checked as the constructor checks it, the old value kept.
    attr, bad = value
    filt = MeanStdFilter(clip=5.0)
    before = getattr(filt, attr)
    with pytest.raises(error, match=attr):
        setattr(filt, attr, bad)
    assert getattr(filt, attr) == before


def test_mean_std_filter_settings_assigned_later_take_effect():
    env = make_env("CartPole-v1", AutoresetMode.SAME_STEP, 2, 20)
    chunks = EnvRunner(env, make_policy(cartpole_action), seed=0).sample(6)
    filt = MeanStdFilter()
    filt.update, filt.clip, filt.eps = np.bool_(False), None, 0.5
    assert filt.update is False and filt.clip is None and filt.eps == 0.5
    filt.update = True
    filt(chunks, {})
    assert filt.count == sum(len(ch) + 1 for ch in chunks)


@pytest.mark.xfail(strict=True, reason="missing piece: no reward normalization of our own")
def test_reward_normalization_by_running_return_std():
    # VecNormalize(norm_reward=True) divides rewards by the running std of discounted
    # returns; here only gymnasium's vector NormalizeReward wrapper does (docs/from_sb3.md).
    import episodes.connectors as connectors

    assert any("reward" in name.lower() and "norm" in name.lower() for name in connectors.__all__)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_monitor_returns_through_record_episode_statistics_and_tally(mode):
    # SB3's ep_info_buffer holds Monitor's raw returns, VecNormalize scaling the rewards
    # outside it: a per-env RecordEpisodeStatistics under NormalizeReward, read by a tally.
    def make():
        wrappers = [lambda e: gym.wrappers.TimeLimit(e, 7), gym.wrappers.RecordEpisodeStatistics]
        kwargs = {"autoreset_mode": mode}
        return gym.make_vec(
            "Pendulum-v1", 3, vectorization_mode="sync", vector_kwargs=kwargs, wrappers=wrappers
        )

    def clipped(obs):
        return np.clip(pendulum_action(obs), -2.0, 2.0)

    reference = plain_transitions(make(), clipped, mode, 40, 3)
    env = gym.wrappers.vector.ClipAction(gym.wrappers.vector.NormalizeReward(make(), gamma=GAMMA))
    runner = EnvRunner(env, make_policy(pendulum_action), seed=3)
    tally, finished = EpisodeTally(), []
    for _ in range(4):
        finished += tally.add(runner.sample(10))
    assert len(finished) == 15
    for i, steps in enumerate(reference):
        raw, total, length = [], 0.0, 0
        for _, _, r, te, tr, _ in steps:
            total, length = total + r, length + 1
            if te or tr:
                raw.append((total, length))
                total, length = 0.0, 0
        got = [e.last_info["episode"] for e in finished if e.env_index == i]
        assert [int(g["l"]) for g in got] == [n for _, n in raw[: len(got)]]
        np.testing.assert_allclose([float(g["r"]) for g in got], [r for r, _ in raw[: len(got)]])
        # The runner's own figures sum the normalized rewards it recorded.
        assert not np.allclose(
            [e.ret for e in finished if e.env_index == i], [float(g["r"]) for g in got]
        )


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_mean_std_filter_as_obs_fn_normalizes_storage_and_bootstrap(mode):
    runner = EnvRunner(make_env("CartPole-v1", mode, 3, 7), make_policy(cartpole_action), seed=5)
    chunks = runner.sample(10)
    filt = MeanStdFilter()
    rows = filt(chunks, {})["obs"]  # counts them first, as VecNormalize does while stepping
    given = []

    def value_fn(obs):
        given.append(np.array(obs))
        return value(obs)

    rollout = episodes_to_rollout(chunks, gamma=GAMMA, value_fn=value_fn, obs_fn=filt.normalize)
    stored = rollout.storage.observations.numpy()
    per_env = collections.defaultdict(list)
    for ch, n in zip(chunks, (ch.custom_data["env_index"] for ch in chunks)):
        per_env[n].append(filt.normalize(ch.get_observations()[:-1]))
    np.testing.assert_array_equal(
        stored, np.stack([np.concatenate(per_env[n]) for n in range(3)], 1)
    )
    assert sum(len(ch) for ch in chunks) == len(rows)
    (bootstrap,) = given
    needed = [ch for ch in chunks if ch.is_truncated or not ch.is_done]
    np.testing.assert_array_equal(
        np.sort(bootstrap.reshape(-1, 4), 0),
        np.sort(filt.normalize(np.stack([ch.get_observations()[-1] for ch in needed])), 0),
    )
