"""Three TorchRL scripts ported to the replay buffers, each value checked against a plain log.

(a) SAC-style 1-step transitions (``("next", "observation")`` and the end flags) as torch
tensors; (b) 64-step sequences that never cross an episode, with a recurrent burn-in;
(c) prioritized n-step transitions with TD-error priorities and beta annealing. The stream
has terminated, truncated (a final observation of its own) and running episodes, chunks
that continue across adds and a capacity that evicts. TorchRL's own answers for the same
data are in ``tests/differential/test_session53_torchrl_keys.py``; docs/replay.md, "Coming
from TorchRL".
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.replay import EmptyBufferError, EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer

TRUNC_OBS = 90  # a truncated episode's final observation: base + 90, no step's own


class Log:
    """What a TorchRL user would have in a plain list: every step by (episode, t)."""

    def __init__(self):
        self.steps = {}  # (id, t) -> (obs, reward, next_obs)
        self.ends = {}  # id -> (length, terminated, truncated) once it ended

    def chunk(self, id_, base, t0, k, length, terminated, truncated, rewards):
        finished = t0 + k == length
        obs = [np.float32([base + t]) for t in range(t0, t0 + k + 1)]
        if finished and truncated:
            obs[-1] = np.float32([base + TRUNC_OBS])
        for j in range(k):
            self.steps[id_, t0 + j] = (float(obs[j][0]), float(rewards[j]), float(obs[j + 1][0]))
        if finished:
            self.ends[id_] = (length, terminated, truncated)
        return SingleAgentEpisode(
            id_,
            observations=obs,
            actions=list(range(t0, t0 + k)),
            rewards=[float(r) for r in rewards],
            terminated=terminated and finished,
            truncated=truncated and finished,
            t_started=t0,
            len_lookback_buffer=0,
            extra_model_outputs={"h": [np.float32([base + t, 7.0]) for t in range(t0, t0 + k)]},
        )


def _vector_stream(buf, seed, *, num_envs, chunk_len, adds, on_evicted="restart", each=None):
    """``num_envs`` envs of random episode lengths, ``adds`` adds of ``chunk_len`` steps each."""
    rng = np.random.default_rng(seed)
    log, count = Log(), iter(range(1, 10**6))

    def new():
        n = next(count)
        term = bool(rng.random() < 0.5)
        return [
            f"e{n}",
            100 * n,
            0,
            int(rng.integers(1, 20)),
            term,
            not term and rng.random() < 0.6,
        ]

    running = [new() for _ in range(num_envs)]
    for _ in range(adds):
        chunks = []
        for i, (id_, base, t0, length, term, trunc) in enumerate(running):
            k = min(chunk_len, length - t0)
            rewards = rng.normal(size=k).astype(np.float32)
            chunks.append(log.chunk(id_, base, t0, k, length, term, bool(trunc), rewards))
            running[i] = new() if t0 + k == length else [id_, base, t0 + k, length, term, trunc]
        buf.add(chunks, on_evicted=on_evicted)
        if each is not None:
            each(log, rng)
    return log


def _check_transitions(buf, log, batch, n, gamma):
    """Every row against the log: n-step sums, horizons, next observation and end flags."""
    ids, ts = buf.episode_steps(np.asarray(batch["indices"]))
    _, t_end, _ = buf.episode_bounds(np.asarray(batch["indices"]))
    for r, (id_, t) in enumerate(zip(ids, ts.tolist())):
        m = min(n, int(t_end[r]) - t)
        ret = sum(gamma**j * log.steps[id_, t + j][1] for j in range(m))
        length, term, trunc = log.ends.get(id_, (-1, False, False))
        ended = t + m == int(t_end[r]) == length  # the window reached the episode's end
        assert int(batch["n_step"][r]) == m
        assert float(batch["rewards"][r]) == pytest.approx(ret, abs=1e-5)
        assert float(batch["discounts"][r]) == pytest.approx(gamma**m, rel=1e-6)
        assert float(batch["obs"][r][0]) == log.steps[id_, t][0]
        assert float(batch["next_obs"][r][0]) == log.steps[id_, t + m - 1][2]
        assert bool(batch["terminateds"][r]) == (ended and term)
        assert bool(batch["truncateds"][r]) == (ended and trunc)


# ------------------------------------------------------------------ (a) 1-step transitions
# Named episodes: what TorchRL's LazyTensorStorage holds for each step (a TensorDict per step,
# ``("next", "observation")`` the final observation at a truncation), as (obs, next_obs,
# terminated, truncated) of each step.
ONE_STEP_CASES = {
    "terminated": (dict(length=3, terminated=True, truncated=False), [False, False, True], []),
    "truncated": (dict(length=3, terminated=False, truncated=True), [], [False, False, True]),
    "running": (dict(length=5, terminated=True, truncated=False), [False] * 3, [False] * 3),
    "one_step_terminated": (dict(length=1, terminated=True, truncated=False), [True], []),
}


@pytest.mark.parametrize("name", list(ONE_STEP_CASES))
def test_one_step_transitions_are_torchrl_storage_rows(name):
    spec, terminated, truncated = ONE_STEP_CASES[name]
    log, buf = Log(), EpisodeReplayBuffer(100, seed=0)
    stored = 3 if name == "running" else spec["length"]  # "running": 3 of its 5 steps so far
    rewards = np.arange(1, stored + 1, dtype=np.float32)
    buf.add(log.chunk("x", 100, 0, stored, **spec, rewards=rewards))
    batch = buf.get_transitions(buf.get_episode_indices("x"), device="cpu")
    assert all(isinstance(v, torch.Tensor) for v in batch.values())
    expect_next = [log.steps["x", t][2] for t in range(stored)]
    assert batch["next_obs"][:, 0].tolist() == expect_next
    if name == "truncated":  # the final observation, not a reset one nor the last step's
        assert expect_next[-1] == 100 + TRUNC_OBS
    if name == "running":  # the newest observation, not done: bootstrap with gamma
        assert expect_next[-1] == 103
    assert batch["terminateds"].tolist() == (terminated or [False] * stored)
    assert batch["truncateds"].tolist() == (truncated or [False] * stored)
    assert batch["rewards"].tolist() == rewards.tolist()  # [B], TorchRL's [B, 1]
    assert batch["rewards"].shape == batch["terminateds"].shape == (stored,)


def test_sac_targets_on_torch_match_the_log():
    buf = EpisodeReplayBuffer(1_000, seed=3)
    log = _vector_stream(buf, 3, num_envs=3, chunk_len=4, adds=10)
    batch = buf.sample(64, n_step=1, gamma=0.99, device="cpu")
    _check_transitions(buf, log, batch, 1, 0.99)
    q_next = torch.full((64,), 10.0)
    target = batch["rewards"] + batch["discounts"] * ~batch["terminateds"] * q_next
    assert target.dtype == torch.float32
    done = batch["terminateds"] | batch["truncateds"]  # TorchRL's ("next", "done")
    assert (target[batch["terminateds"]] == batch["rewards"][batch["terminateds"]]).all()
    assert (
        target[done & ~batch["terminateds"]] > batch["rewards"][done & ~batch["terminateds"]]
    ).all()


# ------------------------------------------------------------------- (b) 64-step sequences
LENGTHS = [100, 64, 63, 30, 200]


def _long_episodes(buf):
    log = Log()
    buf.add(
        [
            log.chunk(f"e{i}", 1000 * i, 0, n, n, True, False, np.ones(n, np.float32))
            for i, n in enumerate(LENGTHS)
        ]
    )
    return log


@pytest.mark.parametrize("pad", [False, True], ids=["strict_length", "padded"])
def test_burn_in_sequences_match_the_log(pad):
    T, L, B = 64, 8, 48
    buf = EpisodeReplayBuffer(10_000, seed=1)
    _long_episodes(buf)
    b = buf.sample(B, batch_length_T=T, lookback=L, pad=pad, include_extra_model_outputs=True)
    firsts = b["obs"][:, L, 0].astype(int)
    episodes, starts = firsts // 1000, firsts % 1000
    if not pad:  # SliceSampler(strict_length=True)'s set: only episodes of >= 64 steps
        assert set(episodes.tolist()) <= {0, 1, 4}
    for r in range(B):
        e, s, n = int(episodes[r]), int(starts[r]), LENGTHS[episodes[r]]
        assert s + (0 if pad else T) <= n
        t = s - L + np.arange(L + T)
        valid = (t >= 0) & (t < n)
        assert b["mask"][r].tolist() == valid.tolist()
        assert b["is_lookback"][r].tolist() == [True] * L + [False] * T
        assert (b["obs"][r, valid, 0] == 1000 * e + t[valid]).all()
        assert (b["next_obs"][r, valid, 0] == 1000 * e + t[valid] + 1).all()
        assert (b["obs"][r, ~valid] == 0).all() and (b["indices"][r, ~valid] == -1).all()
        assert b["is_first"][r].tolist() == (valid & (t == 0)).tolist()  # InitTracker's is_init
        assert b["is_last"][r].tolist() == (valid & (t == n - 1)).tolist()
        assert b["is_terminated"][r].tolist() == b["is_last"][r].tolist()
        # the recurrent state to start the burn-in from: the first valid column's
        first = int(b["mask"][r].argmax())
        assert b["h"][r, first].tolist() == [1000 * e + t[first], 7.0]


def test_burn_in_trains_on_an_episode_start_that_torchrl_slices_leave_out():
    """SliceSampler(slice_len=L + T) never puts an episode's first L steps after the burn-in;
    sample(batch_length_T=T, lookback=L) does, with the burn-in padded (docs/replay.md)."""
    T, L = 4, 3
    buf = EpisodeReplayBuffer(100, seed=0)
    log = Log()
    buf.add(log.chunk("x", 0, 0, 6, 6, True, False, np.ones(6, np.float32)))  # 6 < L + T
    b = buf.sample(200, batch_length_T=T, lookback=L)
    starts = b["obs"][:, L, 0].astype(int)
    assert set(starts.tolist()) == {0, 1, 2}  # every start with T steps left
    short = starts < L  # TorchRL would never draw these rows: the burn-in is padded
    assert short.any() and not b["mask"][short, 0].any()
    # TorchRL's set of rows: those whose burn-in is whole (none here: 6 steps < L + T)
    assert not b["mask"][:, 0].any()


def test_running_episode_sequences_end_at_the_newest_step_then_continue():
    T, L = 64, 8
    buf, log = EpisodeReplayBuffer(10_000, seed=2), Log()
    rewards = np.ones(150, np.float32)
    buf.add(log.chunk("r", 9000, 0, 70, 150, True, False, rewards[:70]))
    b = buf.sample(300, batch_length_T=T, lookback=L)
    at_newest = b["obs"][:, -1, 0] == 9069
    assert at_newest.any()
    assert b["is_last"][at_newest, -1].all() and not b["is_terminated"][at_newest].any()
    assert (b["next_obs"][at_newest, -1, 0] == 9070).all()  # the latest observation
    buf.add(log.chunk("r", 9000, 70, 80, 150, True, False, rewards[70:]))
    b = buf.sample(300, batch_length_T=T, lookback=L)
    both = b["mask"][:, 1:] & b["mask"][:, :-1]
    assert (np.diff(b["obs"][:, :, 0], axis=1)[both] == 1).all()  # across the two chunks
    assert not (b["is_last"] & (b["obs"][:, :, 0] == 9069)).any()


# ------------------------------------------------------- (c) prioritized n-step with TD errors
def test_prioritized_n_step_loop_matches_the_log():
    alpha, gamma, n, B = 0.6, 0.9, 3, 32
    buf = PrioritizedEpisodeReplayBuffer(60, alpha=alpha, seed=0)
    raw = {}  # item -> priority, as a plain PER would keep it
    state = {"max": 1.0, "step": 0}

    def train_step(log, rng):
        for id_ in buf.get_episode_ids():  # new items start at the largest priority so far
            for i in buf.get_episode_indices(id_).tolist():
                raw.setdefault(i, state["max"])
        stored = set(np.concatenate([buf.get_episode_indices(i) for i in buf.get_episode_ids()]))
        for i in set(raw) - {int(i) for i in stored}:
            del raw[i]  # evicted
        beta = 0.4 + 0.6 * min(state["step"] / 20, 1.0)  # annealed to 1
        state["step"] += 1
        batch = buf.sample(B, n_step=n, gamma=gamma, beta=beta, device="cpu")
        _check_transitions(buf, log, batch, n, gamma)
        least = min(p**alpha for p in raw.values())
        expect = [(raw[i] ** alpha / least) ** -beta for i in batch["indices"].tolist()]
        np.testing.assert_allclose(batch["weights"].numpy(), expect, rtol=1e-5)
        assert float(batch["weights"].max()) <= 1.0
        q = torch.randn(B, requires_grad=True)
        td = batch["rewards"] + batch["discounts"] * ~batch["terminateds"] * 0.5 - q
        (batch["weights"] * td**2).mean().backward()
        buf.update_priorities(td.abs(), batch)  # grad tensor and the batch itself
        for i, p in zip(batch["indices"].tolist(), td.detach().abs().tolist()):
            raw[i] = max(p, 1e-12)  # a repeated item keeps its last priority
        state["max"] = max(state["max"], *td.detach().abs().tolist())
        assert buf.max_priority == pytest.approx(state["max"], rel=1e-6)

    _vector_stream(buf, 5, num_envs=2, chunk_len=4, adds=30, each=train_step)
    assert len(buf) <= 60 + 20  # the capacity evicted whole episodes along the way


def test_one_zero_td_error_shrinks_every_other_weight():
    """The 1e-12 floor is the smallest priority: TorchRL's eps=1e-8 shrinks weights less."""
    alpha, beta = 0.6, 0.4
    buf = PrioritizedEpisodeReplayBuffer(100, alpha=alpha, seed=0)
    log = Log()
    buf.add(log.chunk("x", 0, 0, 10, 10, True, False, np.zeros(10, np.float32)))
    items = buf.get_episode_indices("x")
    cases = {"zero": (0.0, 1e-12), "plus_1e-6": (1e-6, 1e-6)}
    for name, (add, least) in cases.items():
        buf.update_priorities(np.r_[0.0, np.ones(9)] + add, items)
        weights = buf.sample(64, beta=beta)["weights"]
        expect = ((1.0 + add) / least) ** (-alpha * beta)
        weights = weights.astype(np.float64)
        near = np.isclose(weights, expect, rtol=1e-6) | (weights == 1.0)
        assert near.all() and np.isclose(weights, expect, rtol=1e-6).any(), name
    # 1e-12 ** 0.24 ~ 0.0013 against 0.036 with 1e-6 added (docs/replay.md)
    assert ((1.0 / 1e-12) ** (-alpha * beta)) < 0.0014 < 0.036 < ((1.0 / 1e-6) ** (-alpha * beta))


