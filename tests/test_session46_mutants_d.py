"""Behaviour that hand-made mutants of ``episodes.runner.env_runner``,
``episodes.converter.to_rollout``, ``episodes.converter.bootstrap`` and
``episodes.converter.refusals`` showed no test pinned (session 46, fourth batch).

Each test fails with a mutant (named beside it) applied, and passes on the code as it is. The
runner is driven through ``EnvRunner.sample`` on gymnasium vector envs, the converter through
``episodes_to_rollout`` on runner samples and hand-built chunks, and the bootstrap arithmetic
through ``bootstrap_truncated_rewards``, each compared with a plain reference.
"""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.converter import ColumnKeys, bootstrap_truncated_rewards, episodes_to_rollout
from episodes.rollout import RolloutStorage
from episodes.runner import EnvRunner
from tests.runner._random_env import EnvSpec, Policy, RandomEnv
from tests.runner._runner_env import ScriptedEnv, action_policy

MODES = ["NextStep", "SameStep", "Disabled"]


def _random_vec(mode: str, rates: list[float], truncate: float = 0.0) -> gym.vector.VectorEnv:
    specs = [EnvSpec("box", "discrete", rate, truncate, 0.0) for rate in rates]
    return gym.vector.SyncVectorEnv([lambda s=s: RandomEnv(s) for s in specs], autoreset_mode=mode)


# ------------------------------------------------------------------ converter.bootstrap


# mutant: `values = np.asarray(final_values)` (float32 values bootstrapped in float32)
def test_float32_final_values_are_bootstrapped_in_float64():
    """The bonus ``gamma * V`` is computed in float64 whatever the values' dtype: float64
    rewards get the float64 product of ``gamma`` and the float32 value, not its float32
    rounding."""
    values = np.array([0.1, 0.3, 1e-3], np.float32)
    rewards = np.array([1.0, 2.0, 3.0])
    out = bootstrap_truncated_rewards(rewards, np.array([True, False, True]), values, 0.9)
    expected = [1.0 + 0.9 * float(values[0]), 2.0, 3.0 + 0.9 * float(values[2])]
    assert out.dtype == np.float64
    assert out.tolist() == expected


# mutant: `rewards.dtype.kind in "f"` (complex rewards cast to float64, the imaginary part lost)
@pytest.mark.parametrize(
    "dtype, kept",
    [
        ("complex128", "complex128"),
        ("float32", "float32"),
        ("float64", "float64"),
        ("int64", "float64"),
        ("bool", "float64"),
    ],
)
def test_bootstrapped_rewards_keep_a_float_or_complex_dtype(dtype, kept):
    rewards = np.array([1, 1], dtype=dtype)
    if dtype.startswith("complex"):
        rewards = rewards * (1 + 2j)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a complex cast to float would warn
        out = bootstrap_truncated_rewards(rewards, np.array([False, True]), np.full(2, 4.0), 0.5)
    assert out.dtype == np.dtype(kept)
    assert out.tolist() == (rewards + np.array([0.0, 2.0])).astype(kept).tolist()


# ------------------------------------------------------------------ converter.refusals


def _storage() -> RolloutStorage:
    """A storage the conversion of ``[_episode()]`` fills (float32, on the CPU)."""
    return episodes_to_rollout([_episode()], gamma=0.9).storage


def _episode() -> SingleAgentEpisode:
    return SingleAgentEpisode(
        observations=[np.array([0.0]), np.array([1.0]), np.array([2.0])],
        actions=[np.array([0.0]), np.array([1.0])],
        rewards=[1.0, 1.0],
        terminated=True,
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.5, 0.5], "action_logp": [-0.7, -0.7]},
    )


# mutant: `device.type != held.type or ` dropped (`_resolved("cuda")` asks CUDA first)
@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_cuda_device_against_a_cpu_storage_is_refused_as_a_mismatch_without_cuda():
    """A ``device`` of another type than the given storage's is refused by its type, in the
    converter's words, before CUDA is asked for its current device (there is none)."""
    storage = _storage()
    with pytest.raises(ValueError, match="differs from the given storage's device cpu"):
        episodes_to_rollout([_episode()], gamma=0.9, storage=storage, device="cuda")


# ------------------------------------------------------------------ masked vector-step windows


def _scripted_next_step(num_envs: int = 2) -> gym.vector.VectorEnv:
    """Next-step autoreset; sub-env ``i`` terminates every ``2 + i`` steps."""
    fns = [lambda i=i: ScriptedEnv(i, [(2 + i, "term")]) for i in range(num_envs)]
    return gym.vector.SyncVectorEnv(fns, autoreset_mode="NextStep")


