"""Converter: episodes -> RolloutStorage equals the step-by-step add_transition path bit for
bit, and bootstraps truncated / terminated / ongoing episodes as hand-computed."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.converter import ColumnKeys, episodes_to_batch, episodes_to_rollout
from episodes.rollout import RolloutStorage, Transition

KEYS = ColumnKeys(distribution=("logits",))
GAMMA = 0.5


def value_fn(obs):
    # A deterministic "critic": V(o) = 10 * o[0], in float32 for one observation as for a batch
    # (numpy 1 computed 10.0 * a 0-d float32 array in float64).
    return np.float32(10.0) * np.asarray(obs, np.float32)[..., 0]


class Chunker:
    """Builds per-env chunk lists with known data; every env gets exactly T steps."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.counter = 0

    def _obs(self):
        self.counter += 1
        return np.asarray([self.counter / 100.0, -1.0], np.float32)

    def episode(self, env, lookback_from=None):
        if lookback_from is not None:
            return lookback_from.cut(len_lookback_buffer=2)
        ep = SingleAgentEpisode(observation_space=gym.spaces.Box(-5, 5, (2,), np.float32))
        ep.add_env_reset(self._obs())
        ep.custom_data["env_index"] = env
        return ep

    def step(self, ep, **flags):
        ep.add_env_step(
            self._obs(),
            int(self.rng.integers(3)),
            float(self.rng.normal()),
            extra_model_outputs={
                "vf_preds": float(self.rng.normal()),
                "action_logp": float(-self.rng.random()),
                "logits": self.rng.normal(size=3).astype(np.float32),
            },
            **flags,
        )


def scripted_chunks(seed=0, numpy=False):
    """3 envs x 6 steps: env0 terminated(2)+truncated(3)+ongoing(1); env1 a previous chunk's
    continuation, ongoing; env2 truncated exactly at the window end."""
    c = Chunker(seed)
    groups = []
    # env 0
    a = c.episode(0)
    c.step(a)
    c.step(a, terminated=True)
    b = c.episode(0)
    for i in range(3):
        c.step(b, truncated=i == 2)
    d = c.episode(0)
    c.step(d)
    groups.append([a, b, d])
    # env 1: a continuation chunk with lookback, ongoing at the end
    prev = c.episode(1)
    for _ in range(3):
        c.step(prev)
    cont = c.episode(1, lookback_from=prev)
    cont.custom_data["env_index"] = 1
    for _ in range(6):
        c.step(cont)
    groups.append([cont])
    # env 2: truncated on the last step of the window
    e = c.episode(2)
    for i in range(6):
        c.step(e, truncated=i == 5)
    groups.append([e])
    if numpy:
        for group in groups:
            for chunk in group:
                chunk.to_numpy()
    return groups


def reference_storage(groups, gamma):
    """The step-by-step path: walk each env's chunks one step at a time, add_transition."""
    num_envs, horizon = len(groups), sum(len(ch) for ch in groups[0])
    steps = []  # steps[n] = list of per-step dicts
    last_values = torch.zeros(num_envs, 1)
    for n, group in enumerate(groups):
        env_steps = []
        for chunk in group:
            for i in range(len(chunk)):
                last = i == len(chunk) - 1
                reward = np.float64(chunk.get_rewards(i))
                if last and chunk.is_truncated:
                    reward = reward + gamma * np.float64(value_fn(chunk.get_observations(-1)))
                env_steps.append(
                    dict(
                        obs=np.asarray(chunk.get_observations(i)),
                        action=int(chunk.get_actions(i)),
                        reward=reward,
                        done=bool(last and chunk.is_done),
                        value=np.float64(chunk.get_extra_model_outputs("vf_preds", i)),
                        logp=np.float64(chunk.get_extra_model_outputs("action_logp", i)),
                        logits=np.asarray(chunk.get_extra_model_outputs("logits", i)),
                    )
                )
        if not group[-1].is_done:
            last_values[n, 0] = float(value_fn(group[-1].get_observations(-1)))
        steps.append(env_steps)
    storage = RolloutStorage(
        "rl",
        num_envs,
        horizon,
        (2,),
        (1,),
        distribution_params=((3,),),
        actions_dtype=torch.int64,
    )
    for t in range(horizon):
        row = [steps[n][t] for n in range(num_envs)]
        tr = Transition()
        tr.observations = torch.from_numpy(np.stack([r["obs"] for r in row]))
        tr.actions = torch.tensor([[r["action"]] for r in row])
        tr.rewards = torch.tensor([r["reward"] for r in row], dtype=torch.float64).float()
        tr.dones = torch.tensor([r["done"] for r in row])
        tr.values = torch.tensor([[r["value"]] for r in row], dtype=torch.float64).float()
        tr.actions_log_prob = torch.tensor([r["logp"] for r in row], dtype=torch.float64).float()
        tr.distribution_params = (torch.from_numpy(np.stack([r["logits"] for r in row])),)
        storage.add_transition(tr)
    return storage, last_values


