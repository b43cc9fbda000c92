"""A Decision Transformer user's data path, checked against a log of the env's own steps.

K-step windows of (return-to-go, observation, action) with absolute timesteps and a pad mask,
from a dataset a runner recorded (CartPole, episodes cut by a time limit, recorded in pieces):
(a) a replay buffer's sequences with ``sequence_returns_to_go``, (b) ``SequenceDataset`` in a
DataLoader. Every cell is compared with the steps a wrapper inside each sub-env logged; the
window starts are uniform over steps (episodes drawn in proportion to their length); an
evaluation loop keeps a per-sub-env context with a target return the rewards decrement.
"""

from __future__ import annotations

import collections

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, read_episodes
from episodes.io.torch_data import SequenceDataset
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.replay.returns_to_go import sequence_returns_to_go
from episodes.runner import EnvRunner

from ._stats import chi_square_p

torch = pytest.importorskip("torch")

K = 20
GAMMA = 0.99


class _Log(gym.Wrapper):
    """Logs each sub-env's steps; rewards vary and are exact floats (quarters)."""

    def __init__(self, env, log, index):
        super().__init__(env)
        self.log, self.index, self.episode = log, index, -1

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.episode, self.t = self.episode + 1, 0
        self.log[(self.index, self.episode)] = {"obs": [obs.copy()], "actions": [], "rewards": []}
        return obs, info

    def step(self, action):
        obs, _, terminated, truncated, info = self.env.step(action)
        reward = float(action) + 0.25 * (self.t % 4)
        steps = self.log[(self.index, self.episode)]
        steps["obs"].append(obs.copy())
        steps["actions"].append(int(action))
        steps["rewards"].append(reward)
        self.t += 1
        return obs, reward, terminated, truncated, info


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A dataset of 4 sub-envs x 320 steps in 16-step pieces, and the log of its steps."""
    log: dict = {}

    def make(i):
        return lambda: _Log(gym.make("CartPole-v1", max_episode_steps=30), log, i)

    # Same-step autoreset: no step is carried over to a call that never comes.
    env = gym.vector.SyncVectorEnv(
        [make(i) for i in range(4)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    rng = np.random.default_rng(0)
    runner = EnvRunner(env, lambda obs: (rng.integers(0, 2, len(obs)), {}), seed=0)
    path = tmp_path_factory.mktemp("dt") / "data"
    with DatasetWriter(path) as writer:
        for _ in range(20):
            for chunk in runner.sample(16):
                writer.write(chunk)
    env.close()
    where = {}  # an observation (unique floats) -> (log key, t)
    for key, steps in log.items():
        for name in ("obs", "actions", "rewards"):
            steps[name] = np.asarray(steps[name])
        for t in range(len(steps["actions"])):
            where[steps["obs"][t].tobytes()] = (key, t)
    return path, log, where


def _rtg(steps, t, gamma):
    rewards = steps["rewards"][t:]
    return float(np.sum(rewards * gamma ** np.arange(len(rewards))))


def _check(log, where, obs, actions, rewards, mask, rtg, timesteps, *, gamma, next_obs=False):
    """Every cell of ``[B, K]`` windows against the log (``next_obs``: obs holds K + 1)."""
    for b in range(len(mask)):
        key, t0 = where[obs[b, 0].tobytes()]
        steps = log[key]
        real = min(len(steps["actions"]) - t0, K)
        assert mask[b].tolist() == [True] * real + [False] * (K - real)
        for j in range(K):
            if j < real:
                t = t0 + j
                assert np.array_equal(obs[b, j], steps["obs"][t])
                assert (actions[b, j], rewards[b, j]) == (steps["actions"][t], steps["rewards"][t])
                assert timesteps[b, j] == t
                if gamma == 1.0:  # quarters: every sum is exact
                    assert rtg[b, j] == _rtg(steps, t, 1.0)
                else:
                    assert rtg[b, j] == pytest.approx(_rtg(steps, t, gamma), rel=1e-12)
            else:
                assert (actions[b, j], rewards[b, j], rtg[b, j]) == (0, 0, 0)
                # SequenceDataset's obs hold the real steps' next observation first
                assert next_obs and j == real or not obs[b, j].any()


@pytest.mark.parametrize("gamma", [1.0, GAMMA], ids=["undiscounted", "discounted"])
@pytest.mark.parametrize("pad", [True, False], ids=["pad", "no-pad"])
@pytest.mark.parametrize("lookback", [0, 3], ids=["no-lookback", "lookback"])
def test_buffer_windows_match_the_env_log(recorded, gamma, pad, lookback):
    path, log, where = recorded
    buf = EpisodeReplayBuffer.from_dataset(path, seed=0)
    batch = buf.sample(256, batch_length_T=K, pad=pad, lookback=lookback)
    rtg, timesteps = sequence_returns_to_go(buf, batch, gamma=gamma)
    cut = {k: v[:, lookback:] for k, v in batch.items()}
    _check(
        log,
        where,
        cut["obs"],
        cut["actions"],
        cut["rewards"],
        cut["mask"],
        rtg[:, lookback:],
        timesteps[:, lookback:],
        gamma=gamma,
    )
    for b, j in zip(*np.nonzero(batch["is_lookback"])):  # the steps before, or padding
        if batch["mask"][b, j]:
            key, t0 = where[batch["obs"][b, lookback].tobytes()]
            t = t0 - lookback + j
            assert timesteps[b, j] == t
            assert rtg[b, j] == pytest.approx(_rtg(log[key], t, gamma), rel=1e-12)
        else:
            assert (timesteps[b, j], rtg[b, j]) == (0, 0.0)


def test_buffer_recipe_of_the_docs_agrees_in_float32(recorded):
    """The plain recipe (an n-step return per cell) gives the same values, in float32."""
    path, _, _ = recorded
    buf = EpisodeReplayBuffer.from_dataset(path, seed=1)
    batch = buf.sample(64, batch_length_T=K, pad=True)
    rtg, timesteps = sequence_returns_to_go(buf, batch)
    valid = batch["indices"] >= 0
    plain = buf.get_transitions(batch["indices"][valid], n_step=10**9, gamma=1.0)["rewards"]
    assert (plain == rtg[valid]).all() and plain.dtype == np.float32
    assert (buf.episode_steps(batch["indices"][valid])[1] == timesteps[valid]).all()


def test_sequence_dataset_windows_match_the_env_log(recorded):
    """SequenceDataset(pad=True): timesteps from episode_steps, returns-to-go from a table."""
    path, log, where = recorded
    data = SequenceDataset(path, length=K, pad=True)

    class WithIndex(torch.utils.data.Dataset):
        def __len__(self):
            return len(data)

        def __getitem__(self, index):
            return index, data[index]

    # each episode's returns-to-go, its pieces joined by their t_started
    pieces = collections.defaultdict(dict)
    for piece in read_episodes(path, numpy=True):
        pieces[piece.id_][piece.t_started] = np.asarray(piece.get_rewards(), np.float64)
    table = {}
    for id_, parts in pieces.items():
        rewards = np.concatenate([parts[t] for t in sorted(parts)])
        table[id_] = (min(parts), np.cumsum(rewards[::-1])[::-1])

    loader = torch.utils.data.DataLoader(
        WithIndex(), batch_size=128, shuffle=True, generator=torch.Generator().manual_seed(0)
    )
    seen = 0
    for index, batch in loader:
        ids, t0 = data.episode_steps(index)
        timesteps = t0[:, None] + np.arange(K)
        mask = batch["mask"].numpy()
        rtg = np.zeros(mask.shape)
        for b, (id_, t) in enumerate(zip(ids, t0)):
            first, to_go = table[id_]
            rtg[b, : mask[b].sum()] = to_go[t - first : t - first + mask[b].sum()]
        _check(
            log,
            where,
            batch["obs"][:, :-1].numpy(),
            batch["actions"].numpy(),
            batch["rewards"].numpy(),
            mask,
            rtg,
            timesteps,
            gamma=1.0,
            next_obs=True,
        )
        seen += len(index)
    assert seen == sum(len(s["actions"]) for s in log.values())


def test_padded_window_starts_are_uniform_over_steps(recorded):
    """pad=True: every stored step starts a window alike (episodes by their length)."""
    path, log, _ = recorded
    buf = EpisodeReplayBuffer.from_dataset(path, seed=3)
    draws = 100_000
    ids, t = buf.episode_steps(buf.sample(draws, batch_length_T=K, pad=True)["indices"][:, 0])
    counts = collections.Counter(zip(ids.tolist(), t.tolist()))
    steps = sum(len(s["actions"]) for s in log.values())
    assert len(counts) <= steps
    observed = np.array(list(counts.values()) + [0] * (steps - len(counts)))
    assert chi_square_p(observed, np.full(steps, draws / steps)) > 1e-4


class _RewardInObs(gym.Wrapper):
    """Hands the policy the reward that led to each observation (0 after a reset)."""

    def __init__(self, env):
        super().__init__(env)
        self.observation_space = gym.spaces.Dict(
            {
                "obs": env.observation_space,
                "reward": gym.spaces.Box(-np.inf, np.inf, (), np.float32),
            }
        )

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return {"obs": obs, "reward": np.float32(0.0)}, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return {"obs": obs, "reward": np.float32(reward)}, reward, terminated, truncated, info


def test_evaluation_context_decrements_the_target_and_resets_per_episode():
    target, context = 50.0, 4

    class DTContext:  # the state: each sub-env's last K returns-to-go and observations
        def initial_state(self, n):
            return {
                "rtg": np.zeros((n, context), np.float32),
                "obs": np.zeros((n, context, 4), np.float32),
                "t": np.zeros(n, np.int64),
            }

        def __call__(self, obs, state):
            t = state["t"]
            rtg = np.where(t == 0, target, state["rtg"][:, -1] - obs["reward"]).astype(np.float32)
            new = {
                "rtg": np.concatenate([state["rtg"][:, 1:], rtg[:, None]], 1),
                "obs": np.concatenate([state["obs"][:, 1:], obs["obs"][:, None]], 1),
                "t": t + 1,
            }
            actions = (new["obs"][:, -1, 2] > 0).astype(np.int64)  # the model would read new
            return actions, {"rtg": rtg, "timestep": t, "first_obs": new["obs"][:, 0]}, new

    env = gym.vector.SyncVectorEnv(
        [lambda: _RewardInObs(gym.make("CartPole-v1", max_episode_steps=40))] * 3
    )
    runner = EnvRunner(env, DTContext(), seed=0)
    chunks = [*runner.sample(60), *runner.sample(60)]
    whole = {}
    for chunk in chunks:  # join each episode's chunks
        parts = whole.setdefault(chunk.id_, [])
        parts.append(chunk)
    for parts in whole.values():
        rewards = np.concatenate([p.get_rewards() for p in parts])
        rtg = np.concatenate([p.get_extra_model_outputs("rtg") for p in parts])
        t = np.concatenate([p.get_extra_model_outputs("timestep") for p in parts])
        first = np.concatenate([p.get_extra_model_outputs("first_obs") for p in parts])
        t0 = parts[0].t_started
        assert (t == np.arange(t0, t0 + len(t))).all()
        if t0 == 0:
            assert (rtg == target - np.concatenate([[0.0], np.cumsum(rewards)[:-1]])).all()
            # no context leaks from the sub-env's previous episode
            assert not first[: context - 1].any()
    env.close()


# --------------------------------------------------------------- sequence_returns_to_go
def _episode(id_, rewards, *, t_started=0, terminated=False):
    n = len(rewards)
    return SingleAgentEpisode(
        id_,
        observations=[np.float32([t_started + t]) for t in range(n + 1)],
        actions=[0] * n,
        rewards=list(rewards),
        t_started=t_started,
        terminated=terminated,
        len_lookback_buffer=0,
    )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lengths=st.lists(st.integers(1, 12), min_size=1, max_size=4),
    cuts=st.integers(1, 5),
    gamma=st.sampled_from([1.0, 0.9, 0.0]),
    window=st.integers(1, 6),
    lookback=st.integers(0, 2),
    pad=st.booleans(),
    prioritized=st.booleans(),
)
def test_returns_to_go_match_a_reference(lengths, cuts, gamma, window, lookback, pad, prioritized):
    """Chunks interleaved (walked links) or whole (adjacent slots): the same returns-to-go."""
    rng = np.random.default_rng(len(lengths) * 7 + cuts)
    rewards = {f"e{i}": rng.integers(-4, 5, n) / 4 for i, n in enumerate(lengths)}
    make = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    buf = make(1000, seed=0)
    for start in range(0, max(lengths), cuts):  # round robin: the chunks interleave
        buf.add(
            [
                _episode(
                    id_,
                    r[start : start + cuts],
                    t_started=5 + start,
                    terminated=start + cuts >= len(r),
                )
                for id_, r in rewards.items()
                if start < len(r)
            ]
        )
    if not pad and max(lengths) < window:
        return
    batch = buf.sample(32, batch_length_T=window, lookback=lookback, pad=pad)
    rtg, timesteps = sequence_returns_to_go(buf, batch, gamma=gamma)
    assert rtg.shape == timesteps.shape == batch["indices"].shape
    assert rtg.dtype == np.float64 and timesteps.dtype == np.int64
    valid = batch["indices"] >= 0
    assert not rtg[~valid].any() and not timesteps[~valid].any()
    ids, t = buf.episode_steps(batch["indices"][valid])
    assert (timesteps[valid] == t).all() and (batch["obs"][valid][:, 0] == t).all()
    for id_, step, value in zip(ids, t, rtg[valid]):
        rest = rewards[id_][step - 5 :]
        assert value == pytest.approx(np.sum(rest * gamma ** np.arange(len(rest))), abs=1e-12)


def test_returns_to_go_of_a_torch_batch():
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("a", [1.0, 2.0, 4.0], terminated=True))
    batch = buf.sample(16, batch_length_T=2, pad=True, device="cpu")
    rtg, timesteps = sequence_returns_to_go(buf, batch)
    expected = {0: [7.0, 6.0], 1: [6.0, 4.0], 2: [4.0, 0.0]}
    assert all(rtg[b].tolist() == expected[int(timesteps[b, 0])] for b in range(16))


def test_returns_to_go_of_a_running_episode_reach_its_newest_step():
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("a", [1.0, 1.0]))
    batch = buf.sample(1, batch_length_T=2)
    assert sequence_returns_to_go(buf, batch)[0].tolist() == [[2.0, 1.0]]
    buf.add(_episode("a", [1.0, 1.0], t_started=2))  # its next chunk
    assert sequence_returns_to_go(buf, batch)[0].tolist() == [[4.0, 3.0]]


@pytest.mark.parametrize(
    ("sample", "gamma", "error", "match"),
    [
        pytest.param({}, 1.0, ValueError, r"shape \(4,\), not \[B, K\]", id="transitions"),
        pytest.param({"batch_length_T": 2}, 1.5, ValueError, "gamma", id="gamma"),
        pytest.param(None, 1.0, ValueError, "'indices' and 'rewards'", id="no-batch"),
    ],
)
def test_returns_to_go_refusals(sample, gamma, error, match):
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("a", [1.0, 1.0, 1.0], terminated=True))
    batch = {"obs": np.zeros((4, 2))} if sample is None else buf.sample(4, **sample)
    with pytest.raises(error, match=match):
        sequence_returns_to_go(buf, batch, gamma=gamma)


def test_returns_to_go_of_evicted_items_is_a_key_error():
    buf = EpisodeReplayBuffer(4, seed=0)
    buf.add(_episode("a", [1.0, 1.0, 1.0], terminated=True))
    batch = buf.sample(2, batch_length_T=2)
    buf.add(_episode("b", [1.0, 1.0, 1.0], terminated=True))  # evicts "a"
    with pytest.raises(KeyError):
        sequence_returns_to_go(buf, batch)
