"""Session 51: an RL user moving PPO and DQN collection onto two runner actors.

Two runners of 4 CartPoles, 16 steps a call, one group for the module (starting actors costs
seconds): weights broadcast, seeds, ids and lookback across calls, the PPO rollout against
local runners, a central replay buffer checked against what each actor's envs did, weights a
policy cannot load, and a runner killed mid-request (last: it replaces an actor).
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

ray = pytest.importorskip("ray")
torch = pytest.importorskip("torch")

from episodes.converter import episodes_to_rollout  # noqa: E402
from episodes.distributed import RunnerContext, RunnerGroup, build_runner  # noqa: E402
from episodes.replay import EpisodeReplayBuffer  # noqa: E402

T = 16
SEED = 7
LOOKBACK = 3


class LoggedCartPole(gym.Wrapper):
    """Keeps ``obs -> (action, reward, next_obs, terminated)`` of every step it takes."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.log: dict[bytes, tuple[int, float, np.ndarray, bool]] = {}
        self.last: Any = None

    def reset(self, **kwargs: Any) -> Any:
        obs, info = self.env.reset(**kwargs)
        self.last = obs
        return obs, info

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        # CartPole's float observations do not repeat: one step leaves each.
        step = (int(action), float(reward), np.array(obs), bool(terminated))
        self.log[np.asarray(self.last).tobytes()] = step
        self.last = obs
        return obs, reward, terminated, truncated, info


def logged_cartpoles(ctx: RunnerContext) -> gym.vector.VectorEnv:
    return gym.vector.SyncVectorEnv([lambda: LoggedCartPole(gym.make("CartPole-v1"))] * 4)


class VersionedPolicy:
    """Goes right with probability ``p_right`` (broadcast) and records it with every step.

    ``set_weights`` takes ``{"p_right": p}`` (a KeyError for anything else); ``sleep`` slows
    each vector step (set through ``foreach_runner``).
    """

    def __init__(self, num_envs: int, seed: int | None):
        self.rng = np.random.default_rng(seed)  # its own generator: replayable in-process
        self.num_envs = num_envs
        self.p_right = 0.5
        self.sleep = 0.0

    def set_weights(self, weights: dict[str, Any]) -> None:
        self.p_right = float(weights["p_right"])

    def __call__(self, obs: np.ndarray) -> Any:
        time.sleep(self.sleep)
        actions = (self.rng.random(self.num_envs) < self.p_right).astype(np.int64)
        p = np.where(actions == 1, self.p_right, 1 - self.p_right)
        return actions, {
            "p_right": np.full(self.num_envs, self.p_right),
            "vf_preds": obs[:, 0].astype(np.float32),
            "action_logp": np.log(np.maximum(p, 1e-8)).astype(np.float32),
        }


def versioned_policy(env: gym.vector.VectorEnv, ctx: RunnerContext) -> VersionedPolicy:
    return VersionedPolicy(env.num_envs, ctx.seed)


def value_fn(obs: np.ndarray) -> np.ndarray:
    return np.asarray(obs)[:, 1].astype(np.float64)


def _env_logs(runner: Any, ctx: RunnerContext) -> list[dict[Any, Any]]:
    return [env.log for env in runner.env.envs]


def _rollout(chunks: Any) -> Any:
    rollout = episodes_to_rollout(chunks, gamma=0.99, value_fn=value_fn)
    # Normalized advantages would differ: one [T, 8] batch against two [T, 4] ones.
    rollout.storage.compute_returns(
        rollout.last_values, gamma=0.99, lam=0.95, normalize_advantage=False
    )
    return rollout


@pytest.fixture(scope="module")
def session(ray_local):
    """The group, and its first two PPO rounds beside two local runners' (same seeds)."""
    kwargs = {"len_lookback_buffer": LOOKBACK}
    with RunnerGroup(
        logged_cartpoles, versioned_policy, num_runners=2, seed=SEED, num_cpus_per_runner=0.5,
        runner_kwargs=kwargs,
    ) as group:  # fmt: skip
        contexts = [RunnerContext.create(seed=SEED, index=i, num_runners=2) for i in (0, 1)]
        local = [build_runner(logged_cartpoles, versioned_policy, c, **kwargs) for c in contexts]
        rounds = []
        for p_right in (0.3, 0.8):
            weights = {"p_right": p_right}
            for runner in local:
                runner.policy.set_weights(weights)
            batch = group.sample(T, weights=weights)
            rounds.append((batch, [runner.sample(T) for runner in local]))
        yield {"group": group, "rounds": rounds}


FIELDS = ["observations", "actions", "rewards", "dones", "values", "actions_log_prob"]