FIELDS = ["observations", "actions", "rewards", "dones", "values", "actions_log_prob"]


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equals_add_transition_path_bit_for_bit(seed, numpy):
    groups = scripted_chunks(seed, numpy)
    flat = [chunk for group in groups for chunk in group]
    rollout = episodes_to_rollout(flat, gamma=GAMMA, value_fn=value_fn, keys=KEYS)
    reference, ref_last = reference_storage(groups, GAMMA)
    for name in FIELDS:
        ours, theirs = getattr(rollout.storage, name), getattr(reference, name)
        assert ours.dtype == theirs.dtype and torch.equal(ours, theirs), name
    assert torch.equal(rollout.storage.distribution_params[0], reference.distribution_params[0])
    assert torch.equal(rollout.last_values, ref_last)
    rollout.storage.compute_returns(rollout.last_values, 0.99, 0.95)
    reference.compute_returns(ref_last, 0.99, 0.95)
    assert torch.equal(rollout.storage.returns, reference.returns)
    assert torch.equal(rollout.storage.advantages, reference.advantages)


def _episode(rewards, *, terminated=False, truncated=False, final_obs=1.0):
    n = len(rewards)
    return SingleAgentEpisode(
        observations=[np.asarray([0.0], np.float32)] * n + [np.asarray([final_obs], np.float32)],
        actions=[0] * n,
        rewards=list(rewards),
        terminated=terminated,
        truncated=truncated,
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.3] * n, "action_logp": [0.0] * n},
    )


def _returns(groups, *, lam=1.0):
    rollout = episodes_to_rollout(groups, gamma=GAMMA, value_fn=value_fn, keys=ColumnKeys())
    rollout.storage.compute_returns(rollout.last_values, GAMMA, lam, normalize_advantage=False)
    return rollout.storage.returns[:, :, 0].T.tolist()


def test_bootstrap_hand_computed():
    # gamma = 0.5, lambda = 1: returns are discounted reward sums plus gamma^k * V(bootstrap).
    # V(final obs) = 10 * 1.0 = 10.
    truncated = [_episode([1, 1, 1], truncated=True)]
    terminated = [_episode([1, 1, 1], terminated=True)]
    ongoing = [_episode([1, 1, 1])]
    mixed = [_episode([1], terminated=True), _episode([1, 1])]
    returns = _returns([truncated, terminated, ongoing, mixed])
    assert returns[0] == pytest.approx([3.0, 4.0, 6.0])  # 1 + .5(1 + .5(1 + .5 * 10))
    assert returns[1] == pytest.approx([1.75, 1.5, 1.0])  # terminal: V = 0
    assert returns[2] == pytest.approx([3.0, 4.0, 6.0])  # ongoing: last_values = V(o_T)
    assert returns[3] == pytest.approx([1.0, 4.0, 6.0])  # the done stops the sum at t=0


def test_truncation_uses_the_true_final_value_not_rsl_rl_approximation():
    ep = _episode([0.0], truncated=True, final_obs=2.0)
    rollout = episodes_to_rollout([ep], gamma=GAMMA, value_fn=value_fn)
    # ours: r + gamma * V(o_T) = 0 + 0.5 * 20; rsl_rl would add gamma * V(o_{T-1}) = 0.5 * 0.3
    assert rollout.storage.rewards.item() == pytest.approx(10.0)


