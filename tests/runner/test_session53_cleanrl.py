"""A CleanRL user's journey: the runner, the replay buffer and the converter against CleanRL's loop.

CleanRL's single-file scripts step a ``SyncVectorEnv`` themselves, log the returns
``RecordEpisodeStatistics`` reports, keep the true next observation at a truncation
(``real_next_obs``, from ``infos["final_obs"]`` in same-step mode) and, with gymnasium 1.x's
default next-step autoreset, would store the reset step as a transition (CleanRL's known bug).
Each test here runs that loop written out in plain Python, on the same seeds and the same
actions, as an independent log, and compares what the library hands out with it.
"""

from __future__ import annotations

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")
torch = pytest.importorskip("torch")

from gymnasium.vector import AutoresetMode  # noqa: E402

from episodes.converter import episodes_to_rollout  # noqa: E402
from episodes.replay import EpisodeReplayBuffer  # noqa: E402
from episodes.runner import EnvRunner, EpisodeTally, RandomPolicy  # noqa: E402
from episodes.spaces.contains import checker_for  # noqa: E402

MODES = {"next_step": AutoresetMode.NEXT_STEP, "same_step": AutoresetMode.SAME_STEP}
N = 3  # sub-envs
LIMIT = 12  # TimeLimit: most CartPole episodes under a random policy are cut here
SEED = 3
T = 20  # steps per sub-env per sample() call
CALLS = 3


def make_env(normalize: bool, env_id: str = "CartPole-v1", clip_action: bool = False):
    """CleanRL's ``make_env``: the per-env wrappers, statistics innermost (raw rewards)."""

    def thunk():
        env = gym.make(env_id, max_episode_steps=LIMIT)
        env = gym.wrappers.RecordEpisodeStatistics(env)
        if clip_action:
            env = gym.wrappers.ClipAction(env)
        if normalize:
            env = gym.wrappers.NormalizeReward(env, gamma=0.99)
            env = gym.wrappers.TransformReward(env, lambda r: float(np.clip(r, -10, 10)))
        return env

    return thunk


def make_envs(mode, normalize=False, **kwargs):
    thunks = [make_env(normalize, **kwargs) for _ in range(N)]
    return gym.vector.SyncVectorEnv(thunks, autoreset_mode=mode)


class CoinPolicy:
    """Actions from a seeded generator, one draw per vector step: both loops get the same ones."""

    def __init__(self, continuous: bool = False):
        self.rng, self.continuous = np.random.default_rng(1), continuous

    def __call__(self, obs):
        if self.continuous:  # beyond Pendulum's [-2, 2]: ClipAction clips what the env gets
            return self.rng.normal(0.0, 3.0, (len(obs), 1)).astype(np.float32), {}
        return (self.rng.random(len(obs)) < 0.5).astype(np.int64), {}


def cleanrl_loop(envs, policy, vector_steps):
    """CleanRL's loop in plain Python: logged returns and each sub-env's true transitions.

    Returns ``(logged, transitions, rows)``: ``logged[i]`` the ``(r, l)`` that
    ``RecordEpisodeStatistics`` reported for sub-env ``i`` in order, ``transitions[i]`` its
    ``(obs, action, reward, real_next_obs, terminated, truncated)`` without next-step reset
    steps, and ``rows`` how many rows CleanRL's own buffer would have added (one per sub-env
    and vector step, reset steps included).
    """
    mode = envs.metadata["autoreset_mode"]
    logged = [[] for _ in range(N)]
    transitions = [[] for _ in range(N)]
    obs, _ = envs.reset(seed=SEED)
    prev_done = np.zeros(N, bool)
    for _ in range(vector_steps):
        actions, _ = policy(obs)
        next_obs, rewards, terms, truncs, infos = envs.step(actions)
        real_next_obs = next_obs.copy()
        stats = infos
        if mode == AutoresetMode.SAME_STEP and "final_info" in infos:
            stats = infos["final_info"]  # per-env wrappers' ending infos
            for i in np.nonzero(infos["_final_obs"])[0]:
                real_next_obs[i] = infos["final_obs"][i]
        if "episode" in stats:
            for i in np.nonzero(stats["_episode"])[0]:
                logged[i].append((float(stats["episode"]["r"][i]), int(stats["episode"]["l"][i])))
        for i in range(N):
            if mode == AutoresetMode.NEXT_STEP and prev_done[i]:
                continue  # the reset step: obs of the old episode, action ignored, reward 0
            transitions[i].append(
                (obs[i], actions[i], float(rewards[i]), real_next_obs[i], terms[i], truncs[i])
            )
        prev_done = terms | truncs
        obs = next_obs
    return logged, transitions, vector_steps * N