def _keyed_policy(obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``action_policy`` with its value recorded as ``vf_preds`` and ``1 + vf`` as log-prob."""
    actions, extras = action_policy(obs)
    return actions, {"vf_preds": extras["vf"], "action_logp": 1.0 + extras["vf"]}


class _Gathered(list):  # type: ignore[type-arg]
    """Several runners' chunks in one list that offers the samples, as a group sample does."""

    def __init__(self, samples: list[Any]):
        super().__init__(chunk for sample in samples for chunk in sample)
        self.samples = samples

    def side_by_side(self) -> list[Any]:
        return list(self.samples)


def _value(obs: Any) -> np.ndarray:
    return np.asarray(obs)[..., 2] * 0.5


# mutant (refusals): `if missing:` -> `if False:` (the missing output named as a general refusal)
def test_a_masked_window_without_a_wanted_output_names_the_output():
    runner = EnvRunner(_scripted_next_step(), action_policy, window="vector_steps")
    sample = runner.sample(6)
    with pytest.raises(KeyError, match=r"recorded no extra output 'vf_preds'; it records \['vf'\]"):
        episodes_to_rollout(sample, gamma=0.9, value_fn=_value)


# mutants (refusals): `len(masked) > 0` (one runner told of several) and
# `not sample.numpy_episodes` (unbuilt list-mode chunks told they count as changed)
@pytest.mark.parametrize(
    "numpy_episodes, build, list_note",
    [(True, False, False), (True, True, False), (False, False, False), (False, True, True)],
)
def test_the_masked_window_refusal_says_what_applies(numpy_episodes, build, list_note):
    """Without ``value_fn`` or bootstrap values a masked window cannot be laid out: the error
    speaks of several runners only for several, and of list-mode chunks only once one of them
    was built (a read of a list-mode chunk counts as a change)."""
    runner = EnvRunner(
        _scripted_next_step(), _keyed_policy, window="vector_steps", numpy_episodes=numpy_episodes
    )
    sample = runner.sample(6)
    if build:
        _ = sample[0]
    with pytest.raises(ValueError, match="only the fast path lays it out") as err:
        episodes_to_rollout(sample, gamma=0.9)
    assert "several runners" not in str(err.value)
    assert ("List-mode chunks" in str(err.value)) is list_note


# mutant (to_rollout): `refuse_masked_windows([episodes], ...)` (a group's parts not looked at)
def test_a_gathered_group_of_masked_windows_is_refused_naming_several_runners():
    samples = [
        EnvRunner(_scripted_next_step(), _keyed_policy, window="vector_steps").sample(6)
        for _ in range(2)
    ]
    with pytest.raises(ValueError, match="only the fast path lays it out") as err:
        episodes_to_rollout(_Gathered(samples), gamma=0.9)
    assert "several runners' samples are laid out together" in str(err.value)


# mutants (to_rollout): `_valid_cells(..., blocks=False)` on the fast path and on the
# side-by-side path (the reset steps' policy outputs left in the storage)
@pytest.mark.parametrize("gathered", [False, True], ids=["one runner", "side by side"])
def test_reset_steps_hold_no_policy_output_in_the_storage(gathered):
    """At a next-step reset step no transition is held: the storage's log-probs there are 0
    (the policy gave ``1 + vf`` there, never 0), and every valid cell holds the chunk's own."""
    samples = [
        EnvRunner(_scripted_next_step(), _keyed_policy, window="vector_steps").sample(7)
        for _ in range(2 if gathered else 1)
    ]
    episodes = _Gathered(samples) if gathered else samples[0]
    rollout = episodes_to_rollout(episodes, gamma=0.9, value_fn=_value)
    valid = rollout.mask
    assert valid is not None and not bool(valid.all())
    logp = rollout.storage.actions_log_prob[..., 0]
    assert (logp[~valid] == 0).all()
    for n, column in enumerate(rollout.groups):
        held = np.concatenate(
            [np.asarray(c.get_extra_model_outputs("action_logp")) for c in column]
        )
        assert logp[valid[:, n], n].tolist() == held.astype(np.float32).tolist()
        assert bool((logp[valid[:, n], n] != 0).all())


# ------------------------------------------------------------------ converter: a given storage


# mutant (refusals): `if False:` for `dtype != storage.rewards.dtype` (filled in its own dtype)
def test_a_dtype_other_than_the_given_storages_is_refused_and_the_storage_kept():
    storage = _storage()
    storage.rewards.fill_(7.0)
    with pytest.raises(ValueError, match=r"dtype=torch.float64 differs from the given storage's"):
        episodes_to_rollout([_episode()], gamma=0.9, storage=storage, dtype=torch.float64)
    assert storage.rewards.dtype == torch.float32
    assert (storage.rewards == 7.0).all()  # not cleared
    filled = episodes_to_rollout([_episode()], gamma=0.9, storage=storage, dtype=torch.float32)
    assert filled.storage is storage and storage.rewards[:, 0, 0].tolist() == [1.0, 1.0]


# mutants (refusals): `have[0] != num_steps` / `have[1] != num_envs` only (a storage of
# another number of envs, or of steps, filled part-way or refused in torch's words)
@pytest.mark.parametrize("steps, envs", [(2, 2), (3, 1), (1, 1)], ids=["envs", "steps", "both"])
def test_a_storage_of_another_size_is_refused_naming_both_sizes(steps, envs):
    storage = RolloutStorage("rl", envs, steps, [1], [1])
    with pytest.raises(ValueError, match=rf"holds T={steps} x N={envs} transitions, but these "):
        episodes_to_rollout([_episode()], gamma=0.9, storage=storage)
    assert storage.step == 0


# ------------------------------------------------------------------ converter: sharing


# mutants (to_rollout): `share=copy` on the fast path and on the side-by-side path
@pytest.mark.parametrize("copy", [False, True])
@pytest.mark.parametrize("gathered", [False, True], ids=["one runner", "side by side"])
def test_copy_gives_a_storage_that_takes_no_caller_tensor(copy, gathered):
    """``copy=True`` copies every field into the storage's own tensors (nothing ``shared``);
    by default columns that fit are taken as they are."""
    env = [lambda i=i: ScriptedEnv(i, [(2 + i, "term")]) for i in range(2)]
    samples = [
        EnvRunner(gym.vector.SyncVectorEnv(env, autoreset_mode="SameStep"), _keyed_policy).sample(5)
        for _ in range(2 if gathered else 1)
    ]
    episodes = _Gathered(samples) if gathered else samples[0]
    storage = episodes_to_rollout(episodes, gamma=0.9, value_fn=_value, copy=copy).storage
    if copy:
        assert storage.shared == frozenset()
    else:
        assert {"rewards", "dones"} <= storage.shared


# ------------------------------------------------------------------ converter: torch envs


# mutant (to_rollout): `if False:` for `recorded_on is not None` (the general path's value_fn
# and obs_fn handed the host mirror as numpy)
@pytest.mark.parametrize("layout", ["per_env", "per_chunk"])
def test_a_torch_envs_chunks_reach_value_fn_and_obs_fn_as_tensors_on_every_path(layout):
    from tests.runner._tensor_env import TensorPolicy, TensorVectorEnv

    env = TensorVectorEnv(_random_vec("SameStep", [0.3, 0.6], truncate=0.2))
    runner = EnvRunner(env, TensorPolicy(Policy(env.single_action_space, False)), seed=1)
    sample = runner.sample(6)
    seen: list[str] = []

    def value_fn(obs: Any) -> Any:
        seen.append(type(obs).__name__)
        return obs.sum(-1)

    def obs_fn(obs: Any) -> Any:
        seen.append(type(obs).__name__)
        return obs * 2

    keys = ColumnKeys(values="vf", log_probs="logp")
    rollout = episodes_to_rollout(
        sample, gamma=0.9, value_fn=value_fn, obs_fn=obs_fn, keys=keys, layout=layout
    )
    assert seen and set(seen) == {"Tensor"}
    assert rollout.storage.step == rollout.storage.num_transitions_per_env


# ------------------------------------------------------------------ converter: general path


def _hand_built(h_width: int | None = None, float_actions: bool = True) -> SingleAgentEpisode:
    """Two steps, truncated; ``h`` (``[1, h_width]`` a step) recorded when ``h_width`` is given."""
    extras: dict[str, Any] = {"vf_preds": [0.5, 0.25], "action_logp": [-0.7, -0.1]}
    if h_width is not None:
        extras["h"] = [np.full((1, h_width), k, np.float32) for k in (1.0, 2.0)]
    kind = np.float32 if float_actions else np.int64
    return SingleAgentEpisode(
        observations=[np.array([t], np.float32) for t in (0.0, 1.0, 2.0)],
        actions=[np.array([0.7], kind) if float_actions else np.array([1], kind)] * 2,
        rewards=[1.0, 1.0],
        truncated=True,
        len_lookback_buffer=0,
        extra_model_outputs=extras,
    )


def _obs_value(obs: Any) -> np.ndarray:
    return np.asarray(obs)[..., 0] * 10.0


# mutant (to_rollout): `flat_observations(cols.observations)` dropped (value_fn first handed
# Tuple observations the storage refuses)
def test_tuple_observations_are_refused_before_value_fn_is_called():
    ep = SingleAgentEpisode(
        observations=[(np.zeros(1), np.ones(1))] * 3,
        actions=[np.array([0.0])] * 2,
        rewards=[1.0, 1.0],
        truncated=True,
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.5, 0.5], "action_logp": [-0.7, -0.7]},
    )
    calls: list[Any] = []

    def value_fn(obs: Any) -> Any:
        calls.append(obs)
        return np.zeros(len(obs[0]))

    with pytest.raises(TypeError, match="RolloutStorage holds a tensor or a dict of tensors"):
        episodes_to_rollout([ep], gamma=0.9, value_fn=value_fn)
    assert calls == []