def test_terminated_and_truncated_is_terminated_not_bootstrapped():
    calls = []

    def counting_value_fn(obs):
        calls.append(np.asarray(obs).shape[0])
        return value_fn(obs)

    both = _episode([1.0, 1.0], terminated=True, truncated=True, final_obs=2.0)
    rollout = episodes_to_rollout([both], gamma=GAMMA, value_fn=counting_value_fn)
    # Terminated wins: no gamma * V(final obs) = 0.5 * 20 is added to the last reward.
    assert rollout.storage.rewards[:, 0, 0].tolist() == [1.0, 1.0]
    assert rollout.storage.dones[:, 0, 0].tolist() == [False, True]
    assert sum(calls) == 0
    batch = episodes_to_batch([both])
    assert batch["terminateds"].tolist()[-1] and batch["dones"].tolist()[-1]


def test_stored_bootstrap_value_and_missing_value():
    ep = _episode([1.0, 1.0])
    ep.custom_data["bootstrap_value"] = 4.0
    rollout = episodes_to_rollout([ep], gamma=GAMMA)
    assert rollout.last_values.item() == 4.0
    with pytest.raises(ValueError, match="bootstrap value"):
        episodes_to_rollout([_episode([1.0], truncated=True)], gamma=GAMMA)


def test_uneven_envs_need_per_chunk_layout():
    groups = [[_episode([1.0, 1.0], terminated=True)], [_episode([1.0], terminated=True)]]
    with pytest.raises(ValueError, match="per_chunk"):
        episodes_to_rollout(groups, gamma=GAMMA, value_fn=value_fn)
    rollout = episodes_to_rollout(groups, gamma=GAMMA, value_fn=value_fn, layout="per_chunk")
    assert rollout.mask.tolist() == [[True, True], [True, False]]
    assert rollout.storage.dones[:, :, 0].tolist() == [[False, True], [True, True]]


def test_per_chunk_ongoing_columns_bootstrap_like_per_env():
    long, short = _episode([1.0, 1.0, 1.0]), _episode([1.0])
    rollout = episodes_to_rollout([long, short], gamma=GAMMA, value_fn=value_fn, layout="per_chunk")
    rollout.storage.compute_returns(rollout.last_values, GAMMA, 1.0, normalize_advantage=False)
    returns = rollout.storage.returns[:, :, 0]
    assert returns[:, 0].tolist() == pytest.approx([3.0, 4.0, 6.0])
    assert returns[0, 1].item() == pytest.approx(6.0)  # closed with a bootstrapped done step


def test_obs_fn_and_distillation():
    ep = SingleAgentEpisode(
        observations=[0, 1, 2],
        actions=[1, 0],
        rewards=[0.0, 0.0],
        len_lookback_buffer=0,
        terminated=True,
        extra_model_outputs={"teacher": [0, 1]},
    )

    def one_hot(obs):
        return np.eye(3, dtype=np.float32)[obs]

    rollout = episodes_to_rollout(
        [ep],
        gamma=GAMMA,
        training_type="distillation",
        obs_fn=one_hot,
        keys=ColumnKeys(privileged_actions="teacher"),
    )
    assert rollout.storage.observations.shape == (2, 1, 3)
    batches = list(rollout.storage.generator())
    assert len(batches) == 2 and batches[1].privileged_actions.flatten().tolist() == [1]


def test_missing_extra_key_is_a_clear_error():
    ep = _episode([1.0], terminated=True)
    with pytest.raises(KeyError, match="logits"):
        episodes_to_rollout([ep], gamma=GAMMA, keys=ColumnKeys(distribution=("logits",)))


def test_flat_batch():
    groups = scripted_chunks(0, numpy=True)
    flat = [chunk for group in groups for chunk in group]
    batch = episodes_to_batch(flat)
    rows = sum(len(c) for c in flat)
    assert batch["obs"].shape == (rows, 2) and batch["next_obs"].shape == (rows, 2)
    assert batch["dones"].sum() == sum(c.is_done for c in flat)
    assert set(batch) >= {"actions", "rewards", "vf_preds", "action_logp", "logits", "eps_id"}
    # Rows 2..4 are the second episode of env 0: each next_obs is the following row's obs.
    np.testing.assert_array_equal(batch["obs"][3:5], batch["next_obs"][2:4])
    assert not np.array_equal(batch["obs"][2], batch["next_obs"][1])  # an episode border