def run(mode, normalize=False, policy=None, make_buffer=False, **kwargs):
    """The runner's side: CALLS x sample(T), the chunks, metrics and tally per call."""
    runner = EnvRunner(make_envs(mode, normalize, **kwargs), policy or CoinPolicy(), seed=SEED)
    tally, buf = EpisodeTally(), EpisodeReplayBuffer(10_000, seed=0)
    chunks, finished = [], []
    for _ in range(CALLS):
        sample = runner.sample(T)
        chunks.extend(sample)
        finished.extend(tally.add(sample))
        buf.add(sample)
    return runner, chunks, finished, buf


def hand(mode, normalize=False, policy=None, **kwargs):
    # more vector steps than the runner took: its carry-over is stepped but not handed out
    return cleanrl_loop(make_envs(mode, normalize, **kwargs), policy or CoinPolicy(), 200)


def per_env(finished):
    out = [[] for _ in range(N)]
    for e in finished:
        out[e.env_index].append(e)
    return out


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_metrics_and_tally_give_the_returns_cleanrl_logs(mode):
    runner, _, finished, _ = run(mode)
    logged, _, _ = hand(mode)
    metrics = runner.get_metrics()
    assert metrics["num_episodes"] == len(finished) > 2 * N
    by_env = per_env(finished)
    for i in range(N):
        mine = [(e.ret, e.length) for e in by_env[i]]
        assert mine == logged[i][: len(mine)]
        # what CleanRL reads from the per-env wrapper, in the ended episode's last info
        stats = [
            (float(e.last_info["episode"]["r"]), int(e.last_info["episode"]["l"]))
            for e in by_env[i]
        ]
        assert stats == mine
    want = sorted(x for i in range(N) for x in logged[i][: len(by_env[i])])
    assert sorted(zip(metrics["episode_returns"], metrics["episode_lengths"])) == want


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_normalize_reward_records_the_wrapped_rewards_and_raw_returns_stay_in_the_infos(mode):
    runner, chunks, finished, _ = run(mode, normalize=True)
    logged, transitions, _ = hand(mode, normalize=True)
    metrics = runner.get_metrics()
    raw = [r for i in range(N) for r, _ in logged[i]]
    assert set(raw) <= {float(LIMIT), *range(LIMIT)}  # CartPole's 1 a step, unnormalized
    by_env = per_env(finished)
    for i in range(N):
        # the tally and the metrics sum what the runner recorded: the normalized rewards
        wrapped = [t[2] for t in transitions[i]]
        start = 0
        for e in by_env[i]:
            assert e.ret == pytest.approx(sum(wrapped[start : start + e.length]))
            start += e.length
        # CleanRL's logged (raw) return is the last info's "episode" entry
        assert [float(e.last_info["episode"]["r"]) for e in by_env[i]] == [
            r for r, _ in logged[i][: len(by_env[i])]
        ]
    assert sorted(metrics["episode_returns"]) == pytest.approx(sorted(e.ret for e in finished))
    assert not set(metrics["episode_returns"]) & set(raw)


