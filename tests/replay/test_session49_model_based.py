"""A MuZero / EfficientZero learner's journey: search outputs recorded by the runner, K-step
unrolls with n-step value targets bootstrapped from stored root values, a reanalyse pass that
rewrites stored extra outputs (``set_extra_model_outputs``), and priorities from value errors.
Every number is checked against a plain-Python reference built from the recorded chunks."""

from __future__ import annotations

import copy
from collections import defaultdict
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.runner import EnvRunner

A, K, N, GAMMA = 3, 5, 3, 0.9


class _Game(gym.Env[dict[str, Any], int]):
    """Dict observations, Discrete actions, episodes of 2 to 11 steps (odd ones never end)."""

    def __init__(self, seed: int) -> None:
        self.observation_space = gym.spaces.Dict(
            {"pos": gym.spaces.Box(-50, 50, (2,), np.float32), "k": gym.spaces.Discrete(100)}
        )
        self.action_space = gym.spaces.Discrete(A)
        self.rng = np.random.default_rng(seed)
        self.t = self.len = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t, self.len = 0, int(self.rng.integers(2, 12))
        return self._obs(), {}

    def _obs(self) -> dict[str, Any]:
        return {"pos": np.array([self.t, self.rng.normal()], np.float32), "k": self.t}

    def step(self, action: Any) -> Any:
        self.t += 1
        done = self.t >= self.len and self.len % 2 == 0
        return self._obs(), float(action) + 0.5 * self.t, done, False, {}


def _maker(i: int) -> Any:
    # TimeLimit truncates the episodes that run past 7 steps
    return lambda: gym.wrappers.TimeLimit(_Game(i), max_episode_steps=7)


def _search_policy(seed: int) -> Any:
    rng = np.random.default_rng(seed)

    def policy(obs: Any) -> Any:
        n = len(obs["k"])
        visits = rng.integers(1, 20, (n, A)).astype(np.float32)
        pi = visits / visits.sum(1, keepdims=True)
        stats = {"depth": rng.integers(1, 9, n), "q": rng.normal(size=(n, A)).astype(np.float32)}
        root = rng.normal(size=n).astype(np.float32)
        return pi.argmax(1), {"search_policy": pi, "root_value": root, "stats": stats}

    return policy


def _collect(buf: Any, calls: int = 6) -> tuple[EnvRunner, dict[Any, dict[str, Any]]]:
    env = gym.vector.SyncVectorEnv([_maker(i) for i in range(4)])
    runner = EnvRunner(env, _search_policy(1), seed=0)
    chunks = defaultdict(list)
    for _ in range(calls):
        sampled = runner.sample(13)
        for c in sampled:
            chunks[c.id_].append(c)
        buf.add(sampled)
    return runner, {i: _joined(cs) for i, cs in chunks.items() if i in buf.get_episode_ids()}


def _joined(chunks: list[SingleAgentEpisode]) -> dict[str, Any]:
    chunks = sorted(chunks, key=lambda c: c.t_started)
    out: dict[str, Any] = {"t0": chunks[0].t_started, "r": [], "a": [], "pi": [], "v": []}
    for c in chunks:
        out["r"] += [float(r) for r in c.get_rewards()]
        out["a"] += [int(a) for a in c.get_actions()]
        out["pi"] += list(np.asarray(c.get_extra_model_outputs("search_policy")))
        out["v"] += [float(v) for v in c.get_extra_model_outputs("root_value")]
    return out


