"""Offline to online, end to end: a runner's dataset, replay buffers from it, online data after.

Every sampled transition is checked against a plain log the env keeps of what it did (no
library code involved): the observation carries the env's episode serial and time, so each
row names the step it must hold. Checked across capacities below and above the dataset,
``n_step`` 1 and 3, prioritized weights, sequences with lookback, online adds into the same
buffer (offline data evicted oldest first) and into a second buffer mixed half and half, a
save loaded in a fresh process, and the online data written back into the dataset.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import episodes
from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, NotADatasetError, dataset_info
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.runner import EnvRunner, RandomPolicy

from ._stats import chi_square_p

MAX_T = 8


class Tiny(gym.Env):
    """Box observations ``[serial, t, noise]``; some episodes end terminated, some truncated,
    every third one both at once (terminated at the time limit's step)."""

    observation_space = gym.spaces.Box(-1e6, 1e6, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, base, log):
        self.base, self.log, self.k = base, log, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.serial, self.t = self.base + self.k, 0
        self.k += 1
        obs = np.array([self.serial, 0, self.np_random.normal()], np.float32)
        self.log[self.serial] = {
            "obs": [obs],
            "actions": [],
            "rewards": [],
            "terminated": False,
            "truncated": False,
        }
        return obs, {}

    def step(self, action):
        self.t += 1
        serial = self.serial
        reward = 0.1 * self.t + float(action) + 0.01 * (serial % 100)
        obs = np.array([serial, self.t, self.np_random.normal()], np.float32)
        if serial % 3 == 0:
            terminated = self.t == MAX_T
        else:
            terminated = bool(self.np_random.random() < 0.15)
        truncated = self.t >= MAX_T
        rec = self.log[serial]
        rec["obs"].append(obs)
        rec["actions"].append(int(action))
        rec["rewards"].append(reward)
        rec["terminated"], rec["truncated"] = terminated, truncated
        return obs, reward, terminated, truncated, {}


def make_runner(base, log, seed, num_envs=3):
    env = gym.vector.SyncVectorEnv(
        [lambda i=i: Tiny(base + 1000 * i, log) for i in range(num_envs)]
    )
    rng = np.random.default_rng(seed)
    return EnvRunner(env, lambda obs: (rng.integers(0, 2, len(obs)), {}), seed=seed)


def note(chunks, held):
    """Per episode id: its env serial and how many of its steps the chunks handed out."""
    for chunk in chunks:
        if len(chunk):
            serial = int(chunk.get_observations(-1)[0])
            before = held.get(chunk.id_, (serial, 0))[1]
            held[chunk.id_] = (serial, max(before, chunk.t_started + len(chunk)))


def expected(log, serial, t, n, gamma, held_until):
    """The n-step transition at ``t`` from the log, for a buffer holding ``held_until`` steps."""
    rec = log[serial]
    length = len(rec["actions"])
    end = min(length, held_until)
    m = min(n, end - t)
    last = t + m == length  # a window reaching a held but unfinished end bootstraps there
    return {
        "obs": rec["obs"][t],
        "actions": rec["actions"][t],
        "rewards": sum(gamma**k * rec["rewards"][t + k] for k in range(m)),
        "next_obs": rec["obs"][t + m],
        "n_step": m,
        "discounts": gamma**m,
        "terminateds": rec["terminated"] and last,
        "truncateds": rec["truncated"] and last,
    }


def check_rows(buf, batch, log, held, n, gamma):
    """Every row of ``batch`` against the log; returns the rows' episode ids."""
    ids, ts = buf.episode_steps(batch["indices"])
    for i in range(len(ids)):
        serial, t = int(batch["obs"][i][0]), int(batch["obs"][i][1])
        assert held[ids[i]][0] == serial and ts[i] == t, (i, ids[i], serial, t)
        for key, want in expected(log, serial, t, n, gamma, held[ids[i]][1]).items():
            np.testing.assert_allclose(batch[key][i], want, rtol=1e-5, err_msg=f"{key} row {i}")
    return ids


def per_weights(buf, indices, alpha, beta):
    """PER weights ``(N P(i))^-beta / max_j (N P(j))^-beta`` from the buffer's priorities."""
    every = np.concatenate([buf.get_episode_indices(e) for e in buf.get_episode_ids()])
    powered = buf.get_priorities(every) ** alpha
    p = buf.get_priorities(indices) ** alpha / powered.sum()
    p_min = powered.min() / powered.sum()
    return (len(every) * p) ** -beta / (len(every) * p_min) ** -beta


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    """A runner's dataset of 300 steps (running episodes at its end), the log and the runner."""
    root = tmp_path_factory.mktemp("offon")
    log, held = {}, {}
    runner = make_runner(0, log, seed=0)
    with DatasetWriter(root / "offline") as writer:
        for _ in range(10):
            chunks = runner.sample(10)
            writer.write_many(chunks)
            note(chunks, held)
    return root, log, held, runner


def test_the_dataset_holds_every_kind_of_ending(offline):
    root, log, held, _ = offline
    ends = {(rec["terminated"], rec["truncated"]) for rec in log.values()}
    assert ends == {(True, False), (False, True), (True, True), (False, False)}
    assert dataset_info(root / "offline").num_steps == sum(n for _, n in held.values()) == 300


@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("capacity", [None, 100, 10_000])
def test_offline_transitions_match_the_log(offline, capacity, n, prioritized):
    root, log, held, _ = offline
    buf = EpisodeReplayBuffer.from_dataset(
        root / "offline", capacity=capacity, prioritized=prioritized, seed=1
    )
    assert buf.get_added_timesteps() == 300
    assert buf.get_num_timesteps() == (300 if capacity != 100 else 93)
    kw = {"beta": 0.5} if prioritized else {}
    if prioritized:  # priorities of our own, so the weights differ from item to item
        every = np.concatenate([buf.get_episode_indices(e) for e in buf.get_episode_ids()])
        buf.update_priorities(np.random.default_rng(0).random(len(every)) + 0.05, every)
    batch = buf.sample(256, n_step=n, gamma=0.9, **kw)
    check_rows(buf, batch, log, held, n, 0.9)
    if prioritized:
        want = per_weights(buf, batch["indices"], 1.0, 0.5)
        np.testing.assert_allclose(batch["weights"], want, rtol=1e-5)


def test_offline_sequences_with_lookback_match_the_log(offline):
    root, log, _, _ = offline
    buf = EpisodeReplayBuffer.from_dataset(root / "offline", seed=2)
    lookback, length = 2, 4
    batch = buf.sample(128, batch_length_T=length, lookback=lookback)
    for i in range(128):
        serial, t0 = (int(v) for v in batch["obs"][i, lookback, :2])
        rec = log[serial]
        for j in range(lookback + length):
            t = t0 - lookback + j
            assert batch["mask"][i, j] == (0 <= t < len(rec["actions"]) or j >= lookback)
            if not batch["mask"][i, j]:
                continue
            assert batch["obs"][i, j, :2].tolist() == [serial, t]
            assert batch["actions"][i, j] == rec["actions"][t]
            assert batch["rewards"][i, j] == pytest.approx(rec["rewards"][t], rel=1e-6)
            assert batch["next_obs"][i, j, 1] == t + 1
            assert batch["is_first"][i, j] == (t == 0)
            assert batch["is_lookback"][i, j] == (j < lookback)


def test_offline_sampling_is_uniform_over_steps(offline):
    root, _, _, _ = offline
    buf = EpisodeReplayBuffer.from_dataset(root / "offline", seed=123)
    every = np.concatenate([buf.get_episode_indices(e) for e in buf.get_episode_ids()])
    drawn = buf.sample(30_000)["indices"]
    counts = (drawn[:, None] == every[None, :]).sum(0)
    assert counts.sum() == 30_000
    assert chi_square_p(counts, np.full(len(every), 30_000 / len(every))) > 1e-3


def test_online_adds_into_the_same_buffer_evict_offline_data_oldest_first(offline, tmp_path):
    root, log0, held0, _ = offline
    log, held = dict(log0), dict(held0)
    buf = EpisodeReplayBuffer.from_dataset(root / "offline", capacity=200, seed=3)
    offline_ids = {e.id_ for e in dataset_info(root / "offline").episodes}
    model = list(buf.get_episode_ids())  # oldest first, as the plain model evicts them
    lengths = {id_: held[id_][1] for id_ in model}
    runner = make_runner(100_000, log, seed=5)
    shares = []
    for _ in range(6):
        chunks = runner.sample(10)
        note(chunks, held)
        buf.add(chunks)
        for chunk in chunks:
            if chunk.id_ not in lengths:
                model.append(chunk.id_)
            lengths[chunk.id_] = held[chunk.id_][1]
        while sum(lengths[i] for i in model) > 200 and len(model) > 1:
            model.pop(0)
        assert buf.get_episode_ids() == model
        batch = buf.sample(128, n_step=3, gamma=0.9)
        ids = check_rows(buf, batch, log, held, 3, 0.9)
        # the source of each row, from its episode id
        from_offline = np.fromiter((i in offline_ids for i in ids), bool, len(ids))
        shares.append(from_offline.mean())
    assert shares[0] > 0.5 > shares[-1]  # online data push the offline episodes out
    assert not offline_ids.isdisjoint(buf.get_evicted_ids())


def test_half_and_half_from_two_buffers_annealed(offline):
    root, log0, held0, _ = offline
    log, held = dict(log0), dict(held0)
    off = EpisodeReplayBuffer.from_dataset(root / "offline", prioritized=True, alpha=0.6, seed=4)
    on = PrioritizedEpisodeReplayBuffer(150, alpha=0.6, seed=5)
    runner = make_runner(200_000, log, seed=6)
    for it in range(8):
        chunks = runner.sample(10)
        note(chunks, held)
        on.add(chunks)
        n_off = round(64 * max(0.5 - 0.1 * it, 0.0))
        parts = []
        if n_off:  # sample(0) is a ValueError: an empty share is left out
            parts.append((off, off.sample(n_off, n_step=3, gamma=0.9, beta=0.4)))
        parts.append((on, on.sample(64 - n_off, n_step=3, gamma=0.9, beta=0.4)))
        for buf, part in parts:
            check_rows(buf, part, log, held, 3, 0.9)
            assert set(part) == set(parts[0][1])
            np.testing.assert_allclose(
                part["weights"], per_weights(buf, part["indices"], 0.6, 0.4), rtol=1e-5
            )
        batch = {k: np.concatenate([p[k] for _, p in parts]) for k in parts[0][1]}
        source = np.concatenate([np.full(len(p["indices"]), b is off) for b, p in parts])
        assert batch["obs"].dtype == np.float32 and batch["rewards"].dtype == np.float32
        assert source.sum() == n_off and len(batch["obs"]) == 64
        # each half's priorities go back to its own buffer (item ids overlap across buffers)
        td = np.abs(batch["rewards"]) + 0.1
        for buf, _ in parts:
            buf.update_priorities(td[source == (buf is off)])
    assert on.get_num_episodes_evicted() > 0
    assert off.get_num_timesteps() == 300  # the offline buffer keeps every step


def test_a_continuing_runner_joins_its_own_dataset_episodes(offline, tmp_path):
    root, log0, held0, runner = offline
    summaries = dataset_info(root / "offline").episodes
    running = {e.id_ for e in summaries if not (e.terminated or e.truncated)}
    log, held = runner.env.envs[0].log, dict(held0)  # the runner's envs keep logging there
    assert log is log0
    same = EpisodeReplayBuffer.from_dataset(root / "offline", capacity=10_000, seed=0)
    on = EpisodeReplayBuffer(10_000, seed=0)
    chunks = runner.sample(10)
    note(chunks, held)
    same.add(chunks)
    on.add(chunks)
    continued = {c.id_ for c in chunks if c.t_started > 0}
    assert continued and continued <= running
    assert same.get_num_timesteps() == 330 and on.get_num_timesteps() == 30
    for buf in (same, on):
        check_rows(buf, buf.sample(256, n_step=3, gamma=0.9), log, held, 3, 0.9)


def test_runner_ids_never_collide_across_processes(offline):
    """A dataset a runner recorded in another process shares no episode id with a new runner."""
    root, _, _, _ = offline
    code = (
        "import gymnasium as gym\n"
        "from episodes.runner import EnvRunner, RandomPolicy\n"
        "env = gym.make_vec('CartPole-v1', 2, vectorization_mode='sync')\n"
        "r = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)\n"
        "print(' '.join(sorted({c.id_ for c in r.sample(60)})))\n"
    )
    other = set(_child(code).split())
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    here = {
        c.id_ for c in EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(60)
    }
    ours = {e.id_ for e in dataset_info(root / "offline").episodes}
    assert other and here and not (other & here) and not (ours & here)


def _child(code, *args):
    """Runs ``code`` in a fresh interpreter that imports this ``episodes`` and these tests."""
    paths = {str(Path(episodes.__file__).resolve().parents[1]), str(Path(__file__).parents[2])}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sorted(paths))}
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