def test_ppo_rollout_of_the_group_equals_one_local_runner_per_actor(session) -> None:
    for batch, local in session["rounds"]:
        remote, *parts = [_rollout(batch), *(_rollout(chunks) for chunks in local)]
        for name in [*FIELDS, "returns", "advantages"]:
            joined = torch.cat([getattr(part.storage, name) for part in parts], dim=1)
            assert torch.equal(getattr(remote.storage, name), joined), name
        assert torch.equal(
            torch.as_tensor(remote.last_values),
            torch.cat([torch.as_tensor(part.last_values) for part in parts]),
        )


def test_runners_start_from_different_states(session) -> None:
    first, _ = session["rounds"][0]
    starts = {tuple(chunk.get_observations(0)) for chunk in first if chunk.t_started == 0}
    assert len(starts) == len([c for c in first if c.t_started == 0]) >= 8


def test_ids_t_started_and_lookback_continue_per_actor(session) -> None:
    group = session["group"]
    group.set_weights({"p_right": 0.5})
    previous: dict[Any, Any] = {}
    owner: dict[Any, int] = {}
    for _ in range(3):
        batch = group.sample(T)
        ids = [chunk.id_ for chunk in batch]
        assert len(ids) == len(set(ids))  # one chunk per episode and round
        for chunk in batch:
            runner = chunk.custom_data["runner_index"]
            assert owner.setdefault(chunk.id_, runner) == runner  # no id shared by actors
            before = previous.get(chunk.id_)
            if before is not None:
                assert chunk.t_started == before.t_started + len(before)
                lookback = chunk.get_observations(slice(-LOOKBACK, 0), neg_index_as_lookback=True)
                assert np.array_equal(lookback, before.get_observations(slice(-4, -1)))
            previous[chunk.id_] = chunk


def test_rows_recorded_before_a_broadcast_come_first_in_the_next_sample(session) -> None:
    # Next-step carry-over: a sub-env that reset less often than the others hands out, first
    # in its next chunk, transitions it recorded in an earlier call with that call's weights,
    # although the sample's weights_version is the new one. Recording the weights a step
    # acted with (here p_right) tells them apart.
    group = session["group"]
    old_rows = 0
    for p_right in (1.0, 0.0, 1.0, 0.0):
        batch = group.sample(T, weights={"p_right": p_right})
        assert {s.weights_version for s in batch.samples} == {group.weights_version}
        for chunk in batch:
            acted = np.asarray(chunk.get_extra_model_outputs("p_right"))
            sure = (acted == 0.0) | (acted == 1.0)  # p_right 0.5 before: either action
            assert np.array_equal(np.asarray(chunk.get_actions())[sure], acted[sure] == 1.0)
            if np.any(acted != p_right):  # only a chunk's first rows come from before
                k = int(np.argmax(acted == p_right)) if np.any(acted == p_right) else len(acted)
                assert np.all(acted[k:] == p_right)
                old_rows += k
    assert old_rows > 0


def test_the_vector_steps_window_acts_with_the_broadcast_weights_only() -> None:
    # A local runner records what its actor would (the PPO test above): no Ray needed here.
    context = RunnerContext.create(seed=SEED, index=1, num_runners=2)
    runner = build_runner(logged_cartpoles, versioned_policy, context, window="vector_steps")
    for p_right in (1.0, 0.0, 1.0, 0.0):
        runner.policy.set_weights({"p_right": p_right})
        for chunk in runner.sample(T):
            assert np.all(np.asarray(chunk.get_extra_model_outputs("p_right")) == p_right)


def test_dqn_buffer_fed_by_two_actors_holds_what_their_envs_did(session) -> None:
    group = session["group"]
    group.set_weights({"p_right": 0.5})
    buf = EpisodeReplayBuffer(capacity=100_000, seed=0)
    handed = 0
    for _ in range(4):
        batch = group.sample(T)
        buf.add(batch)  # chunks continue their episodes by id across calls
        handed += batch.env_steps
    assert buf.get_num_timesteps() == handed == 4 * 2 * 4 * T
    logs = group.foreach_runner(_env_logs)
    log = {
        obs: step for per_runner in logs for env_log in per_runner for obs, step in env_log.items()
    }
    # n-step windows, walked step by step through the actors' own logs (1 step included).
    for n_step in (1, 3):
        sampled = buf.sample(200, n_step=n_step, gamma=0.5)
        for i in range(200):
            assert log[sampled["obs"][i].tobytes()][0] == sampled["actions"][i]
            obs, total, terminated = sampled["obs"][i], 0.0, False
            for k in range(int(sampled["n_step"][i])):
                _, reward, obs, terminated = log[np.asarray(obs).tobytes()]
                total += 0.5**k * reward
            assert np.isclose(sampled["rewards"][i], total)
            assert np.array_equal(sampled["next_obs"][i], obs)
            assert bool(sampled["terminateds"][i]) == terminated