def stored_per_env(buf, chunks, **kwargs):
    """The buffer's transitions, sub-env by sub-env in time order (episodes go in as added)."""
    env_of = {c.id_: c.custom_data["env_index"] for c in chunks}
    out = [[] for _ in range(N)]
    for id_ in buf.get_episode_ids():
        batch = buf.get_transitions(buf.get_episode_indices(id_), **kwargs)
        out[env_of[id_]].append(batch)
    return [{k: np.concatenate([b[k] for b in batches]) for k in batches[0]} for batches in out]


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_replay_holds_cleanrl_transitions_with_real_next_obs_and_no_reset_steps(mode):
    _, chunks, _, buf = run(mode)
    _, transitions, rows = hand(mode)
    stored = stored_per_env(buf, chunks)
    for i in range(N):
        want = transitions[i][: CALLS * T]
        got = stored[i]
        assert len(got["obs"]) == len(want) == CALLS * T
        np.testing.assert_array_equal(got["obs"], np.stack([w[0] for w in want]))
        np.testing.assert_array_equal(got["actions"], [w[1] for w in want])
        np.testing.assert_array_equal(got["rewards"], [w[2] for w in want])
        # at a truncation, the true last observation (CleanRL's real_next_obs)
        np.testing.assert_array_equal(got["next_obs"], np.stack([w[3] for w in want]))
        # DQN's done flag: terminations only; truncations bootstrap
        np.testing.assert_array_equal(got["terminateds"], [bool(w[4]) for w in want])
        np.testing.assert_array_equal(got["truncateds"], [bool(w[5]) for w in want])
    assert sum(int(s["truncateds"].sum()) for s in stored) >= N
    if mode == AutoresetMode.NEXT_STEP:  # CleanRL's own buffer adds the reset steps too
        assert rows > sum(len(t) for t in transitions)


@pytest.mark.parametrize("n_step", [1, 3])
@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_n_step_targets_are_the_hand_sums(mode, n_step):
    gamma = 0.9
    _, chunks, _, buf = run(mode)
    _, transitions, _ = hand(mode)
    stored = stored_per_env(buf, chunks, n_step=n_step, gamma=gamma)
    held = CALLS * T  # a running episode's n-step stops at the last stored step
    for i in range(N):
        rows = transitions[i]
        for p in range(held):
            m = 1
            while m < n_step and p + m < held and not (rows[p + m - 1][4] or rows[p + m - 1][5]):
                m += 1
            last = rows[p + m - 1]
            want_r = sum(gamma**k * rows[p + k][2] for k in range(m))
            assert stored[i]["n_step"][p] == m
            assert stored[i]["rewards"][p] == pytest.approx(want_r, rel=1e-6)
            assert stored[i]["discounts"][p] == pytest.approx(gamma**m, rel=1e-6)
            np.testing.assert_array_equal(stored[i]["next_obs"][p], last[3])
            assert bool(stored[i]["terminateds"][p]) == bool(last[4])


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_ppo_storage_columns_are_cleanrls_without_reset_steps(mode):
    runner = EnvRunner(make_envs(mode), CoinPolicy(), seed=SEED)
    _, transitions, _ = hand(mode)
    zeros = {"vf_preds": np.zeros(N, np.float32), "action_logp": np.zeros(N, np.float32)}
    inner = runner.policy
    runner.policy = lambda obs: (inner(obs)[0], dict(zeros))
    for call in range(CALLS):
        rollout = episodes_to_rollout(
            runner.sample(T), gamma=0.99, value_fn=lambda o: np.zeros(len(o), np.float32)
        )
        s = rollout.storage
        for i in range(N):
            want = transitions[i][call * T : (call + 1) * T]
            np.testing.assert_array_equal(s.observations[:, i].numpy(), [w[0] for w in want])
            np.testing.assert_array_equal(s.actions[:, i, 0].numpy(), [w[1] for w in want])
            # V = 0: a truncation's bootstrap adds nothing, the rewards are the env's
            np.testing.assert_array_equal(s.rewards[:, i, 0].numpy(), [w[2] for w in want])
            dones = [bool(w[4] or w[5]) for w in want]
            np.testing.assert_array_equal(s.dones[:, i, 0].numpy().astype(bool), dones)


