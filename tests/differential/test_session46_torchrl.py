"""Differential tests against TorchRL 0.14.1 (docs/replay.md, "Coming from TorchRL").

The same episodes go through TorchRL and through us and are compared item by item:
``MultiStep`` against ``get_transitions(n_step=...)``, ``SliceSampler(strict_length=True)``
against ``sample(B, batch_length_T=T)`` (the set of slices, and how starts are drawn),
``generalized_advantage_estimate`` against ``episodes_to_rollout`` +
``RolloutStorage.compute_returns``, and a ``Collector`` over ``GymWrapper`` against
``EnvRunner`` on one small deterministic numpy env. Where the two differ on purpose (the
n-step flags), both sides' answers are asserted, so a test fails the day TorchRL changes.

TorchRL and tensordict are installed in the reference venv only (scripts/make_ref_venv.sh);
elsewhere this module is skipped:

    .venv-ref/bin/python -m pytest -q tests/differential/test_session46_torchrl.py
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():  # TorchRL's import-time deprecation warnings, here only
    warnings.simplefilter("ignore")
    pytest.importorskip("tensordict")
    pytest.importorskip("torchrl")
    from tensordict import TensorDict
    from tensordict.nn import TensorDictModule
    from torchrl import collectors
    from torchrl.data import LazyTensorStorage, ReplayBuffer
    from torchrl.data.postprocs import MultiStep
    from torchrl.data.replay_buffers.samplers import SliceSampler
    from torchrl.envs import GymWrapper
    from torchrl.objectives.value.functional import generalized_advantage_estimate

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.converter import episodes_to_rollout  # noqa: E402
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer  # noqa: E402
from episodes.runner import EnvRunner  # noqa: E402
from tests.differential._torchrl_trees import patch_trees  # noqa: E402

pytestmark = pytest.mark.filterwarnings(
    "ignore::DeprecationWarning", "ignore::FutureWarning", "ignore::UserWarning"
)

TERM, TRUNC, RUN = "terminated", "truncated", "running"

# Env streams: each env's episodes, end to end, as (length, how it ends); only an env's last
# episode may still be running (TorchRL splits a stream at its done flags alone).
STREAMS: dict[str, list[list[tuple[int, str]]]] = {
    "terminated shorter than n": [[(2, TERM), (5, TRUNC), (3, RUN)]],
    "one-step episodes": [[(1, TERM), (1, TRUNC), (1, TERM), (4, RUN)]],
    "truncated shorter than n": [[(2, TRUNC), (6, TERM)], [(3, TRUNC), (1, TRUNC), (4, RUN)]],
    "long episodes": [[(9, TERM), (7, TRUNC)], [(12, RUN)]],
    "running only": [[(5, RUN)], [(1, RUN)]],
}


def _random_streams(seed: int, num_envs: int = 3) -> list[list[tuple[int, str]]]:
    rng = np.random.default_rng(seed)
    return [
        [(int(n), str(e)) for n, e in zip(rng.integers(1, 8, 6), rng.choice([TERM, TRUNC], 6))]
        + [(int(rng.integers(1, 6)), RUN)]
        for _ in range(num_envs)
    ]


STREAMS["seeded random"] = _random_streams(46)


def _episodes(streams: Sequence[Sequence[tuple[int, str]]], seed: int = 0) -> list[list[dict]]:
    """Per env, per episode: observations (a unique tag in column 0), actions, rewards, flags."""
    rng = np.random.default_rng(seed)
    out = []
    for env, stream in enumerate(streams):
        eps = []
        for k, (n, end) in enumerate(stream):
            tag = 1000.0 * env + 100.0 * k + np.arange(n + 1)
            obs = np.stack([tag, rng.normal(size=n + 1)], axis=1).astype(np.float32)
            eps.append(
                dict(
                    id_=f"e{env}-{k}",
                    obs=obs,
                    actions=rng.integers(0, 3, n),
                    rewards=rng.normal(size=n).astype(np.float32),
                    end=end,
                )
            )
        out.append(eps)
    return out


def _ours(ep: dict, t_started: int = 0, **extra: list) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        ep["id_"],
        observations=list(ep["obs"]),
        actions=list(ep["actions"]),
        rewards=list(ep["rewards"]),
        terminated=ep["end"] == TERM,
        truncated=ep["end"] == TRUNC,
        extra_model_outputs=extra or None,
        t_started=t_started,
        len_lookback_buffer=0,
    )


def _stream_td(eps: list[dict]) -> TensorDict:
    """One env's episodes as a collector lays them out: ``[T]``, flags and rewards ``[T, 1]``."""

    def flags(end: str) -> np.ndarray:
        return np.concatenate(
            [np.r_[np.zeros(len(e["actions"]) - 1, bool), e["end"] == end] for e in eps]
        )

    term, trunc = flags(TERM), flags(TRUNC)
    col = lambda a: torch.as_tensor(np.asarray(a)).unsqueeze(-1)  # noqa: E731
    return TensorDict(
        {
            "observation": torch.as_tensor(np.concatenate([e["obs"][:-1] for e in eps])),
            "action": torch.as_tensor(np.concatenate([e["actions"] for e in eps])),
            "traj": torch.as_tensor(
                np.concatenate([np.full(len(e["actions"]), i) for i, e in enumerate(eps)])
            ),
            ("next", "observation"): torch.as_tensor(np.concatenate([e["obs"][1:] for e in eps])),
            ("next", "reward"): col(np.concatenate([e["rewards"] for e in eps])),
            ("next", "terminated"): col(term),
            ("next", "truncated"): col(trunc),
            ("next", "done"): col(term | trunc),
        },
        batch_size=[len(term)],
    )


