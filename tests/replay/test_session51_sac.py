"""What a SAC / TD3 user collecting with ``EnvRunner`` into ``EpisodeReplayBuffer`` relies on.

Every sampled transition is checked against an independent log the sub-envs keep of every
step they took (observation, action, reward, next observation, both flags), for next-step
and same-step autoreset, n-step 1, 3 and a drawn range, across several samples per env step
(UTD > 1), after evictions of running episodes (a capacity below ``num_envs`` x the episode
length) and after ``save`` / ``load`` in a fresh process. The env has float64 observations,
actions in ``[-2, 3]``, time limits and rare terminations, some at the time limit (both flags
at once).
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes.replay import EpisodeReplayBuffer
from episodes.runner import EnvRunner


class BoxEnv(gym.Env):
    """float64 observations, actions in [-2, 3], time limits and rare terminations."""

    metadata: dict = {}

    def __init__(self, index, limit):
        self.index, self.limit = index, limit
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float64)
        self.action_space = gym.spaces.Box(-2.0, 3.0, (2,), np.float64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        # thirds are not float32 values: a float32 round trip shows
        self.state = self.np_random.normal(size=3) + 1.0 / 3.0
        return self.state.copy(), {}

    def step(self, action):
        self.t += 1
        self.state = self.state * 0.9 + np.concatenate([action, [0.1]]) / 7.0
        # rare terminations; sub-env 0 terminates at its time limit too (both flags)
        term = bool(self.np_random.random() < 0.03) or (self.t == self.limit and self.index == 0)
        return self.state.copy(), float(self.state.sum()), term, self.t >= self.limit, {}


class Logged(gym.Wrapper):
    """Logs every step its env takes: the independent reference of what was collected."""

    def __init__(self, env, index, log):
        super().__init__(env)
        self.log = log.setdefault(index, [])

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.log.append({"obs": [np.array(obs)], "actions": [], "rewards": []})
        self.log[-1].update(term=False, trunc=False)
        return obs, info

    def step(self, action):
        obs, reward, term, trunc, info = self.env.step(action)
        ep = self.log[-1]
        ep["obs"].append(np.array(obs))
        ep["actions"].append(np.array(action))
        ep["rewards"].append(float(reward))
        ep.update(term=term, trunc=trunc)
        return obs, reward, term, trunc, info


def _env(num_envs, mode, log, make=None):
    make = make or (lambda i: BoxEnv(i, 9 + i % 4))
    fns = [lambda i=i: Logged(make(i), i, log) for i in range(num_envs)]
    return SyncVectorEnv(fns, autoreset_mode=mode)


class SquashedGaussian(torch.nn.Module):
    """A tiny tanh-squashed Gaussian actor scaled to the env's action bounds."""

    def __init__(self, obs_dim, low, high):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(obs_dim, 16), torch.nn.Tanh())
        self.head = torch.nn.Linear(16, 2 * len(low))
        self.register_buffer("scale", torch.as_tensor((high - low) / 2, dtype=torch.float32))
        self.register_buffer("bias", torch.as_tensor((high + low) / 2, dtype=torch.float32))

    def forward(self, obs):
        mean, log_std = self.head(self.net(obs.float())).chunk(2, -1)
        dist = torch.distributions.Normal(mean, log_std.clamp(-5, 2).exp())
        u = dist.rsample()
        squashed = torch.tanh(u)
        logp = dist.log_prob(u) - torch.log(self.scale * (1 - squashed.pow(2)) + 1e-6)
        return squashed * self.scale + self.bias, logp.sum(-1), mean


def _policy(actor, warmup, space, seed):
    """The actor's actions after ``warmup`` vector steps, uniform ones from the space before.

    Both keep the same extra outputs and the float32 dtype: the runner records one set of
    columns per runner, and the buffer keeps the first chunk's action dtype.
    """
    rng = np.random.default_rng(seed)
    calls = [0]

    @torch.no_grad()
    def policy(obs):
        calls[0] += 1
        action, logp, mean = actor(torch.as_tensor(obs))
        if calls[0] <= warmup:
            low, high = space.low, space.high
            action = torch.as_tensor(rng.uniform(low, high, size=action.shape), dtype=torch.float32)
        for row, out in zip(np.asarray(obs), zip(logp.numpy(), mean.numpy())):
            policy.outputs[row.tobytes()] = out  # what the actor gave at this observation
        return action, {"action_logp": logp, "mean": mean}

    policy.outputs = {}
    return policy


