"""A Dreamer / TD-MPC2 user's journey: a vector env runner adds 64-step chunks of 16 envs'
running episodes (terminated and truncated ones, longer and shorter than T) to a replay buffer
while old episodes are evicted, and every sampled sequence, its Dreamer-layout conversion
(``dreamer_steps``), TD-MPC2 windows and the distribution of starts are checked against a log
the env writes itself, not against anything the buffer or runner computed."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.replay.world_model import dreamer_steps
from episodes.runner import EnvRunner, RandomPolicy

from ._stats import chi_square_p

ENVS, CHUNK = 16, 64


class LoggingVecEnv(gym.vector.VectorEnv):  # type: ignore[misc]
    """Observations ``[env, episode, t, noise]``; every step logged per ``(env, episode)``."""

    def __init__(self, seed: int, mode: str, max_len: int = 150) -> None:
        self.num_envs = ENVS
        self.single_observation_space = gym.spaces.Box(-1e9, 1e9, (4,), np.float32)
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, ENVS)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, ENVS)
        modes = {
            "next": gym.vector.AutoresetMode.NEXT_STEP,
            "same": gym.vector.AutoresetMode.SAME_STEP,
        }
        self.metadata = {"autoreset_mode": modes[mode]}
        self.same_step = mode == "same"
        self.rng = np.random.default_rng(seed)
        self.max_len = max_len
        self.log: dict[tuple[int, int], dict[str, Any]] = {}
        self.ep = np.zeros(ENVS, int)
        self.t = np.zeros(ENVS, int)
        self.end = np.zeros(ENVS, int)
        self.truncates = np.zeros(ENVS, bool)
        self.pending_reset = np.zeros(ENVS, bool)
        self.episodes_begun = 0

    def _obs(self, i: int) -> np.ndarray:
        return np.array([i, self.ep[i], self.t[i], self.rng.normal()], np.float32)

    def _begin(self, i: int) -> np.ndarray:
        self.ep[i], self.t[i] = self.episodes_begun, 0
        self.episodes_begun += 1
        self.end[i] = self.rng.integers(1, self.max_len)
        self.truncates[i] = self.rng.random() < 0.5
        obs = self._obs(i)
        self.log[(i, int(self.ep[i]))] = {
            "obs": [obs],
            "act": [],
            "rew": [],
            "term": False,
            "trunc": False,
        }
        return obs

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        return np.stack([self._begin(i) for i in range(ENVS)]), {}

    def step(self, actions: Any) -> Any:
        obs, rewards = [], np.zeros(ENVS, np.float32)
        term, trunc = np.zeros(ENVS, bool), np.zeros(ENVS, bool)
        final: list[Any] = [None] * ENVS
        for i in range(ENVS):
            if self.pending_reset[i]:  # next-step mode: this step is the reset
                self.pending_reset[i] = False
                obs.append(self._begin(i))
                continue
            rec = self.log[(i, int(self.ep[i]))]
            rec["act"].append(np.array(actions[i], np.float32))
            self.t[i] += 1
            rewards[i] = reward = np.float32(self.rng.normal())
            rec["rew"].append(reward)
            o = self._obs(i)
            rec["obs"].append(o)
            if self.t[i] >= self.end[i]:
                key = "trunc" if self.truncates[i] else "term"
                rec[key] = True
                (trunc if self.truncates[i] else term)[i] = True
                if self.same_step:
                    final[i], o = o, self._begin(i)
                else:
                    self.pending_reset[i] = True
            obs.append(o)
        infos: dict[str, Any] = {
            "t": np.array([o[2] for o in obs], np.int64),
            "_t": np.ones(ENVS, bool),
        }
        done = np.array([f is not None for f in final])
        if done.any():
            final_obs = np.empty(ENVS, object)
            final_obs[:] = final
            final_t = np.array([-1 if f is None else int(f[2]) for f in final])
            infos |= {
                "final_obs": final_obs,
                "_final_obs": done,
                "final_info": {"t": final_t, "_t": done},
                "_final_info": done,
            }
        return np.stack(obs), rewards, term, trunc, infos


class Journey:
    """Runner chunks into a buffer; what the env logged and what the buffer should hold."""

    def __init__(
        self, mode: str, capacity: int, prioritized: bool, on_evicted: str = "drop"
    ) -> None:
        self.env = LoggingVecEnv(seed=5, mode=mode)
        self.runner = EnvRunner(self.env, RandomPolicy(self.env.action_space, seed=0), seed=0)
        kind = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
        self.buf = kind(capacity, seed=0)
        self.on_evicted = on_evicted
        self.delivered: dict[tuple[int, int], tuple[int, bool, bool]] = {}
        self.first_t: dict[tuple[int, int], int] = {}
        self.id_of: dict[tuple[int, int], Any] = {}

    def collect(self) -> None:
        before = set(self.buf.get_episode_ids())
        chunks = self.runner.sample(CHUNK)
        keys = []
        for c in chunks:
            o = c.get_observations(0)
            key = (int(o[0]), int(o[1]))
            keys.append(key)
            self.id_of[key] = c.id_
            self.delivered[key] = (c.t_started + len(c), c.is_terminated, c.is_truncated)
        self.buf.add(chunks, on_evicted=self.on_evicted)
        stored = set(self.buf.get_episode_ids())
        for key, c in zip(keys, chunks, strict=True):
            if c.id_ in stored and c.id_ not in before:  # a new (or restarted) stored episode
                self.first_t[key] = c.t_started

    def stored(self) -> dict[tuple[int, int], tuple[int, int, bool, bool]]:
        """key -> (first stored t, one past the last stored step, terminated, truncated)."""
        ids = set(self.buf.get_episode_ids())
        return {k: (self.first_t[k], *v) for k, v in self.delivered.items() if self.id_of[k] in ids}


def _numpy(batch: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v.numpy() if hasattr(v, "numpy") and not isinstance(v, np.ndarray) else v
        for k, v in batch.items()
    }


def _expected_row(
    log: dict[str, Any],
    first: int,
    n: int,
    term: bool,
    trunc: bool,
    t0: int,
    width: int,
    lookback: int,
) -> dict[str, np.ndarray]:
    out = {
        "obs": np.zeros((width, 4), np.float32),
        "actions": np.zeros((width, 2), np.float32),
        "rewards": np.zeros(width, np.float32),
        "next_obs": np.zeros((width, 4), np.float32),
        "is_first": np.zeros(width, bool),
        "is_last": np.zeros(width, bool),
        "is_terminated": np.zeros(width, bool),
        "is_truncated": np.zeros(width, bool),
        "is_lookback": np.arange(width) < lookback,
        "mask": np.zeros(width, bool),
        "t": np.full(width, -1),
    }
    for j in range(width):
        t = t0 - lookback + j
        if first <= t < n:
            last = t == n - 1
            out["obs"][j], out["actions"][j] = log["obs"][t], log["act"][t]
            out["rewards"][j], out["next_obs"][j] = log["rew"][t], log["obs"][t + 1]
            out["is_first"][j], out["is_last"][j] = t == first, last
            out["is_terminated"][j], out["is_truncated"][j] = last and term, last and trunc
            out["mask"][j], out["t"][j] = True, t
    return out


def _check_sequences(j: Journey, batch: dict[str, Any], T: int, lookback: int, pad: bool) -> None:
    b = _numpy(batch)
    stored = j.stored()
    for r in range(b["obs"].shape[0]):
        o = b["obs"][r, lookback]
        key, t0 = (int(o[0]), int(o[1])), int(o[2])
        first, n, term, trunc = stored[key]
        assert pad or t0 + T <= n
        exp = _expected_row(j.env.log[key], first, n, term, trunc, t0, lookback + T, lookback)
        for col, want in exp.items():
            if col != "t":
                assert np.array_equal(b[col][r], want), (col, key, t0)
        real = exp["mask"]
        assert (b["indices"][r][~real] == -1).all()
        assert np.array_equal(b["indices"][r][real], j.buf.locate(j.id_of[key], exp["t"][real]))
        infos = batch["infos"][r]
        assert [infos[c] for c in range(lookback + T)] == [
            {"t": t + 1} if t >= 0 else {} for t in exp["t"]
        ]


@pytest.mark.parametrize(
    ("mode", "capacity", "prioritized", "on_evicted"),
    [
        ("next", 1500, False, "drop"),
        ("same", 1200, True, "restart"),
        ("next", 800, False, "restart"),
        ("same", 5000, False, "raise"),
    ],
    ids=["next-drop", "same-prioritized-restart", "next-small-restart", "same-roomy"],
)
def test_sequences_match_the_env_log(
    mode: str, capacity: int, prioritized: bool, on_evicted: str
) -> None:
    torch = pytest.importorskip("torch")
    j = Journey(mode, capacity, prioritized, on_evicted)
    for it in range(4):
        j.collect()
        for lookback in (0, 1, 3):
            for pad in (False, True):
                device = "cpu" if (it + lookback) % 2 else None
                batch = j.buf.sample(
                    16,
                    batch_length_T=64,
                    lookback=lookback,
                    pad=pad,
                    include_infos=True,
                    device=device,
                )
                assert isinstance(batch["obs"], torch.Tensor) == (device is not None)
                _check_sequences(j, batch, 64, lookback, pad)
    assert j.buf.get_num_episodes_evicted() > 0 or capacity == 5000


def _dreamer_reference(
    log: dict[str, Any], first: int, n: int, term: bool, trunc: bool, t: int
) -> dict[str, Any]:
    """Danijar's step layout for observation ``o_t`` of a stored episode (None: padding)."""
    if not first <= t <= n:
        return {"mask": False}
    at_first = t == first
    return {
        "mask": True,
        "obs": log["obs"][t],
        "actions": np.zeros(2, np.float32) if at_first else log["act"][t - 1],
        "rewards": 0.0 if at_first else log["rew"][t - 1],
        "is_first": at_first,
        "is_last": t == n and (term or trunc),
        "is_terminal": t == n and term,
    }