CHILD = """
import pickle, sys
import numpy as np
import tests.replay.test_session50_offon as t
from pathlib import Path
from episodes.io import DatasetWriter
from episodes.replay import EpisodeReplayBuffer
root = Path(sys.argv[1])
log, held = pickle.loads(Path(root, "ref.pkl").read_bytes())
off = EpisodeReplayBuffer.load(root / "off_save")
on = EpisodeReplayBuffer.load(root / "on_save")
for buf in (off, on):
    t.check_rows(buf, buf.sample(256, n_step=3, gamma=0.9, beta=0.4), log, held, 3, 0.9)
    weights = buf.sample(256, beta=0.4)
    np.testing.assert_allclose(
        weights["weights"], t.per_weights(buf, weights["indices"], 0.6, 0.4), rtol=1e-5)
runner = t.make_runner(300_000, log, seed=7)
new = []
for _ in range(5):
    chunks = runner.sample(10)
    t.note(chunks, held)
    on.add(chunks)
    new.extend(chunks)
    t.check_rows(on, on.sample(128, n_step=3, gamma=0.9, beta=0.4), log, held, 3, 0.9)
with DatasetWriter(root / "offline") as writer:  # the online data, appended to the dataset
    writer.write_many(new)
again = EpisodeReplayBuffer.from_dataset(root / "offline", seed=9)
t.check_rows(again, again.sample(512, n_step=3, gamma=0.9), log, held, 3, 0.9)
print(again.get_num_timesteps(), on.get_num_episodes_evicted())
"""


