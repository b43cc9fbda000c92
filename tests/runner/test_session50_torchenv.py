"""An rsl_rl user's torch vector env, recorded by the runner and checked against their own loop.

``PointMass`` steps ``N`` point masses with torch only (no numpy while stepping), hands out
Isaac Lab's observation groups ``{"policy": [N, 4], "critic": [N, 6]}``, ends episodes by
leaving the box (terminated) and by a random per-episode time limit (truncated), sometimes both
in one step, reports ``infos["time_outs"]`` and a step-wide ``infos["log"]`` as Isaac Lab does,
and autoresets in next-step or same-step mode. Variants: one observation buffer updated in
place every step (as simulators keep their buffers), non-contiguous observations, uint8 or
int64 done flags, a policy returning float32 actions to a float64 env.

The reference is the loop an rsl_rl user writes: step the same env with the same policy draws,
write ``[T, N]`` tensors per step, bootstrap a time-out with ``V`` of the true final observation
(terminated wins when both flags are set, as docs/contract.md section 10 says), and run GAE in
plain torch loops in float64. Everything recorded is compared bit for bit; where a value is
computed by another batch of the critic (a bootstrap value from a smaller batch) or by another
order of float64 operations (GAE), it is compared to 1e-12, which float64 rounding over 16
steps stays far inside.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from episodes.converter import ColumnKeys, episodes_to_rollout
from episodes.rollout import unpad_trajectories
from episodes.runner import EnvRunner

N, T, GAMMA, LAM = 256, 16, 0.99, 0.95
MODES = ["NextStep", "SameStep"]


@pytest.fixture(autouse=True)
def _one_thread() -> Any:
    """Small float64 matmuls: threads only contend on a shared machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class PointMass:
    """``N`` point masses in 2-D, stepped with torch alone (see the module docstring)."""

    def __init__(self, num_envs: int = N, mode: str = "NextStep", **variant: Any):
        self.num_envs = num_envs
        self.metadata = {"autoreset_mode": AutoresetMode(mode)}
        self.flag_dtype = variant.get("flag_dtype", torch.bool)
        self.inplace = variant.get("inplace", False)
        self.strided = variant.get("strided", False)
        self.column_rewards = variant.get("column_rewards", False)
        box = gym.spaces.Box(-np.inf, np.inf, (4,), np.float64)
        self.single_observation_space = gym.spaces.Dict(
            {"policy": box, "critic": gym.spaces.Box(-np.inf, np.inf, (6,), np.float64)}
        )
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float64)
        self.observation_space = gym.vector.utils.batch_space(
            self.single_observation_space, num_envs
        )
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self.gen = torch.Generator().manual_seed(0)
        zeros = torch.zeros(num_envs, 2, dtype=torch.float64)
        self.pos, self.vel = zeros, zeros.clone()
        self.steps = torch.zeros(num_envs, dtype=torch.long)
        self.limit = torch.zeros(num_envs, dtype=torch.long)
        self.needs_reset = torch.zeros(num_envs, dtype=torch.bool)
        self.buffers: dict[str, torch.Tensor] | None = None

    def _fresh(self, which: torch.Tensor) -> None:
        pos = torch.rand(self.num_envs, 2, generator=self.gen, dtype=torch.float64) * 1.6 - 0.8
        limit = torch.randint(3, 10, (self.num_envs,), generator=self.gen)
        self.pos = torch.where(which[:, None], pos, self.pos)
        self.vel = torch.where(which[:, None], 0.0, self.vel)
        self.steps = torch.where(which, 0, self.steps)
        self.limit = torch.where(which, limit, self.limit)

    def _obs(self) -> dict[str, torch.Tensor]:
        policy = torch.cat([self.pos, self.vel], 1)
        frac = (self.steps / self.limit).to(torch.float64)[:, None]
        critic = torch.cat([policy, frac, self.limit[:, None].to(torch.float64) / 10], 1)
        if self.strided:  # every other column of a wider tensor; a transposed copy
            policy = torch.stack([policy, -policy], 2)[..., 0]
            critic = critic.t().contiguous().t()
        if not self.inplace:
            return {"policy": policy, "critic": critic}
        if self.buffers is None:
            self.buffers = {"policy": policy.clone(), "critic": critic.clone()}
        self.buffers["policy"].copy_(policy)
        self.buffers["critic"].copy_(critic)
        return self.buffers  # the same dict and tensors every step

    def reset(self, *, seed: Any = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            self.gen.manual_seed(int(seed))
        self._fresh(torch.ones(self.num_envs, dtype=torch.bool))
        self.needs_reset.zero_()
        return self._obs(), {}

    def step(self, actions: torch.Tensor) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        push = actions.to(torch.float64).clamp(-1, 1)
        self.vel = self.vel + 0.3 * push
        self.pos = self.pos + 0.3 * self.vel
        self.steps = self.steps + 1
        rewards = 1.0 - (self.pos**2).sum(1) - 0.01 * (push**2).sum(1)
        terminated = (self.pos.abs() > 1.0).any(1)
        truncated = self.steps >= self.limit
        infos: dict[str, Any] = {}
        if self.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP:
            resetting = self.needs_reset.clone()
            self._fresh(resetting)
            rewards = torch.where(resetting, 0.0, rewards)
            terminated &= ~resetting
            truncated &= ~resetting
            self.needs_reset = terminated | truncated
        else:
            done = terminated | truncated
            infos["final_obs"] = {key: v.clone() for key, v in self._obs().items()}
            infos["_final_obs"] = done
            self._fresh(done)
        infos["time_outs"] = truncated.clone()
        infos["log"] = {"mean_pos": self.pos.abs().mean()}  # a 0-d tensor: the whole step's
        if self.column_rewards:
            rewards = rewards[:, None]
        flags = terminated.to(self.flag_dtype), truncated.to(self.flag_dtype)
        return self._obs(), rewards, *flags, infos


class Model(torch.nn.Module):
    """A Gaussian actor on the "policy" group (an MLP head, GRU or LSTM), a critic on "critic"."""

    def __init__(self, recurrent: str | None = None, hidden: int = 8):
        super().__init__()
        torch.manual_seed(1)
        self.recurrent, self.hidden = recurrent, hidden
        rnn = {"gru": torch.nn.GRU, "lstm": torch.nn.LSTM}.get(recurrent or "")
        self.rnn = rnn(4, hidden) if rnn else None
        self.mu = torch.nn.Linear(hidden if rnn else 4, 2)
        self.log_std = torch.nn.Parameter(torch.full((2,), -0.5))
        self.v = torch.nn.Sequential(
            torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)
        )
        self.double()

    def value(self, obs: Any) -> torch.Tensor:
        return self.v(obs["critic"])[:, 0].detach()