# mutant (to_rollout): `cols.mask = None` dropped (chunks of one length given an all-True mask)
@pytest.mark.parametrize("lengths, masked", [((2, 2), False), ((2, 1), True)])
def test_per_chunk_layout_masks_only_chunks_of_different_lengths(lengths, masked):
    chunks = [_hand_built() if n == 2 else _hand_built().slice(slice(0, n)) for n in lengths]
    rollout = episodes_to_rollout(chunks, gamma=0.9, value_fn=_obs_value, layout="per_chunk")
    assert (rollout.mask is not None) is masked
    assert (rollout.storage.valid is not None) is masked
    if masked:
        assert rollout.mask.tolist() == [[True, True], [True, False]]


# mutants (refusals): `_check_dtype` of a field dropped (float actions truncated into a given
# storage's int actions without a word)
def test_float_actions_are_refused_by_a_storage_of_int_actions_which_is_kept():
    storage = episodes_to_rollout(
        [_hand_built(float_actions=False)], gamma=0.9, value_fn=_obs_value
    ).storage
    assert storage.actions.dtype == torch.int64
    before = storage.actions.clone()
    with pytest.raises(ValueError, match="actions are torch.int64, which cannot hold these chunks"):
        episodes_to_rollout([_hand_built()], gamma=0.9, value_fn=_obs_value, storage=storage)
    assert torch.equal(storage.actions, before)