def test_random_policy_draws_what_cleanrls_seeded_action_space_draws():
    envs = make_envs(AutoresetMode.NEXT_STEP)
    policy = RandomPolicy(envs.action_space, seed=SEED)  # seeds envs.action_space itself
    mine = [policy(None)[0] for _ in range(5)]
    other = make_envs(AutoresetMode.NEXT_STEP)
    other.action_space.seed(SEED)  # CleanRL: envs.action_space.seed(seed)
    np.testing.assert_array_equal(mine, [other.action_space.sample() for _ in range(5)])


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_sac_on_pendulum_with_clip_action(mode):
    kwargs = {"env_id": "Pendulum-v1", "clip_action": True}
    _, chunks, finished, buf = run(mode, policy=CoinPolicy(continuous=True), **kwargs)
    _, transitions, _ = hand(mode, policy=CoinPolicy(continuous=True), **kwargs)
    stored = stored_per_env(buf, chunks)
    for i in range(N):
        want = transitions[i][: CALLS * T]
        # the policy's actions are recorded, before ClipAction clips them for the env
        np.testing.assert_array_equal(stored[i]["actions"], np.stack([w[1] for w in want]))
        assert np.abs(stored[i]["actions"]).max() > 2.0
        np.testing.assert_allclose(stored[i]["rewards"], [w[2] for w in want], rtol=1e-6)
        np.testing.assert_array_equal(stored[i]["next_obs"], np.stack([w[3] for w in want]))
        assert not stored[i]["terminateds"].any()  # Pendulum only truncates
        assert stored[i]["truncateds"].sum() == CALLS * T // LIMIT
    assert {e.length for e in finished} == {LIMIT}