def test_per_step_priorities_of_a_sequence_batch_go_through_the_mask():
    """TorchRL's PrioritizedSliceSampler updates every step; [B, T] arrays are refused here."""
    buf = PrioritizedEpisodeReplayBuffer(100, alpha=0.6, seed=0)
    log = Log()
    buf.add(log.chunk("x", 0, 0, 20, 20, True, False, np.ones(20, np.float32)))
    b = buf.sample(4, batch_length_T=5, lookback=2, beta=0.5)
    td = np.abs(np.random.default_rng(0).normal(size=b["mask"].shape)) + 0.1
    with pytest.raises(
        ValueError, match=r"shape \(4, 7\).*must be 1-d.*priorities\[m\], indices\[m\]"
    ):
        buf.update_priorities(td, b["indices"])
    buf.update_priorities(td[b["mask"]], b["indices"][b["mask"]])
    got = dict(zip(b["indices"][b["mask"]].tolist(), buf.get_priorities(b["indices"][b["mask"]])))
    last = dict(zip(b["indices"][b["mask"]].tolist(), td[b["mask"]].tolist()))
    assert got == pytest.approx(last)  # a step in two rows keeps its last priority


# ------------------------------------------------- a full buffer: never across an episode
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    capacity=st.integers(5, 50),
    num_envs=st.integers(1, 4),
    chunk_len=st.integers(1, 7),
    prioritized=st.booleans(),
    on_evicted=st.sampled_from(["restart", "drop"]),
)
def test_full_buffer_batches_never_cross_an_episode(
    seed, capacity, num_envs, chunk_len, prioritized, on_evicted
):
    """TorchRL's ring overwrites single steps (a slice may then span the write head); here
    whole episodes go, and every n-step window and sequence stays inside one episode."""
    if prioritized:
        buf = PrioritizedEpisodeReplayBuffer(capacity, alpha=0.7, seed=seed)
    else:
        buf = EpisodeReplayBuffer(capacity, seed=seed)

    def check(log, rng):
        n = int(rng.integers(1, 6))
        batch = buf.sample(8, n_step=n, gamma=0.9)
        _check_transitions(buf, log, batch, n, 0.9)
        if prioritized:
            buf.update_priorities(rng.random(8) * 5 + 0.1)
        for pad in (False, True):
            try:
                s = buf.sample(6, batch_length_T=3, lookback=2, pad=pad)
            except EmptyBufferError:
                continue
            for row in range(6):
                mask = s["mask"][row]
                ids, ts = buf.episode_steps(s["indices"][row][mask])
                assert len(set(ids.tolist())) == 1 and (np.diff(ts) == 1).all()
                for j, (id_, t) in enumerate(zip(ids, ts.tolist())):
                    obs, reward, next_obs = log.steps[id_, t]
                    assert s["obs"][row][mask][j, 0] == obs
                    assert s["next_obs"][row][mask][j, 0] == next_obs
                    assert s["rewards"][row][mask][j] == np.float32(reward)

    _vector_stream(
        buf,
        seed,
        num_envs=num_envs,
        chunk_len=chunk_len,
        adds=12,
        on_evicted=on_evicted,
        each=check,
    )