@pytest.mark.parametrize("pad", [False, True], ids=["no-pad", "pad"])
@pytest.mark.parametrize("device", [None, "cpu"], ids=["numpy", "torch"])
def test_dreamer_steps_match_the_env_log(pad: bool, device: str | None) -> None:
    if device:
        pytest.importorskip("torch")
    T = 64
    j = Journey("next", 1500, prioritized=False, on_evicted="restart")
    seen = {"is_first": 0, "is_terminal": 0, "truncated_last": 0, "chunk_border": 0}
    for _ in range(5):
        j.collect()
        stored = j.stored()
        d = _numpy(
            dreamer_steps(
                j.buf.sample(32, batch_length_T=T - 1, lookback=1, pad=pad, device=device)
            )
        )
        assert d["obs"].shape == (32, T, 4) and d["rewards"].dtype == np.float32
        for r in range(32):
            k0 = int(np.argmax(d["mask"][r]))
            key, t_k0 = (int(d["obs"][r, k0, 0]), int(d["obs"][r, k0, 1])), int(d["obs"][r, k0, 2])
            first, n, term, trunc = stored[key]
            assert pad or t_k0 - k0 + T - 1 <= n  # a window of T observations, o_n the last
            for k in range(T):
                want = _dreamer_reference(j.env.log[key], first, n, term, trunc, t_k0 + k - k0)
                assert d["mask"][r, k] == want["mask"], (key, k)
                if not want["mask"]:
                    assert not d["obs"][r, k].any() and not d["is_first"][r, k]
                    continue
                for col in ("obs", "actions", "rewards", "is_first", "is_last", "is_terminal"):
                    assert np.array_equal(d[col][r, k], want[col]), (col, key, k)
                seen["is_first"] += want["is_first"]
                seen["is_terminal"] += want["is_terminal"]
                seen["truncated_last"] += want["is_last"] and not want["is_terminal"]
                seen["chunk_border"] += (t_k0 + k - k0) % CHUNK == 0 and not want["is_first"]
    assert all(seen.values()), seen  # every border met: starts, ends of both kinds, chunk seams