def _unroll(buf: Any, idx: np.ndarray) -> dict[str, np.ndarray]:
    """MuZero's K-step unroll of each item, padded past its episode's end, with no per-item
    Python loop: items_at finds the steps, get_transitions reads them."""
    _, t = buf.episode_steps(idx)
    _, t_end, _ = buf.episode_bounds(idx)
    tk = t[:, None] + np.arange(K + 1)
    mask = tk < t_end[:, None]
    flat = buf.items_at(np.repeat(idx, K + 1)[mask.ravel()], tk[mask])
    tr = buf.get_transitions(flat, n_step=N, gamma=GAMMA, include_extra_model_outputs=True)
    one = buf.get_transitions(flat, n_step=1)
    # z = n-step rewards + gamma^n * the root value STORED n steps later, where that step is
    # stored; past a terminal or the newest step there is none (0; a truncated episode's last
    # horizon would take V(final obs) from the network instead).
    boot_t = tk[mask] + tr["n_step"]
    inside = boot_t < np.repeat(t_end, K + 1)[mask.ravel()]
    boot = np.zeros(len(flat))
    later = buf.items_at(flat[inside], boot_t[inside])
    boot[inside] = buf.get_extra_model_outputs("root_value", later)
    out = {
        "mask": mask,
        "actions": np.zeros(mask.shape, np.int64),
        "rewards": np.zeros(mask.shape),
        "policy": np.full((*mask.shape, A), 1.0 / A),
        "z": np.zeros(mask.shape),
    }
    out["actions"][mask] = tr["actions"]
    out["rewards"][mask] = one["rewards"]
    out["policy"][mask] = tr["search_policy"]
    out["z"][mask] = tr["rewards"] + tr["discounts"] * boot
    return out


def test_unroll_matches_plain_python_reference() -> None:
    buf = PrioritizedEpisodeReplayBuffer(capacity=400, alpha=0.6, seed=0)
    _, ref = _collect(buf)
    episodes = buf.get_episodes()  # the journey meets every ending: check the data has them
    assert any(e.is_terminated for e in episodes) and any(e.is_truncated for e in episodes)
    assert any(not e.is_done for e in episodes) and len({len(e) for e in episodes}) > 3
    batch = buf.sample(64, beta=0.5)
    ids, t = buf.episode_steps(batch["indices"])
    got = _unroll(buf, batch["indices"])
    for b in range(64):
        e = ref[ids[b]]
        steps = len(e["r"])
        for k in range(K + 1):
            s = t[b] + k - e["t0"]
            assert got["mask"][b, k] == (s < steps)
            if s >= steps:
                assert got["rewards"][b, k] == 0 and got["z"][b, k] == 0
                assert np.allclose(got["policy"][b, k], 1 / A)
                continue
            assert got["actions"][b, k] == e["a"][s]
            assert got["rewards"][b, k] == pytest.approx(e["r"][s], rel=1e-6)
            assert np.allclose(got["policy"][b, k], e["pi"][s], rtol=1e-6)
            z = sum(GAMMA**i * e["r"][s + i] for i in range(min(N, steps - s)))
            z += GAMMA**N * e["v"][s + N] if s + N < steps else 0.0
            assert got["z"][b, k] == pytest.approx(z, rel=1e-5, abs=1e-5)


def test_priorities_from_value_errors_and_new_steps_at_max() -> None:
    buf = PrioritizedEpisodeReplayBuffer(capacity=400, alpha=0.6, seed=0)
    runner, _ = _collect(buf)
    batch = buf.sample(64, beta=0.5)
    errors = np.abs(_unroll(buf, batch["indices"])["z"][:, 0]) + 1e-3
    buf.update_priorities(errors)
    assert buf.max_priority == pytest.approx(errors.max())
    more = runner.sample(5)
    buf.add(more)
    stored = set(buf.get_episode_ids())
    new = np.concatenate(
        [
            buf.locate(c.id_, list(range(c.t_started, c.t_started + len(c))))
            for c in more
            if c.id_ in stored and len(c)
        ]
    )
    assert np.all(buf.get_priorities(new) == buf.max_priority)
    b2 = buf.sample(32, beta=0.4)
    every = np.concatenate([buf.get_episode_indices(i) for i in buf.get_episode_ids()])
    p = buf.get_priorities(every) ** 0.6
    prob = buf.get_priorities(b2["indices"]) ** 0.6 / p.sum()
    want = (len(every) * prob) ** -0.4 / (len(every) * p.min() / p.sum()) ** -0.4
    assert np.allclose(b2["weights"], want, rtol=1e-5)