# ------------------------------------------------------------ a collector's traj ids as ids
@pytest.mark.parametrize(
    "make_id",
    [lambda: torch.tensor(3), lambda: ("run", torch.tensor(3))],
    ids=["tensor", "tuple-with-tensor"],
)
def test_a_tensor_traj_id_is_refused_not_split_into_episodes(make_id):
    """Tensors hash by identity: taken, each chunk of one trajectory would start an episode."""
    buf = EpisodeReplayBuffer(100, seed=0)
    log = Log()
    first = log.chunk(make_id(), 0, 0, 2, 4, True, False, np.ones(2, np.float32))
    with pytest.raises(TypeError, match=r"is (an array|a tuple holding an array).*int\(x\)"):
        buf.add([first])
    assert buf.get_num_episodes() == 0 and buf.get_num_timesteps() == 0


def test_an_int_traj_id_continues_its_episode():
    """What the refusal above tells users to do: ``int(traj_id)`` (numpy ints hash as ints)."""
    buf = EpisodeReplayBuffer(100, seed=0)
    log = Log()
    buf.add(log.chunk(int(torch.tensor(3)), 0, 0, 2, 4, True, False, np.ones(2, np.float32)))
    buf.add(log.chunk(np.int64(3), 0, 2, 2, 4, True, False, np.ones(2, np.float32)))
    assert buf.get_num_episodes() == 1
    batch = buf.get_transitions(buf.locate(3, 0), n_step=4, gamma=1.0)
    assert batch["n_step"].tolist() == [4] and batch["terminateds"].tolist() == [True]