def _window_any(flag: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """For each step t: whether ``flag`` is set at any of the steps t .. t + steps[t] - 1."""
    return np.array([flag[t : t + s].any() for t, s in enumerate(steps)])


# ------------------------------------------------------------------------------- n-step


def _check_multistep(streams: Sequence[Sequence[tuple[int, str]]], n: int, gamma: float) -> None:
    episodes = _episodes(streams)
    buf = EpisodeReplayBuffer(10_000, seed=0)
    for eps in episodes:
        buf.add([_ours(e) for e in eps])
    for eps in episodes:
        td = _stream_td(eps)
        theirs = MultiStep(gamma=gamma, n_steps=n)(td.clone())
        idx = np.concatenate([buf.locate(e["id_"], range(len(e["actions"]))) for e in eps])
        ours = buf.get_transitions(idx, n_step=n, gamma=gamma)
        steps = theirs["steps_to_next_obs"].numpy()

        np.testing.assert_array_equal(ours["obs"], theirs["observation"].numpy())
        np.testing.assert_array_equal(ours["next_obs"], theirs["next", "observation"].numpy())
        np.testing.assert_allclose(
            ours["rewards"], theirs["next", "reward"].numpy()[:, 0], rtol=1e-5, atol=1e-6
        )
        np.testing.assert_array_equal(ours["n_step"], steps)
        np.testing.assert_allclose(ours["discounts"], theirs["gamma"].numpy(), rtol=1e-6)
        # Shapes: TorchRL's rewards and flags keep a trailing 1; its discount (and horizon)
        # is [B], as ours.
        assert theirs["next", "reward"].shape == (len(idx), 1)
        assert theirs["gamma"].shape == theirs["steps_to_next_obs"].shape == (len(idx),)
        assert ours["rewards"].shape == ours["discounts"].shape == (len(idx),)

        # The documented difference: MultiStep keeps each step's own flags (it excludes the
        # done keys from the shift); ours flag every window that reaches the episode's end,
        # terminated and truncated alike.
        for key, ours_key in (("terminated", "terminateds"), ("truncated", "truncateds")):
            own = td["next", key].numpy()[:, 0]
            np.testing.assert_array_equal(theirs["next", key].numpy()[:, 0], own)
            np.testing.assert_array_equal(ours[ours_key], _window_any(own, steps))
        np.testing.assert_array_equal(theirs["next", "done"].numpy(), td["next", "done"].numpy())


@pytest.mark.parametrize("n", [1, 2, 3, 5])
@pytest.mark.parametrize("name", list(STREAMS))
def test_multistep_matches_n_step_but_for_the_end_flags(name, n):
    _check_multistep(STREAMS[name], n, gamma=0.9)


_ENDED = st.tuples(st.integers(1, 6), st.sampled_from([TERM, TRUNC]))
_STREAM = st.builds(
    lambda ended, last: ended + last,
    st.lists(_ENDED, max_size=4),
    st.lists(st.tuples(st.integers(1, 6), st.just(RUN)), max_size=1),
).filter(bool)


@settings(max_examples=30, deadline=None)
@given(streams=st.lists(_STREAM, min_size=1, max_size=3), n=st.integers(1, 7))
def test_multistep_matches_n_step_on_random_streams(streams, n):
    _check_multistep(streams, n, gamma=0.7)


def test_multistep_flag_difference_on_a_named_episode():
    """Episode of 4 steps terminated, n=3: TorchRL flags step 3, ours steps 1, 2 and 3."""
    (eps,) = _episodes([[(4, TERM)]])
    td = _stream_td(eps)
    theirs = MultiStep(gamma=0.5, n_steps=3)(td.clone())
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_ours(eps[0]))
    ours = buf.get_transitions(buf.locate("e0-0", range(4)), n_step=3, gamma=0.5)
    assert theirs["next", "terminated"].numpy()[:, 0].tolist() == [False, False, False, True]
    assert ours["terminateds"].tolist() == [False, True, True, True]
    assert theirs["steps_to_next_obs"].tolist() == ours["n_step"].tolist() == [3, 3, 2, 1]
    # Both take the terminal observation as next_obs of steps 1..3: a target bootstrapping
    # on (1 - ("next", "terminated")) would read V(terminal) there.
    np.testing.assert_array_equal(ours["next_obs"][1:], eps[0]["obs"][[4, 4, 4]])
    np.testing.assert_array_equal(theirs["next", "observation"].numpy(), ours["next_obs"])