class Sampler:
    """The runner's policy: one call per vector step, draws from its own generator."""

    def __init__(self, model: Model, out_dtype: torch.dtype | None = None):
        self.model, self.gen, self.out_dtype = model, torch.Generator().manual_seed(5), out_dtype

    @torch.no_grad()
    def act(self, obs: Any, state: Any = None) -> tuple[Any, dict[str, Any], Any]:
        feats = obs["policy"]
        new_state = None
        if self.model.rnn is not None:
            out, new_state = self.model.rnn(feats[None], state)
            feats = out[0]
        mu = self.model.mu(feats)
        std = self.model.log_std.exp().expand_as(mu)
        actions = mu + std * torch.randn(mu.shape, generator=self.gen, dtype=mu.dtype)
        extras = {
            "vf_preds": self.model.value(obs),
            "action_logp": torch.distributions.Normal(mu, std).log_prob(actions).sum(1),
            "mu": mu,
            "sigma": std.clone(),
        }
        if state is not None:  # the state entering the step, env axis first
            for key, leaf in zip("hc", state if isinstance(state, tuple) else (state,)):
                extras[key] = leaf.transpose(0, 1).clone()
        return actions if self.out_dtype is None else actions.to(self.out_dtype), extras, new_state

    def __call__(self, obs: Any) -> Any:
        return self.act(obs)[:2]


class RecurrentSampler(Sampler):
    def initial_state(self, n: int) -> Any:
        h = torch.zeros(1, n, self.model.hidden, dtype=torch.float64)
        return (h, h.clone()) if self.model.recurrent == "lstm" else h

    def __call__(self, obs: Any, state: Any) -> Any:  # type: ignore[override]
        return self.act(obs, state)