def test_documented_lookback_recipe_never_sees_a_terminal_observation() -> None:
    """The earlier recipe (``obs[:, 1:]`` of ``sample(B, T, lookback=1)``) never holds o_n."""
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(
        SingleAgentEpisode(
            "e",
            observations=[float(t) for t in range(6)],
            actions=[0] * 5,
            rewards=[1.0] * 5,
            terminated=True,
            len_lookback_buffer=0,
        )
    )
    old = buf.sample(200, batch_length_T=3, lookback=1)
    assert 5.0 not in old["obs"][:, 1:]  # a continuation head never gets a 0 target there
    new = dreamer_steps(buf.sample(200, batch_length_T=3, lookback=1))
    assert (new["obs"][new["is_terminal"]] == 5.0).all() and new["is_terminal"].any()


@pytest.mark.parametrize("H", [3, 4, 5])
def test_tdmpc2_windows_end_on_the_true_final_observation(H: int) -> None:
    j = Journey("same", 1500, prioritized=True)
    ends = {"term": 0, "trunc": 0}
    for it in range(5):
        j.collect()
        stored = j.stored()
        b = j.buf.sample(256, batch_length_T=H, beta=0.4)
        obs = np.concatenate([b["obs"], b["next_obs"][:, -1:]], axis=1)  # o_t .. o_{t+H}
        for r in range(256):
            key, t0 = (int(obs[r, 0, 0]), int(obs[r, 0, 1])), int(obs[r, 0, 2])
            log = j.env.log[key]
            first, n, term, trunc = stored[key]
            assert t0 + H <= n
            assert np.array_equal(obs[r], np.stack(log["obs"][t0 : t0 + H + 1]))
            assert np.array_equal(b["actions"][r], np.stack(log["act"][t0 : t0 + H]))
            assert np.array_equal(b["rewards"][r], np.array(log["rew"][t0 : t0 + H], np.float32))
            at_end = t0 + H == n
            assert b["is_terminated"][r, -1] == (at_end and term)
            assert b["is_truncated"][r, -1] == (at_end and trunc)
            assert not b["is_terminated"][r, :-1].any()
            ends["term"] += at_end and term
            ends["trunc"] += at_end and trunc
        j.buf.update_priorities(np.random.default_rng(it).uniform(0.1, 3.0, 256))
    assert ends["term"] and ends["trunc"], ends


