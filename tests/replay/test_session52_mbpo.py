"""An MBPO / Dyna learner's journey: real steps from a vector env (terminations and time limits)
in an env buffer, short imagined rollouts of a fixed random linear model started from sampled
env transitions in a smaller model buffer (FIFO eviction), and mixed batches for SAC-like
updates. Every imagined transition the model buffer gives back is checked against a
plain-Python log of what the model produced, after evictions too."""

from __future__ import annotations

import itertools
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
import tree
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.runner import EnvRunner

OBS, ACT, LIMIT = 3, 1, 9


class _Drift(gym.Env[np.ndarray, np.ndarray]):
    """float32 Box steps that terminate when the first coordinate leaves [-2, 2]."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (OBS,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (ACT,), np.float32)
        self.x = np.zeros(OBS, np.float32)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.x = self.np_random.uniform(-1, 1, OBS).astype(np.float32)
        return self.x.copy(), {}

    def step(self, action: Any) -> Any:
        noise = self.np_random.normal(0, 0.3, OBS)
        self.x = (self.x + 0.5 * float(np.asarray(action).ravel()[0]) + noise).astype(np.float32)
        return self.x.copy(), float(-np.square(self.x).sum()), bool(abs(self.x[0]) > 2), False, {}


def _env_runner(num_envs: int = 3) -> EnvRunner:
    makers = [lambda: gym.wrappers.TimeLimit(_Drift(), LIMIT) for _ in range(num_envs)]
    env = gym.vector.SyncVectorEnv(makers)
    rng = np.random.default_rng(0)

    def policy(obs: Any) -> Any:
        return rng.uniform(-1, 1, (len(obs), ACT)).astype(np.float32), {}

    return EnvRunner(env, policy, seed=0)


class _Model:
    """A fixed random linear dynamics model: next obs, reward and a predicted termination."""

    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.w = rng.normal(0, 0.6, (OBS + ACT, OBS)).astype(np.float32)

    def __call__(self, obs: np.ndarray, act: np.ndarray) -> tuple[np.ndarray, ...]:
        nxt = np.tanh(np.concatenate([obs, act], -1) @ self.w).astype(np.float32) * 3
        return nxt, -np.square(nxt).sum(-1).astype(np.float32), np.abs(nxt[:, 0]) > 2.4


def _imagine(
    starts: np.ndarray, model: _Model, k: int, rng: np.random.Generator, ids: Any, log: dict
) -> list[SingleAgentEpisode]:
    """B rollouts of up to k steps in one batched loop; a rollout ends at its first predicted
    termination. One chunk per rollout, and one log entry per imagined transition."""
    b = len(starts)
    obs = np.empty((b, k + 1, OBS), np.float32)
    act = rng.uniform(-1, 1, (b, k, ACT)).astype(np.float32)
    rew = np.empty((b, k), np.float32)
    term = np.zeros((b, k), bool)
    obs[:, 0] = starts
    for t in range(k):  # every rollout steps; what follows a termination is cut off below
        obs[:, t + 1], rew[:, t], term[:, t] = model(obs[:, t], act[:, t])
    hit = term.any(1)
    length = np.where(hit, term.argmax(1) + 1, k)
    chunks = []
    for i in range(b):
        n, id_ = int(length[i]), next(ids)
        chunks.append(
            SingleAgentEpisode(
                id_,
                observations=list(obs[i, : n + 1]),
                actions=list(act[i, :n]),
                rewards=list(rew[i, :n]),
                terminated=bool(hit[i]),
                truncated=not hit[i],  # the horizon cut it: its last step bootstraps
                len_lookback_buffer=0,
            )
        )
        for t in range(n):
            last = t == n - 1
            done = last and bool(hit[i])
            log[id_, t] = (obs[i, t], act[i, t], rew[i, t], obs[i, t + 1], done, last and not done)
    return chunks


def _check_against_log(buf: EpisodeReplayBuffer, batch: dict[str, Any], log: dict) -> None:
    ids, ts = buf.episode_steps(batch["indices"])
    for row, key in enumerate(zip(ids.tolist(), ts.tolist())):
        o, a, r, o2, done, cut = log[key]
        assert np.array_equal(batch["obs"][row], o) and np.array_equal(batch["actions"][row], a)
        assert batch["rewards"][row] == r and np.array_equal(batch["next_obs"][row], o2)
        assert batch["terminateds"][row] == done and batch["truncateds"][row] == cut


def _check_fifo(buf: EpisodeReplayBuffer, added: list[Any], capacity: int) -> None:
    stored = buf.get_episode_ids()
    assert stored == added[len(added) - len(stored) :]  # the newest rollouts, oldest first
    assert buf.get_num_episodes_evicted() == len(added) - len(stored)
    assert buf.get_num_timesteps() <= capacity or len(stored) == 1


def test_mbpo_loop_matches_the_log_after_evictions() -> None:
    torch.manual_seed(0)
    rng = np.random.default_rng(1)
    runner, model = _env_runner(), _Model(2)
    env_buf = EpisodeReplayBuffer(2_000, seed=0)
    model_buf = EpisodeReplayBuffer(150, seed=1)  # a few iterations' worth: FIFO evicts
    ids, log, added = itertools.count(), {}, []
    critic = torch.nn.Sequential(torch.nn.Linear(OBS + ACT, 32), torch.nn.ReLU())
    critic.append(torch.nn.Linear(32, 1))
    opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
    ended_early = ran_full = 0
    for _ in range(6):
        env_buf.add(runner.sample(6))
        starts = env_buf.sample(24)["obs"]
        chunks = _imagine(starts, model, 4, rng, ids, log)
        ended_early += sum(c.is_terminated and len(c) < 4 for c in chunks)
        ran_full += sum(len(c) == 4 for c in chunks)
        model_buf.add(chunks)
        added += [c.id_ for c in chunks]
        _check_fifo(model_buf, added, 150)
        n_env = 2  # about 5% of 40 from the env
        real, fake = env_buf.sample(n_env), model_buf.sample(40 - n_env)
        _check_against_log(model_buf, fake, log)
        assert real.keys() == fake.keys()
        for key in real:
            assert real[key].dtype == fake[key].dtype, key
            assert real[key].shape[1:] == fake[key].shape[1:], key
        batch = {k: torch.as_tensor(np.concatenate([real[k], fake[k]])) for k in real}
        for _ in range(3):  # a critic's TD updates on the mixed batch
            with torch.no_grad():
                x2 = torch.cat([batch["next_obs"], torch.zeros(40, ACT)], -1)
                target = batch["rewards"] + 0.99 * ~batch["terminateds"] * critic(x2).squeeze(-1)
            q = critic(torch.cat([batch["obs"], batch["actions"]], -1)).squeeze(-1)
            loss = (q - target).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        assert q.shape == target.shape == (40,) and torch.isfinite(loss)
    assert model_buf.get_num_episodes_evicted() > 50 and ended_early and ran_full
    stored = np.concatenate([model_buf.get_episode_indices(i) for i in model_buf.get_episode_ids()])
    _check_against_log(model_buf, model_buf.get_transitions(stored), log)
    real_eps = env_buf.get_episodes()
    assert any(e.is_terminated for e in real_eps) and any(e.is_truncated for e in real_eps)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    k=st.integers(1, 5),
    b=st.integers(1, 12),
    capacity=st.integers(1, 60),
    iterations=st.integers(1, 5),
    seed=st.integers(0, 2**16),
)
def test_model_buffer_is_fifo_and_matches_the_log(
    k: int, b: int, capacity: int, iterations: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    model, buf = _Model(seed), EpisodeReplayBuffer(capacity, seed=seed)
    ids, log, added = (f"m{n}" for n in itertools.count()), {}, []
    for _ in range(iterations):
        chunks = _imagine(rng.uniform(-2, 2, (b, OBS)).astype(np.float32), model, k, rng, ids, log)
        buf.add(chunks)
        added += [c.id_ for c in chunks]
        _check_fifo(buf, added, capacity)
        _check_against_log(buf, buf.sample(16), log)
    stored = np.concatenate([buf.get_episode_indices(i) for i in buf.get_episode_ids()])
    _check_against_log(buf, buf.get_transitions(stored), log)


def test_reusing_rollout_ids_each_iteration_is_refused_unchanged() -> None:
    """Ids numbered 0..B-1 again each iteration continue the stored rollouts: the add is
    refused, says every episode needs an id of its own, and stores nothing."""
    rng, model, log = np.random.default_rng(0), _Model(0), {}
    buf = EpisodeReplayBuffer(1_000, seed=0)
    starts = rng.uniform(-1, 1, (4, OBS)).astype(np.float32)
    buf.add(_imagine(starts, model, 3, rng, iter(range(4)), log))
    before = buf.get_num_timesteps()
    with pytest.raises(ValueError, match="id of its own"):
        buf.add(_imagine(starts, model, 3, rng, iter(range(4)), log))
    assert buf.get_num_timesteps() == before and buf.get_episode_ids() == [0, 1, 2, 3]


def test_model_buffer_dtypes_follow_its_first_chunk() -> None:
    """A model returning float64 (numpy's default) makes float64 columns: concatenating with
    the env buffer's float32 batch then silently widens it. Cast the model's outputs."""
    env_buf, model_buf = EpisodeReplayBuffer(100, seed=0), EpisodeReplayBuffer(100, seed=0)
    env_buf.add(_env_runner(1).sample(4))
    obs = np.zeros((3, OBS))  # float64
    model_buf.add(
        SingleAgentEpisode(
            observations=list(obs),
            actions=list(np.zeros((2, ACT), np.float32)),
            rewards=[0.0, 0.0],
            len_lookback_buffer=0,
        )
    )
    real, fake = env_buf.sample(2), model_buf.sample(2)
    assert real["obs"].dtype == np.float32 and fake["obs"].dtype == np.float64
    assert np.concatenate([real["obs"], fake["obs"]]).dtype == np.float64


def test_locate_with_one_time_gives_a_one_item_array() -> None:
    """Kept (and documented) as episode_steps and items_at answer one index: always a 1-d
    int64 array, which get_transitions and update_priorities take as it is."""
    buf = EpisodeReplayBuffer(10, seed=0)
    buf.add(
        SingleAgentEpisode(
            "a",
            observations=[0.0, 1.0, 2.0],
            actions=[0, 1],
            rewards=[1.0, 1.0],
            len_lookback_buffer=0,
        )
    )
    for t in (1, np.int64(1)):
        got = buf.locate("a", t)
        assert got.shape == (1,) and got.dtype == np.int64 and got.tolist() == [1]
    assert buf.get_transitions(buf.locate("a", 1))["obs"].shape == (1,)
    assert buf.episode_steps(1)[1].shape == buf.items_at(0, 1).shape == (1,)


def _prioritized() -> PrioritizedEpisodeReplayBuffer:
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add(
        SingleAgentEpisode(
            "a",
            observations=list(np.arange(6, dtype=np.float32)),
            actions=[0] * 5,
            rewards=[0.0] * 5,
            len_lookback_buffer=0,
        )
    )
    return buf


@pytest.mark.parametrize(
    "convert",
    [
        pytest.param(lambda b: tree.map_structure(torch.as_tensor, b), id="dm-tree"),
        pytest.param(lambda b: {k: torch.as_tensor(v) for k, v in b.items()}, id="dict-comp"),
        pytest.param(dict, id="dict"),
    ],
)
def test_converted_batch_refusal_says_what_to_pass(convert: Any) -> None:
    """A batch rebuilt to hold torch tensors has lost its buffer's token: the refusal says so
    and names what works (the original batch, its indices, or no indices), and each works."""
    buf = _prioritized()
    batch = buf.sample(4)
    converted = convert(batch)
    with pytest.raises(ValueError) as error:
        buf.update_priorities(np.full(4, 2.0), converted)
    message = str(error.value)
    assert "original batch" in message and "map_structure" in message
    assert "batch['indices']" in message and "update_priorities(priorities)" in message
    assert "got a ReplayBatch that carries no source" not in message
    assert buf.get_priorities(batch["indices"]).tolist() == [1.0] * 4  # unchanged
    buf.update_priorities(np.full(4, 2.0), converted["indices"])  # torch indices are taken
    buf.update_priorities(np.full(4, 3.0), batch)
    assert buf.get_priorities(batch["indices"]).tolist() == [3.0] * 4