def reference(mode: str, calls: int, recurrent: str | None = None, **variant: Any) -> list:
    """The user's own loop: per env, its transitions in order, cut into ``calls`` windows."""
    env = PointMass(mode=mode, **variant)
    model = Model(recurrent)
    policy = RecurrentSampler(model) if recurrent else Sampler(model, variant.get("out_dtype"))
    obs, _ = env.reset(seed=0)
    state = policy.initial_state(N) if recurrent else None
    steps: list[dict[str, torch.Tensor]] = []  # whole [N, ...] tensors per vector step
    reset_step = torch.zeros(N, dtype=torch.bool)  # next-step: this step only resets
    starts = torch.ones(N, dtype=torch.bool)
    for _ in range(T * calls * 3 // 2 + 8):  # episodes of 3+ steps: at most 1/4 reset steps
        if recurrent:
            fresh = policy.initial_state(N)
            pairs = zip(fresh, state) if recurrent == "lstm" else [(fresh, state)]
            reset = [torch.where(starts[None, :, None], f, s) for f, s in pairs]
            state = tuple(reset) if recurrent == "lstm" else reset[0]
        actions, extras, state = policy.act(obs, state)
        obs = {key: value.clone() for key, value in obs.items()}  # before an in-place step
        next_obs, rewards, terminated, truncated, infos = env.step(actions)
        rewards, terminated, truncated = rewards.reshape(N), terminated.bool(), truncated.bool()
        final = infos["final_obs"] if mode == "SameStep" else next_obs
        final_v = model.value(final)
        bootstrap = (truncated & ~terminated).double()  # terminated wins
        done = terminated | truncated
        steps.append(
            {"obs_p": obs["policy"], "obs_c": obs["critic"], "a": actions, "d": done}
            | {"r": rewards + GAMMA * final_v * bootstrap, "next_v": final_v, "held": ~reset_step}
            | extras
        )
        if mode == "NextStep":
            starts, reset_step = reset_step, done
        else:
            starts = done
        obs = next_obs
    stacked = {key: torch.stack([step[key] for step in steps]) for key in steps[0]}
    rows = torch.stack([stacked["held"][:, i].nonzero()[: calls * T, 0] for i in range(N)], 1)
    envs = torch.arange(N)
    windows = []
    for c in range(calls):
        at = rows[c * T : (c + 1) * T]  # [T, N]: each env's transitions, in order
        out = {key: value[at, envs] for key, value in stacked.items()}
        out["last"] = torch.where(out["d"][-1], 0.0, out["next_v"][-1])
        windows.append(out)
    return windows


def gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, last: torch.Tensor):
    """GAE in a plain loop, float64."""
    advantages = torch.zeros_like(rewards)
    next_adv, next_value = torch.zeros_like(last), last
    for t in reversed(range(rewards.shape[0])):
        alive = 1.0 - dones[t].double()
        delta = rewards[t] + GAMMA * next_value * alive - values[t]
        next_adv = delta + GAMMA * LAM * alive * next_adv
        advantages[t], next_value = next_adv, values[t]
    return advantages, advantages + values


def run(mode: str, calls: int, recurrent: str | None = None, **variant: Any) -> list:
    env = PointMass(mode=mode, **variant)
    model = Model(recurrent)
    if recurrent:
        runner = EnvRunner(env, RecurrentSampler(model), seed=0, state_batch_axis=1)
    else:
        runner = EnvRunner(env, Sampler(model, variant.get("out_dtype")), seed=0)
    hidden = ("h", "c") if recurrent == "lstm" else ("h",) if recurrent else ()
    keys = ColumnKeys(distribution=("mu", "sigma"), actor_hidden=hidden)
    rollouts = []
    for _ in range(calls):
        chunks = runner.sample(T)
        rollouts.append(
            episodes_to_rollout(chunks, gamma=GAMMA, value_fn=model.value, keys=keys,
                                dtype=torch.float64)
        )  # fmt: skip
    return rollouts


def assert_storage_matches(rollout: Any, ref: dict[str, torch.Tensor]) -> None:
    st = rollout.storage
    exact = {
        "observations/policy": ref["obs_p"],
        "observations/critic": ref["obs_c"],
        "actions": ref["a"].to(st.actions.dtype),
        "dones": ref["d"],
        "values": ref["vf_preds"],
        "actions_log_prob": ref["action_logp"],
        "distribution_params/0": ref["mu"],
        "distribution_params/1": ref["sigma"],
    }
    for name, want in exact.items():
        got = st.tensors[name]
        assert torch.equal(got.reshape(want.shape), want), name
    # bootstrap values come from the critic on another batch: last bits may differ
    torch.testing.assert_close(st.rewards[..., 0], ref["r"], atol=1e-12, rtol=0)
    torch.testing.assert_close(rollout.last_values[:, 0], ref["last"], atol=1e-12, rtol=0)
    st.compute_returns(rollout.last_values, GAMMA, LAM, normalize_advantage=False)
    advantages, returns = gae(ref["r"], ref["vf_preds"], ref["d"], ref["last"])
    torch.testing.assert_close(st.advantages[..., 0], advantages, atol=1e-12, rtol=0)
    torch.testing.assert_close(st.returns[..., 0], returns, atol=1e-12, rtol=0)