# ------------------------------------------------------------------- set_extra_model_outputs
def _buffer(prioritized: bool = False, capacity: int = 100) -> Any:
    cls = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    buf = cls(capacity, seed=0)
    for i, n in enumerate([4, 3, 5]):
        buf.add(
            SingleAgentEpisode(
                f"e{i}",
                observations=[float(t) for t in range(n + 1)],
                actions=[0] * n,
                rewards=[1.0] * n,
                extra_model_outputs={
                    "pi": np.full((n, A), 1.0 / A, np.float32),
                    "v": np.arange(n, dtype=np.float32) + 10 * i,
                    "stats": {"depth": np.arange(n), "q": np.zeros((n, 2), np.float32)},
                },
                terminated=True,
                len_lookback_buffer=0,
            )
        )
    return buf


def _extras(buf: Any) -> dict[str, Any]:
    return copy.deepcopy(buf.get_state()["steps"]["extras"])


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(a[k].tobytes() == b[k].tobytes() for k in a)


REFUSALS = {
    "unknown key": ("logits", [0.0], [0], KeyError, "no stored extra model output"),
    "key not a str": (0, [0.0], [0], KeyError, "no stored extra model output"),
    "float indices": ("v", [1.0], [1.0], ValueError, "indices must be integers"),
    "bool indices": ("v", [1.0], [True], ValueError, "indices must be integers"),
    "2-d indices": ("v", [[1.0]], [[0]], ValueError, "1-d"),
    "never issued": ("v", [1.0], [12], ValueError, "never issued"),
    "sequence padding": ("v", [1.0, 2.0], [0, -1], ValueError, "indices[mask]"),
    "too few values": ("v", [1.0], [0, 1], ValueError, "1 values for 2 indices"),
    "row shape": ("pi", np.zeros((1, A + 1)), [0], ValueError, "do not fit"),
    "ints into floats": ("v", np.array([1]), [0], ValueError, "do not fit"),
    "past float32": ("v", [1e300], [0], ValueError, "cannot"),
    "strings": ("v", ["a"], [0], TypeError, "numeric"),
    "flat into nested": ("stats", [1.0], [0], ValueError, "do not fit"),
    "nested wrong keys": ("stats", {"depth": [1]}, [0], ValueError, "do not fit"),
    "nested into flat": ("v", {"a": [1.0]}, [0], ValueError, "do not fit"),
    "valid then bad": ("v", [1.0, np.inf * 0], [0, 99], ValueError, "never issued"),
}


@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
@pytest.mark.parametrize("case", list(REFUSALS))
def test_set_extra_model_outputs_refusals_change_nothing(case: str, prioritized: bool) -> None:
    key, values, indices, error, words = REFUSALS[case]
    buf = _buffer(prioritized)
    before = _extras(buf)
    with pytest.raises(error, match=words.replace("[", r"\[")):
        buf.set_extra_model_outputs(key, values, indices)
    assert _same(_extras(buf), before)


def test_evicted_items_are_skipped_the_rest_written() -> None:
    buf = _buffer(capacity=9)  # 4 + 3 + 5 steps: e0 was evicted
    assert buf.get_episode_ids() == ["e1", "e2"]
    assert buf.set_extra_model_outputs("v", [7.0, 8.0, 9.0], [0, 4, 11]) == 2
    got = buf.get_transitions([4, 11], include_extra_model_outputs=True)["v"]
    assert got.tolist() == [8.0, 9.0]
    assert buf.set_extra_model_outputs("v", [], []) == 0