class Reference:
    """Maps the buffer's episodes to the sub-envs' logs, by env index and order of ids."""

    def __init__(self, log, outputs=None):
        self.log, self.where, self.count, self.outputs = log, {}, {}, outputs

    def note(self, chunks):
        for chunk in chunks:
            if chunk.id_ not in self.where:
                env = chunk.custom_data["env_index"]
                self.where[chunk.id_] = (env, self.count.get(env, 0))
                self.count[env] = self.count.get(env, 0) + 1
        return chunks

    def check(self, buf, batch, n, gamma):
        """Checks each item of ``batch``; ``buf`` names its steps (or the batch's ``steps``)."""
        batch = {k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
        if buf is None:  # named by the buffer that drew them, in another process
            ids, ts, t_end, done = (batch[k] for k in ("ids", "t", "t_end", "done"))
        else:
            ids, ts = buf.episode_steps(batch["indices"])
            _, t_end, done = buf.episode_bounds(batch["indices"])
        for i, (id_, t) in enumerate(zip(ids, ts)):
            env, k = self.where[id_]
            ep = self.log[env][k]
            length = len(ep["actions"])
            assert t_end[i] <= length
            assert not done[i] or t_end[i] == length
            left = int(t_end[i]) - int(t)
            if isinstance(n, tuple):  # drawn per item, hi exclusive
                m = int(batch["n_step"][i])
                assert min(n[0], left) <= m <= min(n[1] - 1, left)
            else:
                m = min(n, left)
            at_end = done[i] and t + m == length
            np.testing.assert_array_equal(batch["obs"][i], ep["obs"][t])
            np.testing.assert_array_equal(batch["actions"][i], ep["actions"][t])
            np.testing.assert_array_equal(batch["next_obs"][i], ep["obs"][t + m])
            assert batch["n_step"][i] == m
            want = sum(gamma**j * ep["rewards"][t + j] for j in range(m))
            assert batch["rewards"][i] == pytest.approx(want, rel=1e-5, abs=1e-5)
            assert batch["discounts"][i] == pytest.approx(gamma**m, rel=1e-6)
            assert batch["terminateds"][i] == (at_end and ep["term"])
            # both flags where the env gave both (a time limit on a terminal step)
            assert batch["truncateds"][i] == (at_end and ep["trunc"])
            if "mean" in batch:  # extra outputs of o_t: what the actor gave there
                logp, mean = self.outputs[np.asarray(ep["obs"][t]).tobytes()]
                assert batch["action_logp"][i] == logp and batch["action_logp"][i].shape == ()
                np.testing.assert_array_equal(batch["mean"][i], mean)
        return len(ids)


MODES = {"next-step": AutoresetMode.NEXT_STEP, "same-step": AutoresetMode.SAME_STEP}


def _collect(
    mode,
    log,
    capacity,
    num_envs=6,
    calls=8,
    T=7,
    n_step=3,
    utd=3,
    device=None,
    make=None,
    on_evicted="restart",
):
    torch.manual_seed(0)
    env = _env(num_envs, MODES[mode], log, make)
    actor = SquashedGaussian(3, env.single_action_space.low, env.single_action_space.high)
    policy = _policy(actor, 10, env.single_action_space, 0)
    runner = EnvRunner(env, policy, seed=0)
    ref = Reference(log, policy.outputs)
    buf = EpisodeReplayBuffer(capacity, seed=0)
    checked = 0
    for _ in range(calls):
        buf.add(ref.note(runner.sample(T)), on_evicted=on_evicted)
        for _ in range(utd * T * num_envs // 32):  # several samples per env step
            batch = buf.sample(
                32, n_step=n_step, gamma=0.99, include_extra_model_outputs=True, device=device
            )
            checked += ref.check(buf, batch, n_step, 0.99)
    return buf, ref, checked


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("n_step", [1, 3, (1, 5)], ids=["n1", "n3", "n1to4"])
@pytest.mark.parametrize(
    "capacity, on_evicted",
    [(40, "restart"), (40, "drop"), (10_000, "raise")],
    ids=["evicting-restart", "evicting-drop", "roomy"],
)
def test_every_sampled_transition_matches_the_env_log(mode, n_step, capacity, on_evicted):
    log = {}
    device = "cpu" if n_step == 3 else None
    buf, ref, checked = _collect(
        mode, log, capacity, n_step=n_step, device=device, on_evicted=on_evicted
    )
    assert checked > 200
    if capacity == 40:
        assert buf.get_num_episodes_evicted() > 0
    # the log holds every kind of end: both flags, time limit only, termination only
    ends = [(ep["term"], ep["trunc"]) for eps in log.values() for ep in eps]
    assert (True, True) in ends and (False, True) in ends and (True, False) in ends
    # every stored item once, in one deterministic read
    items = np.concatenate([buf.get_episode_indices(i) for i in buf.get_episode_ids()])
    fixed = 3 if isinstance(n_step, tuple) else n_step  # get_transitions takes one n
    assert ref.check(buf, buf.get_transitions(items, n_step=fixed, gamma=0.99), fixed, 0.99)


def _pendulum(i):
    return gym.make("Pendulum-v1", max_episode_steps=30)


@pytest.mark.parametrize("mode", list(MODES))
def test_pendulum_time_limits_bootstrap_from_the_true_final_observation(mode):
    log = {}
    # the last step of every time-limited episode: next_obs is its final observation, not the
    # next episode's reset one
    buf, ref, checked = _collect(mode, log, 10_000, num_envs=4, calls=5, T=20, make=_pendulum)
    assert checked > 100
    ids = [i for i in buf.get_episode_ids() if len(buf.get_episode_indices(i)) == 30]
    ends = buf.get_transitions([buf.locate(i, 29)[0] for i in ids], n_step=3)
    assert len(ids) >= 8 and ends["truncateds"].all() and not ends["terminateds"].any()
    for id_, next_obs in zip(ids, ends["next_obs"]):
        env, k = ref.where[id_]
        np.testing.assert_array_equal(next_obs, log[env][k]["obs"][30])
        assert not np.array_equal(next_obs, log[env][k + 1]["obs"][0])


def test_dtypes_a_sac_loop_gets_from_a_float64_env():
    log = {}
    buf, _, _ = _collect("next-step", log, 10_000, calls=2, utd=0)
    batch = buf.sample(16, n_step=3, gamma=0.99, device="cpu", include_extra_model_outputs=True)
    # the env's float64 observations are kept; the actor's float32 actions are what the env
    # got (not cast to the space's float64) and what the buffer keeps
    assert batch["obs"].dtype == batch["next_obs"].dtype == torch.float64
    assert batch["actions"].dtype == torch.float32 and batch["actions"].shape == (16, 2)
    assert log[0][0]["actions"][0].dtype == np.float32
    for key in ("rewards", "discounts", "weights", "action_logp"):
        assert batch[key].dtype == torch.float32 and batch[key].shape == (16,)
    assert batch["terminateds"].dtype == torch.bool and batch["terminateds"].shape == (16,)


def test_same_seed_same_batches_and_state_restores_the_draws():
    def filled():
        log = {}
        return _collect("next-step", log, 60, calls=4, utd=0)[0]

    a, b = filled(), filled()
    for _ in range(3):
        x, y = a.sample(64, n_step=3), b.sample(64, n_step=3)
        np.testing.assert_array_equal(x["indices"], y["indices"])
        np.testing.assert_array_equal(x["obs"], y["obs"])
    state = a.get_state()
    first = a.sample(64, n_step=(1, 4))
    a.set_state(state)
    again = a.sample(64, n_step=(1, 4))
    np.testing.assert_array_equal(first["indices"], again["indices"])
    np.testing.assert_array_equal(first["n_step"], again["n_step"])


_LOADER = """
import sys
import numpy as np
from episodes.replay import EpisodeReplayBuffer
buf = EpisodeReplayBuffer.load(sys.argv[1])
items = np.concatenate([buf.get_episode_indices(i) for i in buf.get_episode_ids()])
out = {}
for name, batch in [("fixed", buf.get_transitions(items, n_step=3, gamma=0.99)),
                    ("drawn", buf.sample(64, n_step=3, gamma=0.99))]:
    ids, batch["t"] = buf.episode_steps(batch["indices"])
    batch["ids"] = ids.astype(str)
    _, batch["t_end"], batch["done"] = buf.episode_bounds(batch["indices"])
    out.update({name + "_" + k: v for k, v in batch.items()})
np.savez(sys.argv[2], **out)
"""


def test_save_load_in_a_fresh_process_gives_the_logged_transitions(tmp_path):
    log = {}
    buf, ref, _ = _collect("same-step", log, 40, calls=6, utd=1)
    assert buf.get_num_episodes_evicted() > 0
    buf.save(tmp_path / "buf")
    out = tmp_path / "out.npz"
    code = textwrap.dedent(_LOADER)
    args = [str(tmp_path / "buf"), str(out)]
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    with np.load(out) as got:
        fixed = {k[6:]: got[k] for k in got.files if k.startswith("fixed_")}
        drawn = {k[6:]: got[k] for k in got.files if k.startswith("drawn_")}
    # item ids of a vector env's interleaved chunks are renumbered by load (docs/replay.md):
    # the loaded buffer names its steps itself
    assert ref.check(None, fixed, 3, 0.99) == len(buf) == len(fixed["obs"])
    assert ref.check(None, drawn, 3, 0.99) == 64


def test_a_warm_up_policy_with_other_extras_cannot_be_swapped_for_the_actor():
    # why the docs' recipe draws its warm-up actions inside the actor's policy
    from episodes.runner import RandomPolicy

    log = {}
    env = _env(2, AutoresetMode.NEXT_STEP, log)
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    warm = runner.sample(3)
    assert warm[0].get_actions().dtype == np.float64  # the space's dtype
    actor = SquashedGaussian(3, env.single_action_space.low, env.single_action_space.high)
    runner.policy = _policy(actor, 0, env.single_action_space, 0)
    stepped = sum(len(ep["actions"]) for ep in log[0])
    with pytest.raises(ValueError, match=r"extra outputs changed from \[\] to \['action_logp'"):
        runner.sample(3)
    assert sum(len(ep["actions"]) for ep in log[0]) == stepped  # refused before the env steps


@pytest.mark.parametrize(
    "first, later, stored",
    [("float32", "float64", np.float32), ("float64", "float32", np.float64)],
)
def test_the_first_chunk_decides_the_action_dtype_of_every_batch(first, later, stored):
    # a warm-up whose actions are float64 (a float64 space's samples) makes every batch's
    # actions float64, the actor's float32 ones included
    log = {}
    env = _env(2, AutoresetMode.NEXT_STEP, log)
    dtypes = itertools.chain([first] * 3, itertools.repeat(later))

    def policy(obs):
        return np.full((len(obs), 2), 0.5, next(dtypes)), {}

    runner = EnvRunner(env, policy, seed=0)
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(runner.sample(3))
    buf.add(runner.sample(3))
    assert (
        buf.sample(8, device="cpu")["actions"].dtype == torch.from_numpy(np.zeros(0, stored)).dtype
    )


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mode=st.sampled_from(list(MODES)),
    num_envs=st.integers(1, 5),
    T=st.integers(1, 9),
    calls=st.integers(1, 5),
    capacity=st.integers(5, 120),
    n_step=st.integers(1, 6),
    gamma=st.sampled_from([0.0, 0.5, 0.99, 1.0]),
    on_evicted=st.sampled_from(["restart", "drop"]),
)
def test_any_collection_samples_the_logged_transitions(
    mode, num_envs, T, calls, capacity, n_step, gamma, on_evicted
):
    log = {}
    env = _env(num_envs, MODES[mode], log)
    actor = SquashedGaussian(3, env.single_action_space.low, env.single_action_space.high)
    policy = _policy(actor, 2, env.single_action_space, 0)
    runner = EnvRunner(env, policy, seed=0)
    ref = Reference(log, policy.outputs)
    buf = EpisodeReplayBuffer(capacity, seed=0)
    for _ in range(calls):
        buf.add(ref.note(runner.sample(T)), on_evicted=on_evicted)
        batch = buf.sample(16, n_step=n_step, gamma=gamma, include_extra_model_outputs=True)
        assert ref.check(buf, batch, n_step, gamma) == 16
    items = np.concatenate([buf.get_episode_indices(i) for i in buf.get_episode_ids()])
    assert ref.check(buf, buf.get_transitions(items, n_step=n_step, gamma=gamma), n_step, gamma)