def test_metrics_count_what_was_handed_out(session) -> None:
    group = session["group"]
    group.get_metrics()  # starts the count over
    handed = 0
    for _ in range(2):
        batch = group.sample(T)
        handed += batch.env_steps
    metrics = group.get_metrics()
    assert metrics["num_env_steps"] == handed and metrics["num_samples"] == 4


def test_weights_a_policy_cannot_load_raise_and_good_ones_recover(session) -> None:
    group = session["group"]
    generations = group.generations
    with pytest.raises(ValueError, match="(?s)refused weights version.*KeyError: 'p_right'"):
        group.sample(4, weights={"p": 1.0})  # not what the policy takes
    # No runner was replaced (a fresh one would refuse them too); the next broadcast recovers.
    assert group.generations == generations
    batch = group.sample(4, weights={"p_right": 1.0})
    assert len(batch.samples) == 2 and not batch.lost
    # The kept runners may hand out carried-over steps of older weights first.
    steps = [(np.asarray(c.get_extra_model_outputs("p_right")), c.get_actions()) for c in batch]
    assert any((p == 1.0).any() for p, _ in steps)
    assert all((np.asarray(a)[p == 1.0] == 1).all() for p, a in steps)


def _slow(runner: Any, ctx: RunnerContext) -> None:
    runner.policy.sleep = 0.2 if ctx.index == 1 else 0.0


def test_a_runner_killed_mid_request_is_lost_whole_and_replaced(session) -> None:
    group = session["group"]
    group.foreach_runner(_slow)  # runner 1 still samples when it is killed
    generations = group.generations
    first = group.sample_async(T, weights={"p_right": 0.0}, timeout_s=60)
    assert [s.runner_index for s in first.samples] == [0] and group.num_in_flight == 1
    ray.kill(group.actors[1], no_restart=True)
    batch = group.sample_async(T, launch=False, timeout_s=60)
    assert batch.samples == [] and [lost.runner_index for lost in batch.lost] == [1]
    assert "ActorDiedError" in batch.lost[0].error
    assert group.generations == [generations[0], generations[1] + 1]
    assert group.num_in_flight == 0
    # The replacement acts with the current weights; the survivor carries on.
    batch = group.sample(4)
    assert [s.runner_index for s in batch.samples] == [0, 1] and not batch.lost
    fresh = [chunk for chunk in batch if chunk.custom_data["runner_index"] == 1]
    assert all(chunk.t_started == 0 for chunk in fresh)  # new episodes, new ids
    assert {int(a) for c in fresh for a in np.asarray(c.get_actions())} == {0}


class GlobalTorchPolicy:
    """Samples with torch's global generator, seeded in its factory (as examples/ppo_ray.py)."""

    def __init__(self, num_envs: int):
        self.num_envs = num_envs

    def __call__(self, obs: np.ndarray) -> Any:
        return torch.randint(0, 2, (self.num_envs,)).numpy(), {}


def global_torch_policy(env: gym.vector.VectorEnv, ctx: RunnerContext) -> GlobalTorchPolicy:
    torch.manual_seed(ctx.seed)
    return GlobalTorchPolicy(env.num_envs)


def _runner0_actions(policy_factory: Any, beside: bool) -> list[np.ndarray]:
    """Runner 0's actions over two calls, alone in the process or beside runner 1."""
    contexts = [RunnerContext.create(seed=SEED, index=i, num_runners=2) for i in (0, 1)]
    runners = [build_runner(logged_cartpoles, policy_factory, c) for c in contexts[: 1 + beside]]
    actions = []
    for _ in range(2):
        for index, runner in enumerate(runners):
            chunks = runner.sample(T)
            if index == 0:
                actions += [np.asarray(chunk.get_actions()) for chunk in chunks]
    return actions


@pytest.mark.parametrize(
    ("policy_factory", "replays"),
    [
        pytest.param(versioned_policy, True, id="own-generator-replays-beside-others"),
        pytest.param(global_torch_policy, False, id="global-generator-shared-in-process"),
    ],
)
def test_local_runners_replay_their_actors_only_with_a_policy_owned_generator(
    policy_factory, replays
) -> None:
    # An actor is a process of its own: what runner 0 records there is what it records alone.
    state = torch.random.get_rng_state()
    try:
        alone = _runner0_actions(policy_factory, beside=False)
        beside = _runner0_actions(policy_factory, beside=True)
    finally:
        torch.random.set_rng_state(state)
    same = len(alone) == len(beside) and all(map(np.array_equal, alone, beside))
    assert same == replays