@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
@pytest.mark.parametrize("pad", [False, True], ids=["no-pad", "pad"])
def test_sequence_starts_are_distributed_as_documented(pad: bool, prioritized: bool) -> None:
    """Starts: steps with T steps left (any stored step with pad), by priority ** alpha."""
    T = 32
    j = Journey("next", 1500, prioritized)
    alpha = j.buf.alpha if prioritized else 0.0
    for it in range(4):  # chunks keep arriving, old episodes go
        j.collect()
        ids = j.buf.get_episode_ids()
        if prioritized:
            items = np.concatenate([j.buf.get_episode_indices(i) for i in ids])
            j.buf.update_priorities(np.random.default_rng(it).uniform(0.2, 3.0, len(items)), items)
        cells: dict[tuple[Any, int], float] = {}
        for key, (first, n, _, _) in j.stored().items():
            stop = n if pad else n - T + 1
            if stop <= first:
                continue
            t = np.arange(first, stop)
            w = (
                j.buf.get_priorities(j.buf.locate(j.id_of[key], t)) ** alpha
                if prioritized
                else np.ones(len(t))
            )
            cells |= {(key, int(s)): float(x) for s, x in zip(t, w, strict=True)}
        place = {cell: i for i, cell in enumerate(cells)}
        counts = np.zeros(len(cells))
        for _ in range(20):
            starts = j.buf.sample(1000, batch_length_T=T, pad=pad)["obs"][:, 0]
            for o in starts:  # a start outside `cells` is a KeyError
                counts[place[((int(o[0]), int(o[1])), int(o[2]))]] += 1
        weights = np.array(list(cells.values()))
        assert chi_square_p(counts, counts.sum() * weights / weights.sum()) > 1e-3