def test_save_load_in_a_fresh_process_then_continue(offline, tmp_path):
    root, log0, held0, _ = offline
    log, held = dict(log0), dict(held0)
    work = tmp_path / "work"
    shutil.copytree(root / "offline", work / "offline")
    off = EpisodeReplayBuffer.from_dataset(work / "offline", prioritized=True, alpha=0.6, seed=4)
    on = PrioritizedEpisodeReplayBuffer(150, alpha=0.6, seed=5)
    runner = make_runner(200_000, log, seed=6)
    for _ in range(6):
        chunks = runner.sample(10)
        note(chunks, held)
        on.add(chunks)
        for buf in (off, on):
            buf.sample(32, beta=0.4)
            buf.update_priorities(np.random.default_rng(len(held)).random(32) + 0.1)
    off.save(work / "off_save")
    on.save(work / "on_save")
    (work / "ref.pkl").write_bytes(pickle.dumps((log, held)))
    steps, evicted = _child(CHILD, str(work)).split()
    assert int(steps) == 300 + 5 * 30 and int(evicted) > on.get_num_episodes_evicted()


# ------------------------------------------------------------------ refusals that name the fix


def _episode(id_, n, start=0, **flags):
    return SingleAgentEpisode(
        id_,
        observations=[np.full(2, start + t, np.float32) for t in range(n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        t_started=start,
        len_lookback_buffer=0,
        **flags,
    )


@pytest.mark.parametrize(
    ("stored", "chunk", "words"),
    [
        pytest.param(
            _episode(3, 4),
            _episode(3, 2),
            "starts at t=0, but the buffer holds it up to t=4 (an overlap: if this chunk starts "
            "a new episode, give it an id of its own",
            id="a new episode under a running one's id",
        ),
        pytest.param(
            _episode(3, 4),
            _episode(3, 2, start=2),
            "starts at t=2, but the buffer holds it up to t=4 (an overlap",
            id="steps held already",
        ),
        pytest.param(
            _episode(0, 4, terminated=True),
            _episode(0, 2),
            "episode 0 is already done; cannot append a chunk (the buffer joins chunks by "
            "episode id: if this chunk starts a new episode, give it an id of its own",
            id="a new episode under a done one's id",
        ),
    ],
)
def test_a_reused_id_is_refused_with_words_about_ids(tmp_path, stored, chunk, words):
    with DatasetWriter(tmp_path / "d") as writer:
        writer.write(stored)
    buf = EpisodeReplayBuffer.from_dataset(tmp_path / "d", capacity=100, seed=0)
    before = buf.get_counters()
    with pytest.raises(ValueError) as error:
        buf.add(chunk)
    assert words in str(error.value)
    assert buf.get_num_timesteps() == 4 and buf.get_counters() == before


def test_a_gap_says_nothing_about_ids(tmp_path):
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("a", 4))
    with pytest.raises(ValueError, match=r"starts at t=6, but the buffer holds it up to t=4$"):
        buf.add(_episode("a", 2, start=6))


def test_from_dataset_of_a_save_names_load_and_its_episodes(tmp_path):
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("a", 4, terminated=True))
    buf.save(tmp_path / "save")
    with pytest.raises(NotADatasetError) as error:
        EpisodeReplayBuffer.from_dataset(tmp_path / "save")
    words = str(error.value)
    assert "is a saved replay buffer" in words and "EpisodeReplayBuffer.load(" in words
    assert repr(str(tmp_path / "save" / "episodes")) in words
    rebuilt = EpisodeReplayBuffer.from_dataset(tmp_path / "save" / "episodes")
    assert rebuilt.get_episode_ids() == ["a"]