# mutants (refusals): `mine is None and theirs is None` (a storage without hidden states
# cannot take the chunks' first ones), `if have != want` dropped (hidden states of another
# shape refused in torch's words, after the storage was cleared) and the refusal of hidden
# states the keys leave unfilled dropped
def test_hidden_states_into_a_given_storage():
    keys = ColumnKeys(actor_hidden=("h",))
    plain = episodes_to_rollout([_hand_built(3)], gamma=0.9, value_fn=_obs_value).storage
    assert plain.saved_hidden_states_actor is None
    filled = episodes_to_rollout(
        [_hand_built(3)], gamma=0.9, value_fn=_obs_value, keys=keys, storage=plain
    ).storage
    assert filled is plain
    assert [t.shape for t in filled.saved_hidden_states_actor] == [(2, 1, 1, 3)]
    assert filled.saved_hidden_states_actor[0][:, 0, 0, 0].tolist() == [1.0, 2.0]
    rewards = filled.rewards.clone()
    with pytest.raises(ValueError, match=r"actor hidden states are \[\(2, 1, 1, 3\)\], these "):
        episodes_to_rollout(
            [_hand_built(4)], gamma=0.9, value_fn=_obs_value, keys=keys, storage=filled
        )
    assert torch.equal(filled.rewards, rewards)
    # mutant: `if False and (` for a storage's hidden states the keys leave unfilled
    with pytest.raises(ValueError, match=r"holds actor hidden states \(ColumnKeys.actor_hidden"):
        episodes_to_rollout([_hand_built(3)], gamma=0.9, value_fn=_obs_value, storage=filled)
    assert torch.equal(filled.rewards, rewards)