VARIANTS = {
    "plain": {},
    "obs_buffer_updated_in_place": {"inplace": True},
    "non_contiguous_obs": {"strided": True},
    "uint8_dones": {"flag_dtype": torch.uint8},
    "int64_dones": {"flag_dtype": torch.int64},
    "float32_actions_on_float64_env": {"out_dtype": torch.float32},
}


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("mode", MODES)
def test_three_calls_match_the_users_own_loop(mode: str, variant: str) -> None:
    refs = reference(mode, 3, **VARIANTS[variant])
    rollouts = run(mode, 3, **VARIANTS[variant])
    both_flags = 0
    for rollout, ref in zip(rollouts, refs):
        assert rollout.storage.valid is None
        assert_storage_matches(rollout, ref)
        both_flags += int(rollout.storage.dones.sum())
    assert both_flags > N  # episodes end, by both causes, within every window


@pytest.mark.parametrize("recurrent", ["gru", "lstm"])
@pytest.mark.parametrize("mode", MODES)
def test_recurrent_states_and_generator_match_the_users_loop(mode: str, recurrent: str) -> None:
    refs = reference(mode, 2, recurrent)
    rollouts = run(mode, 2, recurrent)
    for rollout, ref in zip(rollouts, refs):
        st = rollout.storage
        assert_storage_matches(rollout, ref)
        for leaf, key in zip(st.saved_hidden_states_actor, "hc"):  # [T, layers, N, hidden]
            assert torch.equal(leaf.transpose(1, 2), ref[key])  # the state entering each step
        for t in range(1, T):  # a fresh state at every episode start
            fresh = ref["h"][t][ref["d"][t - 1]]
            assert torch.equal(fresh, torch.zeros_like(fresh))
        groups = 4
        batches = st.recurrent_mini_batch_generator(groups, num_epochs=1)
        for g, batch in enumerate(batches):
            envs = range(g * N // groups, (g + 1) * N // groups)
            cuts = [(e, t0, t1) for e in envs for t0, t1 in _trajectories(ref["d"][:, e])]
            masks = torch.zeros(T, len(cuts), dtype=torch.bool)
            for j, (_, t0, t1) in enumerate(cuts):
                masks[: t1 - t0, j] = True
            assert torch.equal(batch.masks, masks)
            first = batch.hidden_states[0]
            first = first if recurrent == "gru" else first[0]
            want = torch.stack([ref["h"][t0, e] for e, t0, _ in cuts], 1)
            assert torch.equal(first, want)
            obs = batch.observations["policy"]
            for j, (e, t0, t1) in enumerate(cuts):
                assert torch.equal(obs[: t1 - t0, j], ref["obs_p"][t0:t1, e])


def _trajectories(dones: torch.Tensor) -> list[tuple[int, int]]:
    cuts, start = [], 0
    for t, done in enumerate(dones.tolist()):
        if done or t == len(dones) - 1:
            cuts.append((start, t + 1))
            start = t + 1
    return cuts


def _ppo_update(
    model: Model, storage: Any, recurrent: bool = False, check_replay: bool = True
) -> float:
    """One epoch of a plain PPO loss over the generator's batches, with backward.

    The recurrent batches replay each trajectory from its stored first state: before any step
    of the optimizer the replayed log-probabilities are the recorded ones (ratio 1).
    """
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    if recurrent:
        batches = storage.recurrent_mini_batch_generator(4, num_epochs=1)
    else:
        batches = storage.mini_batch_generator(4, num_epochs=1)
    total = 0.0
    for k, batch in enumerate(batches):
        obs = batch.observations["policy"]
        if recurrent:
            assert model.rnn is not None
            out, _ = model.rnn(obs, batch.hidden_states[0])
            mu = unpad_trajectories(model.mu(out), batch.masks)  # [T, envs, 2]
        else:
            mu = model.mu(obs)
        dist = torch.distributions.Normal(mu, model.log_std.exp())
        logp = dist.log_prob(batch.actions).sum(-1, keepdim=True)
        if recurrent and k == 0 and check_replay:
            held = slice(None) if batch.valid is None else batch.valid  # no reset steps
            torch.testing.assert_close(logp.detach()[held], batch.old_actions_log_prob[held])
        ratio = (logp - batch.old_actions_log_prob).exp()
        values = model.v(batch.observations["critic"])
        if recurrent:
            values = unpad_trajectories(values, batch.masks)
        loss = -(ratio * batch.advantages).mean() + (values - batch.returns).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += float(loss.detach())
    return total


INFERENCE = {
    "sample_under_inference_mode": ({0, 1, 2}, set()),
    "first_sample_only": ({0}, set()),
    "sample_and_convert_under_it": ({0, 1, 2}, {0, 1, 2}),
    "convert_only": (set(), {0, 1, 2}),
}


@pytest.mark.parametrize("case", list(INFERENCE))
@pytest.mark.parametrize("mode", MODES)
def test_inference_mode_anywhere_then_training_outside(mode: str, case: str) -> None:
    """Tensors made under ``torch.inference_mode`` never reach autograd through the storage."""
    sample_calls, convert_calls = INFERENCE[case]
    env, model = PointMass(64, mode=mode), Model()
    runner = EnvRunner(env, Sampler(model), seed=0)
    for call in range(3):
        with torch.inference_mode(call in sample_calls):
            chunks = runner.sample(8)
        with torch.inference_mode(call in convert_calls):
            rollout = episodes_to_rollout(chunks, gamma=GAMMA, value_fn=model.value)
            rollout.storage.compute_returns(rollout.last_values, GAMMA, LAM)
        assert np.isfinite(_ppo_update(model, rollout.storage))


@pytest.mark.parametrize("mode", MODES)
def test_recurrent_policy_under_inference_mode_trains_through_the_generator(mode: str) -> None:
    class InferencePolicy(RecurrentSampler):
        @torch.inference_mode()
        def __call__(self, obs: Any, state: Any) -> Any:  # type: ignore[override]
            return self.act(obs, state)

    model = Model("gru")
    # vector_steps: every transition of a call is recorded with the weights of that call
    runner = EnvRunner(
        PointMass(64, mode=mode), InferencePolicy(model), seed=0, state_batch_axis=1,
        window="vector_steps",
    )  # fmt: skip
    keys = ColumnKeys(actor_hidden=("h",))
    for _ in range(2):
        chunks = runner.sample(8)
        rollout = episodes_to_rollout(
            chunks, gamma=GAMMA, value_fn=model.value, keys=keys, dtype=torch.float64
        )
        rollout.storage.compute_returns(rollout.last_values, GAMMA, LAM)
        assert np.isfinite(_ppo_update(model, rollout.storage, recurrent=True))
        assert model.rnn is not None and model.rnn.weight_hh_l0.grad is not None


def test_vector_steps_window_is_the_masked_rsl_rl_loop() -> None:
    """``window="vector_steps"``: rsl_rl's [T, N] loop, next-step reset steps masked out."""
    model, other = Model(), Model()
    runner = EnvRunner(PointMass(64), Sampler(model), seed=0, window="vector_steps")
    env, policy = PointMass(64), Sampler(other)
    obs, _ = env.reset(seed=0)
    reset_step = torch.zeros(64, dtype=torch.bool)
    for _ in range(3):
        rollout = episodes_to_rollout(runner.sample(T), gamma=GAMMA, value_fn=model.value)
        st = rollout.storage
        rows: dict[str, list[torch.Tensor]] = {key: [] for key in ("p", "a", "r", "d", "held")}
        for _ in range(T):
            actions, _ = policy(obs)
            seen = obs["policy"].clone()
            obs, rewards, terminated, truncated, _ = env.step(actions)
            boot = rewards + GAMMA * other.value(obs) * (truncated & ~terminated)
            held = ~reset_step
            for key, value in zip(rows, (seen, actions, boot, terminated | truncated, held)):
                rows[key].append(value)
            reset_step = terminated | truncated
        ref = {key: torch.stack(value) for key, value in rows.items()}
        held = ref["held"]
        assert st.valid is not None and torch.equal(st.valid, held)
        # observations and actions keep the env's and policy's float64; the rest is float32
        assert torch.equal(st.observations["policy"], ref["p"])
        assert torch.equal(st.actions[held], ref["a"][held])
        assert bool((st.actions[~held] == 0).all())  # float outputs of a reset step: 0
        assert torch.equal(st.dones[..., 0], ref["d"] | ~held)
        torch.testing.assert_close(st.rewards[..., 0][held], ref["r"][held].float())
        assert bool((st.rewards[..., 0][~held] == 0).all())
        flat = sum(len(b.actions) for b in st.mini_batch_generator(4, num_epochs=1))
        assert flat == int(held.sum()) < 64 * T


@pytest.mark.parametrize("window", ["transitions", "vector_steps"])
@pytest.mark.parametrize("mode", MODES)
def test_storages_and_chunks_kept_across_later_calls_stay_as_they_were(
    mode: str, window: str
) -> None:
    """The storage shares the runner's blocks; later calls must not write into them."""
    model = Model()
    runner = EnvRunner(PointMass(64, mode=mode), Sampler(model), seed=0, window=window)
    kept = []
    for _ in range(5):
        chunks = runner.sample(8)
        rollout = episodes_to_rollout(chunks, gamma=GAMMA, value_fn=model.value)
        rollout.storage.compute_returns(rollout.last_values, GAMMA, LAM)
        tensors = {name: t.clone() for name, t in rollout.storage.tensors.items()}
        obs = [chunk.get_observations()["policy"].copy() for chunk in chunks]
        kept.append((rollout.storage, tensors, chunks, obs))
    assert kept[0][0].shared  # the case worth checking: fields that are the blocks' rows
    for storage, tensors, chunks, obs in kept:
        for name, tensor in storage.tensors.items():
            assert torch.equal(tensor, tensors[name]), name
        for chunk, before in zip(chunks, obs):
            np.testing.assert_array_equal(chunk.get_observations()["policy"], before)


class InPlaceInfos(PointMass):
    """Isaac Lab's ``extras["time_outs"]``: one tensor, overwritten every step."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.time_outs = torch.zeros(self.num_envs, dtype=torch.bool)
        self.returns = torch.zeros(self.num_envs, dtype=torch.float64)

    def step(self, actions: torch.Tensor) -> Any:
        obs, rewards, terminated, truncated, infos = super().step(actions)
        self.time_outs.copy_(infos["time_outs"])
        infos["time_outs"] = self.time_outs
        done = terminated | truncated
        self.returns += rewards
        infos["episode"] = {"r": torch.where(done, self.returns, 0.0)}
        infos["_episode"] = done.clone()
        self.returns = torch.where(done, 0.0, self.returns)
        return obs, rewards, terminated, truncated, infos


@pytest.mark.parametrize("mode", MODES)
def test_info_tensors_overwritten_in_place_are_recorded_per_step(mode: str) -> None:
    runner = EnvRunner(InPlaceInfos(32, mode=mode), Sampler(Model()), seed=0)
    seen = 0
    for _ in range(2):
        for chunk in runner.sample(T):
            infos = chunk.get_infos()
            steps = [bool(info["time_outs"]) for info in infos[1:] if "time_outs" in info]
            if mode == "NextStep":  # a step's infos are its own: the time-out of that step
                assert steps == [False] * (len(chunk) - 1) + [bool(chunk.is_truncated)]
                if chunk.is_done and chunk.t_started == 0:  # the whole episode
                    assert infos[-1]["episode"]["r"] == pytest.approx(chunk.get_return())
                    seen += 1
            else:  # same-step: an ending step's infos open the next episode
                assert not any(steps[: len(chunk) - 1])
    assert mode == "SameStep" or seen > 10


@pytest.mark.parametrize(
    ("column", "field"), [("column_rewards", "rewards"), ("column_flags", "terminated")]
)
def test_reward_or_flags_of_shape_n_by_1_are_a_clear_error(column: str, field: str) -> None:
    class ColumnFlags(PointMass):
        def step(self, actions: torch.Tensor) -> Any:
            obs, rewards, terminated, truncated, infos = super().step(actions)
            return obs, rewards, terminated[:, None], truncated[:, None], infos

    env = ColumnFlags(8) if column == "column_flags" else PointMass(8, column_rewards=True)
    with pytest.raises(
        ValueError,
        match=rf"the env's {field}: got shape \(8, 1\), expected \(8,\) "
        r"\(one per sub-env\); squeeze its last axis",
    ):
        EnvRunner(env, Sampler(Model()), seed=0).sample(2)


def test_observation_normalisation_through_obs_fn() -> None:
    """A running-mean normaliser as ``obs_fn``: storage and ``value_fn`` see normalised obs."""
    model = Model()
    runner = EnvRunner(PointMass(64, mode="SameStep"), Sampler(model), seed=0)
    chunks = runner.sample(8)
    mean, std = (
        torch.full((4,), 0.1, dtype=torch.float64),
        torch.full((4,), 2.0, dtype=torch.float64),
    )
    made: list[torch.Tensor] = []
    given: list[torch.Tensor] = []

    def normalise(obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        made.append((obs["policy"] - mean) / std)
        return {"policy": made[-1], "critic": obs["critic"]}

    def value_fn(obs: dict[str, torch.Tensor]) -> torch.Tensor:
        given.append(obs["policy"])
        return model.value(obs)

    rollout = episodes_to_rollout(
        chunks, gamma=GAMMA, value_fn=value_fn, obs_fn=normalise, dtype=torch.float64
    )
    raw = chunks.take("observations")["policy"]
    assert torch.equal(rollout.storage.observations["policy"], (raw - mean) / std)
    assert len(given) == 1 and any(given[0].reshape(-1).equal(m.reshape(-1)) for m in made)


class FinalObsBuffer(PointMass):
    """Same-step final observations handed out in one buffer, overwritten every step."""

    def step(self, actions: torch.Tensor) -> Any:
        obs, rewards, terminated, truncated, infos = super().step(actions)
        if "final_obs" in infos:
            if self.finals is None:
                self.finals = {key: v.clone() for key, v in infos["final_obs"].items()}
            for key, buffer in self.finals.items():
                buffer.copy_(infos["final_obs"][key])
            infos["final_obs"] = self.finals
        return obs, rewards, terminated, truncated, infos

    finals: dict[str, torch.Tensor] | None = None


class ActionsViewObs(Sampler):
    """Actions that are a view of the env's observation buffer, which the step overwrites."""

    def __call__(self, obs: Any) -> Any:
        _, extras, _ = self.act(obs)
        return obs["policy"][:, :2], extras


@pytest.mark.parametrize(
    ("env_kind", "policy_kind"),
    [(FinalObsBuffer, Sampler), (PointMass, ActionsViewObs)],
    ids=["final_obs_buffer", "actions_view_the_obs_buffer"],
)
@pytest.mark.parametrize("mode", MODES)
def test_buffers_reused_in_place_record_what_fresh_tensors_record(
    mode: str, env_kind: type, policy_kind: type
) -> None:
    rollouts = []
    for env in (PointMass(64, mode=mode), env_kind(64, mode=mode, inplace=True)):
        model = Model()
        policy = policy_kind(model)
        runner = EnvRunner(env, policy, seed=0)
        rollouts.append(
            [
                episodes_to_rollout(runner.sample(8), gamma=GAMMA, value_fn=model.value)
                for _ in "abc"
            ]
        )
    for fresh, reused in zip(*rollouts):
        assert torch.equal(fresh.last_values, reused.last_values)
        for name, tensor in fresh.storage.tensors.items():
            assert torch.equal(tensor, reused.storage.tensors[name]), name


REFERENCE_FIELDS = {
    "observations/policy": "obs_p",
    "observations/critic": "obs_c",
    "actions": "a",
    "dones": "d",
    "values": "vf_preds",
    "actions_log_prob": "action_logp",
}


@pytest.mark.parametrize("sizes", [[5, 3, 8], [1] * 16], ids=["5_3_8", "sixteen_ones"])
@pytest.mark.parametrize("recurrent", [None, "lstm"])
@pytest.mark.parametrize("mode", MODES)
def test_calls_of_any_sizes_resume_into_the_users_one_window(
    mode: str, recurrent: str | None, sizes: list[int]
) -> None:
    """Calls resume where the last one stopped: their storages laid end to end are the loop's."""
    ref = reference(mode, 1, recurrent)[0]
    model = Model(recurrent)
    if recurrent:
        runner = EnvRunner(
            PointMass(mode=mode), RecurrentSampler(model), seed=0, state_batch_axis=1
        )
    else:
        runner = EnvRunner(PointMass(mode=mode), Sampler(model), seed=0)
    keys = ColumnKeys(actor_hidden=("h", "c") if recurrent else ())
    parts = [
        episodes_to_rollout(
            runner.sample(k), gamma=GAMMA, value_fn=model.value, keys=keys, dtype=torch.float64
        ).storage
        for k in sizes
    ]
    for name, key in REFERENCE_FIELDS.items():
        laid = torch.cat([part.tensors[name] for part in parts])
        assert torch.equal(laid.reshape(ref[key].shape), ref[key]), name
    laid = torch.cat([part.rewards for part in parts])[..., 0]
    torch.testing.assert_close(laid, ref["r"], atol=1e-12, rtol=0)  # another critic batch
    for i, key in enumerate("hc" if recurrent else ""):
        laid = torch.cat([part.saved_hidden_states_actor[i] for part in parts])
        assert torch.equal(laid.transpose(1, 2), ref[key])


@pytest.mark.parametrize("mode", MODES)
def test_one_storage_refilled_every_call_matches_the_users_loop(mode: str) -> None:
    """rsl_rl allocates its storage once: ``storage=`` refilled by three calls."""
    refs = reference(mode, 3, "gru")
    model = Model("gru")
    runner = EnvRunner(PointMass(mode=mode), RecurrentSampler(model), seed=0, state_batch_axis=1)
    keys = ColumnKeys(distribution=("mu", "sigma"), actor_hidden=("h",))
    storage = None
    for ref in refs:
        rollout = episodes_to_rollout(
            runner.sample(T), gamma=GAMMA, value_fn=model.value, keys=keys,
            dtype=torch.float64, storage=storage,
        )  # fmt: skip
        assert storage is None or rollout.storage is storage
        storage = rollout.storage
        assert_storage_matches(rollout, ref)
        assert torch.equal(storage.saved_hidden_states_actor[0].transpose(1, 2), ref["h"])


@pytest.mark.parametrize("recurrent", [None, "gru"])
@pytest.mark.parametrize("mode", MODES)
def test_samples_taken_in_a_row_convert_later_in_any_order(
    mode: str, recurrent: str | None
) -> None:
    """Three ``sample()`` calls first, then their conversions, last call first."""
    refs = reference(mode, 3, recurrent)
    model = Model(recurrent)
    if recurrent:
        runner = EnvRunner(
            PointMass(mode=mode), RecurrentSampler(model), seed=0, state_batch_axis=1
        )
    else:
        runner = EnvRunner(PointMass(mode=mode), Sampler(model), seed=0)
    keys = ColumnKeys(distribution=("mu", "sigma"), actor_hidden=("h",) if recurrent else ())
    samples = [runner.sample(T) for _ in refs]
    for call in (2, 0, 1):
        rollout = episodes_to_rollout(
            samples[call], gamma=GAMMA, value_fn=model.value, keys=keys, dtype=torch.float64
        )
        assert_storage_matches(rollout, refs[call])


def test_a_same_step_env_without_final_observations_is_named_at_the_end_of_the_call() -> None:
    """Isaac Lab's own env reports no final observation: the runner cannot bootstrap its
    time-outs with ``V(s_T)`` and says what it needs (docs/deviations.md, torch envs row)."""

    class NoFinals(PointMass):
        def step(self, actions: torch.Tensor) -> Any:
            obs, rewards, terminated, truncated, infos = super().step(actions)
            del infos["final_obs"], infos["_final_obs"]
            return obs, rewards, terminated, truncated, infos

    runner = EnvRunner(NoFinals(8, mode="SameStep"), Sampler(Model()), seed=0)
    with pytest.raises(ValueError, match=r"finished in a same-step vector step whose infos hold"):
        runner.sample(T)


@pytest.mark.parametrize("mode", MODES)
def test_rsl_rl_shaped_critic_outputs_of_n_by_1_are_taken(mode: str) -> None:
    """rsl_rl's critic gives ``[N, 1]`` values: as extras and from ``value_fn`` alike."""

    class ColumnOutputs(Sampler):
        def __call__(self, obs: Any) -> Any:
            actions, extras, _ = self.act(obs)
            extras["vf_preds"] = extras["vf_preds"][:, None]
            extras["action_logp"] = extras["action_logp"][:, None]
            return actions, extras

    refs = reference(mode, 2)
    model = Model()
    runner = EnvRunner(PointMass(mode=mode), ColumnOutputs(model), seed=0)
    keys = ColumnKeys(distribution=("mu", "sigma"))
    for ref in refs:
        rollout = episodes_to_rollout(
            runner.sample(T), gamma=GAMMA, keys=keys, dtype=torch.float64,
            value_fn=lambda obs: model.v(obs["critic"]).detach(),  # [n, 1]
        )  # fmt: skip
        assert_storage_matches(rollout, ref)