def test_sampled_n_step_rows_are_the_multistep_rows():
    """``sample(n_step=n)`` draws rows whose content is MultiStep's row of the same step."""
    episodes = _episodes(STREAMS["seeded random"])
    buf = EpisodeReplayBuffer(10_000, seed=3)
    theirs = {}
    for eps in episodes:
        buf.add([_ours(e) for e in eps])
        td = MultiStep(gamma=0.8, n_steps=3)(_stream_td(eps))
        idx = np.concatenate([buf.locate(e["id_"], range(len(e["actions"]))) for e in eps])
        theirs.update({int(i): td[j] for j, i in enumerate(idx)})
    batch = buf.sample(200, n_step=3, gamma=0.8)
    for j, i in enumerate(batch["indices"].tolist()):
        row = theirs[i]
        np.testing.assert_array_equal(batch["next_obs"][j], row["next", "observation"].numpy())
        assert batch["n_step"][j] == row["steps_to_next_obs"].item()
        np.testing.assert_allclose(batch["rewards"][j], row["next", "reward"].item(), rtol=1e-5)


# ------------------------------------------------------------------------------- slices


def _torchrl_slices(td: TensorDict, length: int, draws: int, seed: int = 0) -> TensorDict:
    sampler = SliceSampler(
        slice_len=length,
        traj_key="traj",
        strict_length=True,
        truncated_key=None,
    )
    rb = ReplayBuffer(
        storage=LazyTensorStorage(len(td)), sampler=sampler, batch_size=length * draws
    )
    rb.extend(td)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return rb.sample().reshape(-1, length)


def _flat(episodes: list[list[dict]]) -> TensorDict:
    """All envs' episodes in one storage, trajectory ids unique across envs."""
    tds = [_stream_td(eps) for eps in episodes]
    offset = 0
    for td in tds:
        td["traj"] = td["traj"] + offset
        offset = int(td["traj"].max()) + 1
    return torch.cat(tds)


@pytest.mark.parametrize("length", [1, 3, 6])
@pytest.mark.parametrize("name", ["seeded random", "long episodes", "truncated shorter than n"])
def test_slice_sets_are_strict_length_slices(name, length):
    episodes = _episodes(STREAMS[name])
    expected = {
        tuple(e["obs"][t : t + length, 0].tolist())
        for eps in episodes
        for e in eps
        for t in range(len(e["actions"]) - length + 1)
    }
    theirs = _torchrl_slices(_flat(episodes), length, draws=1500)
    buf = EpisodeReplayBuffer(10_000, seed=0)
    for eps in episodes:
        buf.add([_ours(e) for e in eps])
    ours = buf.sample(1500, batch_length_T=length)
    assert {tuple(r) for r in theirs["observation"][..., 0].tolist()} == expected
    assert {tuple(r) for r in ours["obs"][..., 0].tolist()} == expected
    # Row by row, the steps of a slice agree: next observations, rewards, terminations.
    by_start = {tuple(r): j for j, r in enumerate(theirs["observation"][..., 0].tolist())}
    rows = [by_start[tuple(r)] for r in ours["obs"][..., 0].tolist()]
    np.testing.assert_array_equal(ours["next_obs"], theirs["next", "observation"].numpy()[rows])
    np.testing.assert_array_equal(ours["rewards"], theirs["next", "reward"].numpy()[rows, :, 0])
    np.testing.assert_array_equal(
        ours["is_terminated"], theirs["next", "terminated"].numpy()[rows, :, 0]
    )