def test_runner_chunks_convert(tmp_path):
    from episodes.runner import EnvRunner

    env = gym.make_vec("CartPole-v1", 4, vectorization_mode="sync")
    rng = np.random.default_rng(0)

    def policy(obs):
        n = len(obs)
        logits = rng.normal(size=(n, 2)).astype(np.float32)
        extras = {
            "vf_preds": np.zeros(n, np.float32),
            "action_logp": np.full(n, -0.7, np.float32),
            "logits": logits,
        }
        return rng.integers(2, size=n), extras

    runner = EnvRunner(env, policy, len_lookback_buffer=2, seed=0)
    for _ in range(2):
        chunks = runner.sample(32)
        rollout = episodes_to_rollout(
            chunks, gamma=0.99, value_fn=lambda o: np.zeros(len(o)), keys=KEYS
        )
        assert rollout.storage.observations.shape == (32, 4, 4)
        assert rollout.storage.step == 32
    env.close()


def test_distillation_needs_no_bootstrap_value():
    ongoing = SingleAgentEpisode(
        observations=[0, 1],
        actions=[1],
        rewards=[0.0],
        len_lookback_buffer=0,
        extra_model_outputs={"teacher": [0]},
    )
    rollout = episodes_to_rollout(
        [ongoing],
        gamma=GAMMA,
        training_type="distillation",
        keys=ColumnKeys(privileged_actions="teacher"),
    )
    assert rollout.last_values.abs().sum().item() == 0.0


def test_hand_built_chunks_refill_a_given_storage():
    """storage= on the general path: cleared and refilled in place, as a fresh one would be."""
    first = [_episode([1.0, 2.0], terminated=True), _episode([3.0, 4.0], truncated=True)]
    second = [_episode([5.0, 6.0]), _episode([7.0, 8.0], terminated=True, final_obs=2.0)]
    rollout = episodes_to_rollout(first, gamma=GAMMA, value_fn=value_fn, keys=ColumnKeys())
    storage = rollout.storage
    rollout.storage.compute_returns(rollout.last_values, GAMMA, 0.95)
    again = episodes_to_rollout(
        second, gamma=GAMMA, value_fn=value_fn, keys=ColumnKeys(), storage=storage
    )
    fresh = episodes_to_rollout(second, gamma=GAMMA, value_fn=value_fn, keys=ColumnKeys())
    assert again.storage is storage
    assert torch.equal(again.last_values, fresh.last_values)
    for name, tensor in fresh.storage.tensors.items():
        if name not in ("returns", "advantages"):  # computed later, by compute_returns
            assert torch.equal(storage.tensors[name], tensor), name


def _plain_episode(hidden: bool = False, seed: int = 0) -> SingleAgentEpisode:
    rng = np.random.default_rng(seed)
    ep = SingleAgentEpisode(observations=[np.zeros(2, np.float32)], len_lookback_buffer=0)
    for _ in range(3):
        extras = {"vf_preds": 0.5, "action_logp": -0.1}
        if hidden:
            extras.update(h=rng.standard_normal((1, 4)), mean=rng.standard_normal(1))
        ep.add_env_step(np.zeros(2, np.float32), 1, 1.0, extra_model_outputs=extras)
    return ep


def test_no_distribution_keys_store_no_distribution_parameters():
    """The storage fell back to a made-up Gaussian: two zero tensors handed out as the old
    mean and std (a KL against std 0 is inf)."""
    rollout = episodes_to_rollout(
        [_plain_episode()], gamma=0.99, value_fn=lambda o: np.zeros(len(o))
    )
    storage = rollout.storage
    assert storage.field_names["distribution_params"] == ()
    storage.compute_returns(rollout.last_values, 0.99, 0.95)
    assert tuple(next(storage.mini_batch_generator(1, 1)).old_distribution_params) == ()
    again = episodes_to_rollout(
        [_plain_episode(seed=1)], gamma=0.99, value_fn=lambda o: np.zeros(len(o)), storage=storage
    )
    assert again.storage is storage


def test_a_float64_storage_keeps_hidden_states_in_float64():
    """Hidden states went through float32 (errors of 3e-8) while every other field was exact."""
    ep = _plain_episode(hidden=True)
    keys = ColumnKeys(actor_hidden=("h",), distribution=("mean",))
    storage = episodes_to_rollout(
        [ep], gamma=0.9, value_fn=lambda o: np.zeros(len(o)), keys=keys, dtype=torch.float64
    ).storage
    want = torch.from_numpy(np.asarray(ep.get_extra_model_outputs("h")))
    assert storage.saved_hidden_states_actor[0].dtype == torch.float64
    assert torch.equal(storage.saved_hidden_states_actor[0][:, :, 0], want)