class Float64Env(gym.Env):
    """An env with float64 observations, the case CleanRL's SAC/TD3 scripts retype."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float64)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, 2), {}

    def step(self, action):
        self.t += 1
        return self.np_random.uniform(-1, 1, 2), float(action[0]), False, self.t >= 5, {}


def test_cleanrl_retyped_observation_space_builds_chunks_or_says_why():
    envs = gym.vector.SyncVectorEnv([Float64Env for _ in range(2)])
    envs.single_observation_space.dtype = np.float32  # CleanRL's sac/td3/ddpg scripts do this
    runner = EnvRunner(envs, RandomPolicy(envs.action_space, seed=0), seed=0)
    chunks = runner.sample(4)  # the space's checks read np.dtype(space.dtype)
    for chunk in chunks:
        chunk.validate()
    assert sum(len(c) for c in chunks) == 8
    check = checker_for(envs.single_observation_space)  # the retyped space's own checks
    assert check(np.zeros(2, np.float32)) and not check(np.full(2, 5.0, np.float32))


@pytest.mark.filterwarnings("ignore:.*precision lowered")
def test_dtype_observation_wrapper_is_the_way_to_float32_observations():
    # what the quickstart's "Coming from CleanRL" says to use in place of retyping the space
    cast = lambda: gym.wrappers.DtypeObservation(Float64Env(), np.float32)  # noqa: E731
    envs = gym.vector.SyncVectorEnv([cast for _ in range(2)])
    runner = EnvRunner(envs, RandomPolicy(envs.action_space, seed=0), seed=0)
    buf = EpisodeReplayBuffer(100, seed=0)
    chunks = runner.sample(6)
    for chunk in chunks:
        chunk.validate()
    buf.add(chunks)
    batch = buf.sample(8)
    assert batch["obs"].dtype == batch["next_obs"].dtype == np.float32
    assert not batch["terminateds"].any()  # Float64Env only truncates


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_ppo_bootstraps_truncations_where_cleanrl_treats_them_as_terminations(mode):
    # CleanRL's PPO sets next_done = terminations | truncations and stops GAE there; the
    # converter adds gamma * V(final obs) to a truncated step's reward (done stays set).
    gamma = 0.9
    runner = EnvRunner(make_envs(mode), CoinPolicy(), seed=SEED)
    _, transitions, _ = hand(mode)
    zeros = {"vf_preds": np.zeros(N, np.float32), "action_logp": np.zeros(N, np.float32)}
    inner = runner.policy
    runner.policy = lambda obs: (inner(obs)[0], dict(zeros))
    finals = []
    value_fn = lambda o: (finals.append(np.asarray(o)), np.full(len(o), 2.0, np.float32))[1]  # noqa: E731
    s = episodes_to_rollout(runner.sample(T), gamma=gamma, value_fn=value_fn).storage
    for i in range(N):
        want = transitions[i][:T]
        bonus = [gamma * 2.0 if (w[5] and not w[4]) else 0.0 for w in want]
        np.testing.assert_allclose(
            s.rewards[:, i, 0].numpy(), [w[2] + b for w, b in zip(want, bonus)], rtol=1e-6
        )
        assert sum(bonus) > 0
    # V was asked for every truncation's real_next_obs (and the running episodes' last obs)
    asked = {np.asarray(o).tobytes() for o in np.concatenate(finals)}
    cut = [w[3] for i in range(N) for w in transitions[i][:T] if w[5] and not w[4]]
    assert {np.asarray(o).tobytes() for o in cut} <= asked


class Game(gym.Env):
    """An Atari-like game: 3 lives of 4 steps each, 1 point a step; the game ends with the last."""

    observation_space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {"lives": 3}

    def step(self, action):
        self.t += 1
        lives = 3 - self.t // 4
        return np.full(1, self.t, np.float32), 1.0, lives == 0, False, {"lives": lives}


class EpisodicLife(gym.Wrapper):
    """CleanRL's Atari ``EpisodicLifeEnv``: a lost life ends the episode the agent sees."""

    def reset(self, **kwargs):
        if getattr(self, "game_over", True):
            obs, info = self.env.reset(**kwargs)
        else:  # a no-op step: the game goes on
            obs, _, _, _, info = self.env.step(0)
        self.lives = info["lives"]
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lost = info["lives"] < self.lives
        self.lives = info["lives"]
        return obs, reward, terminated or lost, truncated, info


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_episodic_life_metrics_count_lives_and_game_returns_stay_in_the_infos(mode):
    game = lambda: EpisodicLife(gym.wrappers.RecordEpisodeStatistics(Game()))  # noqa: E731
    envs = gym.vector.SyncVectorEnv([game, game], autoreset_mode=mode)
    runner = EnvRunner(envs, RandomPolicy(envs.action_space, seed=0), seed=0)
    tally = EpisodeTally()
    finished = [e for _ in range(3) for e in tally.add(runner.sample(13))]
    metrics = runner.get_metrics()
    # a life is an episode here: 4 steps, then 3 (the no-op reset step took one), 3
    assert sorted(set(metrics["episode_lengths"])) == [3, 4]
    games = [float(e.last_info["episode"]["r"]) for e in finished if "episode" in e.last_info]
    assert games and set(games) == {12.0}  # CleanRL's log: whole games
    assert len(games) < len(finished)


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_num_vector_steps_times_num_envs_is_cleanrls_global_step(mode):
    class Counting(gym.vector.SyncVectorEnv):
        calls = 0

        def step(self, actions):
            Counting.calls += 1
            return super().step(actions)

    envs = Counting([make_env(False) for _ in range(N)], autoreset_mode=mode)
    runner = EnvRunner(envs, CoinPolicy(), seed=SEED)
    global_step = 0
    for _ in range(CALLS):
        runner.sample(T)
        metrics = runner.get_metrics()
        global_step += metrics["num_vector_steps"] * N
        # transitions: reset steps left out, carried-over ones (recorded, not handed out) in
        assert metrics["num_env_steps"] <= metrics["num_vector_steps"] * N
    assert global_step == Counting.calls * N >= CALLS * T * N