def test_nested_and_torch_values() -> None:
    torch = pytest.importorskip("torch")
    buf = _buffer()
    pi = torch.tensor([[0.5, 0.25, 0.25]], dtype=torch.float64, requires_grad=True)
    assert buf.set_extra_model_outputs("pi", pi * 1, torch.tensor([5])) == 1
    stats = {"q": torch.ones(2, 2, dtype=torch.bfloat16), "depth": [40, 41]}
    assert buf.set_extra_model_outputs("stats", stats, np.array([6, 5])) == 2
    batch = buf.get_transitions([5, 6], include_extra_model_outputs=True)
    assert batch["pi"][0].tolist() == [0.5, 0.25, 0.25]
    assert batch["stats"]["depth"].tolist() == [41, 40]
    assert batch["stats"]["q"].dtype == np.float32 and batch["stats"]["q"].tolist() == [[1, 1]] * 2
    # a list of nested items, one per index, is taken too
    items = [{"depth": 1, "q": np.full(2, 3.0)}, {"depth": 2, "q": np.full(2, 4.0)}]
    assert buf.set_extra_model_outputs("stats", items, [0, 1]) == 2
    depth = buf.get_transitions([0, 1], include_extra_model_outputs=True)["stats"]["depth"]
    assert depth.tolist() == [1, 2]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    picks=st.lists(st.integers(0, 11), max_size=20),
    seed=st.integers(0, 2**16),
    prioritized=st.booleans(),
)
def test_round_trip_reads_back_written_values(
    picks: list[int], seed: int, prioritized: bool, tmp_path_factory: Any
) -> None:
    buf = _buffer(prioritized)
    rng = np.random.default_rng(seed)
    old = buf.get_transitions(np.arange(12), include_extra_model_outputs=True)
    pi = rng.random((len(picks), A)).astype(np.float32)
    v = rng.normal(size=len(picks)).astype(np.float32)
    assert buf.set_extra_model_outputs("pi", pi, picks) == len(picks)
    assert buf.set_extra_model_outputs("v", v, np.array(picks, np.int64)) == len(picks)
    want_pi, want_v = old["pi"].copy(), old["v"].copy()
    for i, item in enumerate(picks):  # the plain reference: a repeated index keeps its last
        want_pi[item], want_v[item] = pi[i], v[i]

    def check(b: Any) -> None:
        got = b.get_transitions(np.arange(12), include_extra_model_outputs=True)
        assert got["pi"].tobytes() == want_pi.tobytes()
        assert got["v"].tobytes() == want_v.tobytes()
        assert b.get_extra_model_outputs("v", np.arange(12)).tobytes() == want_v.tobytes()
        assert np.array_equal(got["stats"]["depth"], old["stats"]["depth"])  # untouched
        sampled = b.sample(16, include_extra_model_outputs=True)
        assert np.array_equal(sampled["v"], want_v[sampled["indices"]])
        seq = b.sample(4, batch_length_T=3, pad=True, include_extra_model_outputs=True)
        real = seq["mask"]
        assert np.array_equal(seq["pi"][real], want_pi[seq["indices"][real]])
        episodes = {ep.id_: ep for ep in b.get_episodes()}
        ids, t = b.episode_steps(np.arange(12))
        for item in range(12):
            ep = episodes[ids[item]]
            assert ep.get_extra_model_outputs("v", int(t[item])) == want_v[item]

    check(buf)
    restored = type(buf)(100)
    restored.set_state(buf.get_state())
    check(restored)
    path = Path(tmp_path_factory.mktemp("saved")) / "buf"
    buf.save(path)
    check(type(buf).load(path))


def test_nested_values_not_one_per_index_say_so() -> None:
    buf = _buffer()
    before = _extras(buf)
    stats = {"depth": [1, 2, 3], "q": np.zeros((3, 2), np.float32)}
    with pytest.raises(ValueError, match="3 values for 2 indices"):
        buf.set_extra_model_outputs("stats", stats, [0, 1])
    with pytest.raises(ValueError, match="1 values for 2 indices"):
        buf.set_extra_model_outputs("stats", [{"depth": 1, "q": np.zeros(2)}], [0, 1])
    assert _same(_extras(buf), before)


def test_get_extra_model_outputs_reads_one_column() -> None:
    buf = _buffer(capacity=9)  # e0 (items 0-3) evicted
    assert buf.get_extra_model_outputs("v", 4).tolist() == [10.0]
    stats = buf.get_extra_model_outputs("stats", [11, 7])
    assert stats["depth"].tolist() == [4, 0] and stats["q"].shape == (2, 2)
    for key, indices, error, words in [
        ("nope", [4], KeyError, "no stored extra model output"),
        ("v", [0], KeyError, "not stored"),
        ("v", [99], KeyError, "not stored"),
        ("v", [4.0], ValueError, "integers"),
        ("v", [[4]], ValueError, "1-d"),
    ]:
        with pytest.raises(error, match=words):
            buf.get_extra_model_outputs(key, indices)