# mutant (refusals): `math.prod(shape) > size` (teacher actions of fewer numbers than the
# actions taken, and broadcast or refused in torch's words)
def test_teacher_actions_of_fewer_numbers_than_the_actions_are_refused():
    ep = SingleAgentEpisode(
        observations=[np.array([t], np.float32) for t in (0.0, 1.0, 2.0)],
        actions=[np.array([0.5, 0.5], np.float32)] * 2,
        rewards=[1.0, 1.0],
        terminated=True,
        len_lookback_buffer=0,
        extra_model_outputs={"teacher": [np.array([1.0], np.float32)] * 2},
    )
    keys = ColumnKeys(privileged_actions="teacher")
    with pytest.raises(ValueError, match=r"'teacher' has steps of shape \(1,\), but privileged"):
        episodes_to_rollout([ep], gamma=0.9, keys=keys, training_type="distillation")


# ------------------------------------------------------------------ runner: metrics, backlog


# mutant: `self.metrics.reduce(reset=True)` (get_metrics(reset=False) clears them)
@pytest.mark.parametrize("mode", MODES)
def test_get_metrics_without_reset_keeps_the_counts(mode):
    runner = EnvRunner(_random_vec(mode, [0.3, 0.5]), Policy(gym.spaces.Discrete(3), False), seed=0)
    runner.sample(5)
    first = runner.get_metrics(reset=False)["num_env_steps"]
    assert first >= 10  # next-step reset steps are env steps too
    assert runner.get_metrics(reset=False)["num_env_steps"] == first
    runner.sample(5)
    assert runner.get_metrics()["num_env_steps"] >= first + 10
    assert runner.get_metrics()["num_env_steps"] == 0


# mutants: `not self._backlog_warned or backlog_due(...)` and `_backlog_warned = True`
# dropped (warned at every call), `backlog_due(..., num_steps + 1)` (warned late)
def test_a_growing_backlog_is_warned_of_once_at_the_first_call_past_the_bound():
    """Sub-env 1 ends an episode every step, so in next-step mode it needs about two vector
    steps a transition; sub-env 0 never ends and keeps what it records beyond ``num_steps``
    for later calls. Its backlog (its vector steps so far less what was handed out) grows by
    about ``num_steps`` a call: the warning comes at the first call that leaves it above
    ``max(16 * num_steps, 256)`` rows, and never again."""
    fns = [lambda: ScriptedEnv(0, [(10**6, "trunc")]), lambda: ScriptedEnv(1, [(1, "term")])]
    env = gym.vector.SyncVectorEnv(fns, autoreset_mode="NextStep")
    runner = EnvRunner(env, action_policy)
    num_steps, warned_at, due = 16, [], []
    for call in range(1, 23):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            runner.sample(num_steps)
        if any(issubclass(w.category, RuntimeWarning) for w in caught):
            warned_at.append(call)
        backlog = runner.get_metrics(reset=False)["num_vector_steps"] - num_steps * call
        if backlog > max(16 * num_steps, 256):
            due.append((call, backlog))
    assert due and due[0][1] <= 16 * (num_steps + 1)  # the bound is met inside one call's growth
    assert warned_at == [due[0][0]]


# ------------------------------------------------------------------ runner: recurrent state


# mutant: `layout.check(state)` dropped (a state of another shape taken, the env stepped)
@pytest.mark.parametrize("width", [1, 3])
def test_a_returned_state_of_another_shape_is_refused_before_the_env_steps(width):
    from tests.runner._runner_env import CountingSteps

    env = CountingSteps(_random_vec("SameStep", [0.3, 0.5]))

    def policy(obs: Any, state: Any) -> Any:
        return np.zeros(2, np.int64), {"vf": np.zeros(2, np.float32)}, np.zeros((2, width))

    runner = EnvRunner(env, policy, initial_state=lambda n: np.zeros((n, 2)))
    with pytest.raises(ValueError, match="state"):
        runner.sample(3)
    assert env.steps == 0


# mutant: the step infos' check dropped (a same-step env read as next-step recorded wrongly)
def test_final_observations_in_a_next_step_envs_step_infos_are_refused():
    fns = [lambda i=i: ScriptedEnv(i, [(2, "term")]) for i in range(2)]
    env = gym.vector.SyncVectorEnv(fns, autoreset_mode="SameStep")
    env.metadata["autoreset_mode"] = gym.vector.AutoresetMode.NEXT_STEP
    runner = EnvRunner(env, action_policy)
    with pytest.raises(ValueError, match="hold 'final_obs', which only a same-step env reports"):
        runner.sample(4)