def _episode(id_: str, n: int, start: int = 0, **flags: bool) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[
            {"x": np.full(2, 10 * (start + t), np.float32), "k": start + t} for t in range(n + 1)
        ],
        actions=list(range(start + 1, start + n + 1)),
        rewards=[float(start + t + 1) for t in range(n)],
        t_started=start,
        len_lookback_buffer=0,
        **flags,
    )


@pytest.mark.parametrize(
    ("flags", "pad", "is_last", "is_terminal"),
    [
        ({"terminated": True}, True, True, True),
        ({"truncated": True}, True, True, False),
        ({}, True, False, False),
        ({"terminated": True}, False, True, True),
    ],
    ids=["terminated", "truncated-not-terminal", "running", "terminated-no-pad"],
)
def test_dreamer_steps_of_nested_observations(
    flags: dict[str, bool], pad: bool, is_last: bool, is_terminal: bool
) -> None:
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("a", 3, **flags))
    for _ in range(20):
        d = dreamer_steps(buf.sample(4, batch_length_T=3, lookback=1, pad=pad))
        for r in range(4):
            k = d["obs"]["k"][r][d["mask"][r]]  # the observations' times, in order
            assert (np.diff(k) == 1).all() and (
                d["obs"]["x"][r][d["mask"][r]][:, 0] == 10 * k
            ).all()
            assert (d["actions"][r][d["mask"][r]] == k).all()  # a_{t-1} = t here, 0 at o_0
            assert (d["rewards"][r][d["mask"][r]] == k).all()  # r_t = t here, 0 at o_0
            assert (d["is_first"][r] == (d["mask"][r] & (d["obs"]["k"][r] == 0))).all()
            final = d["mask"][r] & (d["obs"]["k"][r] == 3)
            assert (d["is_last"][r] == (final & is_last)).all()
            assert (d["is_terminal"][r] == (final & is_terminal)).all()
            assert not d["obs"]["x"][r][~d["mask"][r]].any()


def test_dreamer_steps_of_a_restarted_episode_reset_at_its_first_stored_step() -> None:
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("late", 4, start=7))
    d = dreamer_steps(buf.sample(16, batch_length_T=4, lookback=1))
    assert d["mask"].all() and d["is_first"][:, 0].all() and not d["is_first"][:, 1:].any()
    assert (d["obs"]["k"] == np.arange(7, 12)).all()
    assert (d["actions"][:, 0] == 0).all() and (d["rewards"][:, 0] == 0).all()


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda buf: buf.sample(4, n_step=1), "lacks the sequence columns"),
        (lambda buf: buf.sample(4, batch_length_T=3), "lookback=0"),
        (lambda buf: buf.sample(4, batch_length_T=2, lookback=2), "lookback=2"),
        (lambda buf: [1, 2], "must be a sequence batch dict"),
    ],
    ids=["transitions", "no-lookback", "lookback-2", "not-a-dict"],
)
def test_dreamer_steps_refuses_other_batches(make: Any, words: str) -> None:
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("a", 5, terminated=True))
    batch = make(buf)
    with pytest.raises(ValueError, match=words):
        dreamer_steps(batch)