def test_slice_start_distribution_differs_as_documented():
    """30- and 6-step episodes, T=6: the short one starts 1/26 of ours, ~1/2 of TorchRL's."""
    episodes = _episodes([[(30, TERM), (6, TERM)]])
    theirs = _torchrl_slices(_flat(episodes), 6, draws=2000)
    short_theirs = (theirs["traj"][:, 0] == 1).float().mean().item()
    buf = EpisodeReplayBuffer(1_000, seed=0)
    buf.add([_ours(e) for e in episodes[0]])
    short_ours = (buf.sample(2000, batch_length_T=6)["obs"][:, 0, 0] >= 100).mean()
    assert abs(short_theirs - 0.5) < 0.05  # 1 sd: 0.011
    assert abs(short_ours - 1 / 26) < 0.02  # 1 sd: 0.0042


def test_pad_starts_anywhere_strict_length_false_only_shortens_short_episodes():
    """``pad=True`` vs ``SliceSampler(strict_length=False)``, T=4, episodes of 10, 3 and 5.

    Ours: every step starts a row, cut at the episode's end (``mask``). TorchRL's: an episode
    of T steps or more gives full slices only (the strict ones); a shorter one gives itself
    whole, from its first step.
    """
    length = 4
    episodes = _episodes([[(10, TERM), (3, TRUNC), (5, RUN)]])
    rb = ReplayBuffer(
        storage=LazyTensorStorage(18),
        sampler=SliceSampler(
            num_slices=1, traj_key="traj", strict_length=False, truncated_key=None
        ),
        batch_size=length,
    )
    rb.extend(_flat(episodes))
    with torch.random.fork_rng():
        torch.manual_seed(0)
        theirs = {tuple(rb.sample()["observation"][:, 0].tolist()) for _ in range(300)}
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add([_ours(e) for e in episodes[0]])
    batch = buf.sample(600, batch_length_T=length, pad=True)
    ours = {tuple(row[m, 0].tolist()) for row, m in zip(batch["obs"], batch["mask"])}

    tags = [e["obs"][:-1, 0].tolist() for e in episodes[0]]
    assert ours == {tuple(tag[t : t + length]) for tag in tags for t in range(len(tag))}
    assert theirs == {
        tuple(tag[t : t + length]) for tag in tags for t in range(max(len(tag) - length, 0) + 1)
    }
    tail = (8.0, 9.0)  # the last two steps of the 10-step episode
    assert tail in ours and tail not in theirs


# ------------------------------------------------------------------------------- GAE


@pytest.mark.parametrize("lam", [0.0, 0.75, 1.0])
def test_gae_matches_compute_returns(lam):
    # TorchRL multiplies gamma and lambda into float32 tensors (``gamma * not_terminated``
    # of an int tensor): float32-exact values keep the comparison at float64 precision.
    gamma = 0.875
    weights = np.array([0.3, -1.0])
    value = lambda o: np.asarray(o, np.float64) @ weights  # noqa: E731
    # Every env holds 16 steps: terminations, truncations, a running end; env 1 starts with
    # the continuation of an episode begun before this rollout.
    streams = [
        [(3, TRUNC), (5, TERM), (1, TERM), (7, RUN)],
        [(4, TERM), (2, TRUNC), (2, TRUNC), (8, RUN)],
        [(16, RUN)],
        [(6, TRUNC), (10, TERM)],
    ]
    episodes = _episodes(streams, seed=7)
    chunks = [
        [
            _ours(
                e,
                t_started=5 if (env, k) == (1, 0) else 0,
                vf_preds=list(value(e["obs"][:-1])),
                action_logp=[0.0] * len(e["actions"]),
            )
            for k, e in enumerate(eps)
        ]
        for env, eps in enumerate(episodes)
    ]
    rollout = episodes_to_rollout(chunks, gamma=gamma, value_fn=value, dtype=torch.float64)
    storage = rollout.storage
    storage.compute_returns(rollout.last_values, gamma, lam, normalize_advantage=False)

    tds = [_stream_td(eps) for eps in episodes]
    td = torch.stack(tds)  # [N, T]
    state_value = torch.as_tensor(value(td["observation"].numpy())).unsqueeze(-1)
    next_value = torch.as_tensor(value(td["next", "observation"].numpy())).unsqueeze(-1)
    adv, target = generalized_advantage_estimate(
        gamma,
        lam,
        state_value,
        next_value,
        td["next", "reward"].double(),
        td["next", "done"],
        td["next", "terminated"],
    )
    np.testing.assert_allclose(
        storage.advantages[..., 0].T.numpy(), adv[..., 0].numpy(), rtol=1e-12
    )
    np.testing.assert_allclose(
        storage.returns[..., 0].T.numpy(), target[..., 0].numpy(), rtol=1e-12
    )


# ------------------------------------------------------------------------------- collection


class _Clocked(gym.Env):
    """A numpy env whose state is a clock that resets never: extra resets change nothing.

    obs = [env tag, step in episode, clock]; the reward depends on the clock and the action;
    it terminates when the clock hits a multiple of 7 (TimeLimit truncates after 4 steps).
    """

    observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, tag: int):
        self.tag = tag
        self.rewind()

    def rewind(self) -> None:
        self.clock, self.t = 3 * self.tag, 0

    def _obs(self) -> np.ndarray:
        return np.array([self.tag, self.t, self.clock], np.float32)

    def reset(self, *, seed: Any = None, options: Any = None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        self.clock += 1
        reward = 0.1 * self.clock + float(action)
        return self._obs(), reward, self.clock % 7 == 0, False, {}


def _vec(num_envs: int) -> gym.vector.SyncVectorEnv:
    return gym.vector.SyncVectorEnv(
        [lambda i=i: gym.wrappers.TimeLimit(_Clocked(i), 4) for i in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )


def _act(obs: np.ndarray) -> np.ndarray:
    obs = np.asarray(obs)
    return ((obs[:, 2] + obs[:, 0]) % 2).astype(np.int64)


class _Policy(torch.nn.Module):
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(_act(obs.numpy()))


def test_collector_and_env_runner_record_the_same_steps():
    num_envs, steps = 3, 12
    policy = TensorDictModule(_Policy(), in_keys=["observation"], out_keys=["action"])
    collector_cls = getattr(collectors, "Collector", None) or collectors.SyncDataCollector
    vec = _vec(num_envs)
    collector = collector_cls(
        GymWrapper(vec, categorical_action_encoding=True),
        policy,
        frames_per_batch=num_envs * steps,
        total_frames=2 * num_envs * steps,
        split_trajs=False,
        auto_register_policy_transforms=False,
    )
    # GymWrapper stepped the env to find its specs: rewind the clocks, then start afresh.
    for sub in vec.envs:
        sub.unwrapped.rewind()
    collector.reset()
    td = torch.cat([batch.clone() for batch in collector], dim=-1)  # [N, 2 * steps]
    collector.shutdown()
    assert td["next", "reward"].shape == (num_envs, 2 * steps, 1)

    runner = EnvRunner(_vec(num_envs), lambda obs: (_act(obs), None), seed=0)
    per_env: dict[int, list] = {i: [] for i in range(num_envs)}
    for _ in range(2):
        for chunk in runner.sample(steps):
            per_env[chunk.custom_data["env_index"]].append(chunk)

    seen_trunc = seen_term = 0
    for i, chunks in per_env.items():
        t = td[i]
        obs = np.concatenate([c.get_observations()[:-1] for c in chunks])
        next_obs = np.concatenate([c.get_observations()[1:] for c in chunks])
        ends = [np.r_[np.zeros(len(c) - 1, bool), True] for c in chunks]
        term = np.concatenate([e & c.is_terminated for e, c in zip(ends, chunks)])
        trunc = np.concatenate([e & c.is_truncated for e, c in zip(ends, chunks)])
        np.testing.assert_array_equal(obs, t["observation"].numpy())
        # next obs, the final observation of truncated and terminated steps included
        np.testing.assert_array_equal(next_obs, t["next", "observation"].numpy())
        np.testing.assert_array_equal(
            np.concatenate([c.get_actions() for c in chunks]), t["action"].numpy()
        )
        np.testing.assert_allclose(
            np.concatenate([c.get_rewards() for c in chunks]),
            t["next", "reward"].numpy()[:, 0],
            rtol=1e-6,
        )
        np.testing.assert_array_equal(term, t["next", "terminated"].numpy()[:, 0])
        np.testing.assert_array_equal(trunc, t["next", "truncated"].numpy()[:, 0])
        seen_trunc, seen_term = seen_trunc + trunc.sum(), seen_term + term.sum()
        # Trajectories: TorchRL's traj ids split the steps where our episode ids do, and the
        # step in episode (obs column 1) is our env time t_started + j.
        ids = np.concatenate([[c.id_] * len(c) for c in chunks])
        traj = t["collector", "traj_ids"].numpy()
        pairs = set(zip(ids.tolist(), traj.tolist()))
        assert len(pairs) == len(set(ids.tolist())) == len(set(traj.tolist()))
        times = np.concatenate([np.arange(c.t_started, c.t_started + len(c)) for c in chunks])
        np.testing.assert_array_equal(times, obs[:, 1])
    assert seen_trunc > 0 and seen_term > 0


# ------------------------------------------------------------------------------- batches


def test_batches_go_into_a_tensordict_as_documented():
    episodes = _episodes(STREAMS["long episodes"])
    for cls in (EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer):
        buf = cls(1_000, seed=0)
        for eps in episodes:
            buf.add([_ours(e) for e in eps])
        transitions = TensorDict(buf.sample(8, n_step=3), batch_size=[8])
        assert transitions["rewards"].shape == transitions["discounts"].shape == (8,)
        assert transitions["next_obs"].shape == (8, 2)
        sequences = buf.sample(8, batch_length_T=4, lookback=1)
        if cls is EpisodeReplayBuffer:
            assert TensorDict(sequences, batch_size=[8, 5])["obs"].shape == (8, 5, 2)
        else:  # one weight per sequence: [B], which a [B, L + T] TensorDict refuses
            assert sequences["weights"].shape == (8,)
            with pytest.raises(RuntimeError):
                TensorDict(sequences, batch_size=[8, 5])
            weights = sequences.pop("weights")
            td = TensorDict(sequences, batch_size=[8, 5])
            assert td["obs"].shape == (8, 5, 2) and weights.shape == (8,)


# ------------------------------------------------------------------------------- PER


def test_prioritized_weights_are_torchrl_weights(monkeypatch):
    from torchrl.data.replay_buffers.samplers import PrioritizedSampler
    from torchrl.data.replay_buffers.samplers import prioritized as torchrl_prioritized

    patch_trees(monkeypatch, torchrl_prioritized)
    alpha, beta = 0.6, 0.4
    # A small minimum (0.05) that is still drawn now and then, so that every item's weight
    # is seen on both sides.
    priorities = np.r_[[0.05, 1, 1, 1], [1, 2, 3, 4], [0.5, 5, 5, 5]]
    episodes = _episodes([[(4, TERM), (4, TRUNC), (4, RUN)]])[0]

    sampler = PrioritizedSampler(12, alpha=alpha, beta=beta, eps=0.0, dtype=torch.float64)
    rb = ReplayBuffer(
        storage=LazyTensorStorage(12),
        sampler=sampler,
        batch_size=4000,
        generator=torch.Generator().manual_seed(0),
    )
    rb.extend(_stream_td(episodes))
    rb.update_priority(torch.arange(12), torch.as_tensor(priorities))
    _, info = rb.sample(return_info=True)
    assert info["priority_weight"].shape == (4000,)  # [B], as ours: no trailing 1
    theirs = dict(zip(info["index"].tolist(), info["priority_weight"].tolist()))

    buf = PrioritizedEpisodeReplayBuffer(100, alpha=alpha, seed=0)
    buf.add([_ours(e) for e in episodes])
    items = np.concatenate([buf.locate(e["id_"], range(4)) for e in episodes])
    buf.update_priorities(priorities, items)
    batch = buf.sample(4000, beta=beta)
    position = {int(item): j for j, item in enumerate(items)}  # our item -> storage slot
    ours = {position[i]: w for i, w in zip(batch["indices"].tolist(), batch["weights"].tolist())}

    assert set(ours) == set(theirs) == set(range(12))
    for slot in range(12):
        np.testing.assert_allclose(ours[slot], theirs[slot], rtol=1e-6)
    p = priorities**alpha
    np.testing.assert_allclose([theirs[s] for s in range(12)], (p / p.min()) ** -beta)
    # Both draw in proportion to p: the draw counts agree within sampling noise.
    counts_theirs = np.bincount(info["index"].numpy(), minlength=12) / 4000
    counts_ours = np.bincount([position[i] for i in batch["indices"].tolist()], minlength=12)
    np.testing.assert_allclose(counts_ours / 4000, p / p.sum(), atol=0.02)
    np.testing.assert_allclose(counts_theirs, p / p.sum(), atol=0.02)
