"""Batched recording == per-step recording: same episodes, bit-identical rollout storage.

The per-step runner (``per_step_runner.py``, the runner before issue #12) is the reference.
Both runners drive their own copy of the same random vector env with the same seed and a
deterministic policy, so they see the same observations and take the same actions.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from episodes.converter import ColumnKeys, episodes_to_rollout
from episodes.runner import EnvRunner, SampledChunks
from tests.runner._random_env import EnvSpec, Policy, make_vec, obs_fn_for, value_fn
from tests.runner.per_step_runner import PerStepRunner

MODES = ["NextStep", "SameStep", "Disabled"]
KEYS = ColumnKeys(values="vf", log_probs="logp", distribution=("logits",))

# One random env, runner and call sequence (test_device_recording.py draws the same, minus the
# modes and options a torch env does not have).
CASE_FIELDS = {
    "obs": st.sampled_from(["box", "discrete", "dict", "tuple"]),
    "action": st.sampled_from(["discrete", "box"]),
    "p_terminate": st.sampled_from([0.0, 0.1, 0.3]),
    "p_truncate": st.sampled_from([0.0, 0.1, 0.4]),
    "p_info": st.sampled_from([0.0, 0.3, 1.0]),
    "num_envs": st.integers(1, 3),
    "mode": st.sampled_from(MODES),
    "lookback": st.integers(0, 4),
    "recurrent": st.booleans(),
    "numpy_episodes": st.booleans(),
    "seed": st.integers(0, 2**16),
    "sizes": st.lists(st.integers(1, 7), min_size=1, max_size=4),
}
cases = st.fixed_dictionaries(CASE_FIELDS)


def runners(case: dict) -> tuple[PerStepRunner, EnvRunner]:
    spec = EnvSpec(
        case["obs"], case["action"], case["p_terminate"], case["p_truncate"], case["p_info"]
    )
    made = []
    for cls in (PerStepRunner, EnvRunner):
        env = make_vec(spec, case["num_envs"], case["mode"])
        made.append(
            cls(
                env,
                Policy(env.single_action_space, case["recurrent"]),
                len_lookback_buffer=case["lookback"],
                seed=case["seed"],
                numpy_episodes=case["numpy_episodes"],
            )
        )
    return made[0], made[1]  # type: ignore[return-value]


def assert_same_storage(fast, general) -> None:
    assert fast.storage.tensors.keys() == general.storage.tensors.keys()
    for name, tensor in general.storage.tensors.items():
        assert torch.equal(fast.storage.tensors[name], tensor), name
    assert torch.equal(fast.last_values, general.last_values)


def assert_same_chunks(reference, batched: SampledChunks, ids: dict[str, str]) -> None:
    assert len(batched) == len(reference)
    for ref, new in zip(reference, batched, strict=True):
        assert len(new.id_) == 32 and int(new.id_, 16) >= 0
        # Ids differ by construction (uuid4 vs runner prefix + number): same episode <=> same id.
        assert ids.setdefault(ref.id_, new.id_) == new.id_
        assert list(ids.values()).count(new.id_) == 1
        ref = copy.copy(ref)
        ref.id_ = new.id_
        assert new == ref, (ref, new)
        assert new.t_started == ref.t_started and new.is_done == ref.is_done
        assert new.observations.lookback == ref.observations.lookback
        assert new.get_infos() == ref.get_infos() or _infos_equal(ref, new)


def _infos_equal(ref, new) -> bool:
    from episodes.structs import data_equal

    return data_equal(list(ref.infos.data), list(new.infos.data))


@given(case=cases)
def test_batched_runner_equals_per_step_runner(case):
    reference, batched = runners(case)
    obs_fn = obs_fn_for(case["obs"])
    ids: dict[str, str] = {}
    for size in case["sizes"]:
        ref_chunks = reference.sample(size)
        new_chunks = batched.sample(size)
        assert isinstance(new_chunks, SampledChunks) and new_chunks.built() == []
        kwargs = dict(gamma=0.9, value_fn=value_fn, keys=KEYS, obs_fn=obs_fn)
        fast = episodes_to_rollout(new_chunks, **kwargs)
        assert new_chunks.built() == []  # the fast path built no chunk
        general = episodes_to_rollout(list(ref_chunks), **kwargs)
        assert_same_storage(fast, general)
        assert_same_chunks(ref_chunks, new_chunks, ids)
        # Built chunks, unchanged: still the fast path, still the same storage.
        again = episodes_to_rollout(new_chunks, **kwargs)
        assert_same_storage(again, general)
        assert_same_storage(episodes_to_rollout(list(new_chunks), **kwargs), general)
    assert reference.get_metrics() | {"sample_time_s": 0, "env_steps_per_s": 0} == (
        batched.get_metrics() | {"sample_time_s": 0, "env_steps_per_s": 0}
    )


@pytest.mark.parametrize("mode", MODES)
def test_writes_stay_in_their_chunk(mode):
    case = dict(
        obs="box",
        action="discrete",
        p_terminate=0.2,
        p_truncate=0.2,
        p_info=0.5,
        num_envs=2,
        mode=mode,
        lookback=2,
        recurrent=False,
        numpy_episodes=True,
        seed=3,
        sizes=[],
    )
    _, runner = runners(case)
    first = runner.sample(6)
    before = [copy.deepcopy(c) for c in first]
    target = first[0]
    target.rewards.set(123.0, at_indices=0)
    assert first[0].get_rewards(0) == 123.0
    assert all(a == b for a, b in zip(list(first)[1:], before[1:], strict=True))
    # Copy on write: the column left the block, so the converter takes the general path.
    assert target.rewards.store.detached and not first.unchanged()
    rollout = episodes_to_rollout(first, gamma=0.9, value_fn=value_fn, keys=KEYS)
    env0 = target.custom_data["env_index"]
    assert rollout.storage.rewards[0, env0, 0] == 123.0 or target.t_started > 0
    # Writing into the chunk a later call continues never reaches that call.
    last = [c for c in first if not c.is_done][-1]
    env = last.custom_data["env_index"]
    kept = (last.get_rewards(-1), last.get_observations(-1).copy())
    last.rewards.set(-7.0, at_indices=-1)
    last.observations.set(np.full(3, 0.5, np.float32), at_indices=-1)
    second = runner.sample(3)
    following = [c for c in second if c.custom_data["env_index"] == env][0]
    if following.id_ == last.id_ and following.rewards.lookback:
        assert following.get_rewards(-1, neg_index_as_lookback=True) == kept[0]
        np.testing.assert_array_equal(following.get_observations(0), kept[1])
        # ... and writing into the later chunk's lookback never reaches the earlier chunk.
        following.rewards.set(55.0, at_indices=-1, neg_index_as_lookback=True)
        assert last.get_rewards(-1) == -7.0
    # Growing a chunk copies its columns off the blocks: the fast path then steps aside.
    ongoing = [c for c in second if not c.is_done][0]
    extras = {k: ongoing.get_extra_model_outputs(k, -1) for k in ongoing.extra_model_outputs}
    ongoing.add_env_step(ongoing.get_observations(-1), 0, 1.0, extra_model_outputs=extras)
    assert not second.unchanged()
    assert ongoing.observations.store.detached


@pytest.mark.parametrize("mode", MODES)
def test_fast_path_fills_a_reused_storage(mode):
    case = dict(
        obs="box",
        action="box",
        p_terminate=0.1,
        p_truncate=0.3,
        p_info=0.0,
        num_envs=3,
        mode=mode,
        lookback=1,
        recurrent=False,
        numpy_episodes=True,
        seed=5,
        sizes=[],
    )
    reference, runner = runners(case)
    keys = ColumnKeys(values="vf", log_probs="logp", distribution=("logits",))
    storage = None
    for _ in range(3):
        chunks, ref_chunks = runner.sample(6), reference.sample(6)
        fast = episodes_to_rollout(chunks, gamma=0.9, value_fn=value_fn, keys=keys, storage=storage)
        assert storage is None or fast.storage is storage
        storage = fast.storage
        general = episodes_to_rollout(list(ref_chunks), gamma=0.9, value_fn=value_fn, keys=keys)
        assert_same_storage(fast, general)
        assert chunks.built() == []


@given(
    case=st.fixed_dictionaries(
        CASE_FIELDS | {"action": st.sampled_from(["dict", "box"]), "num_envs": st.integers(1, 3)}
    )
)
def test_nested_actions_and_extra_outputs_record_like_per_step(case):
    """Dict actions and a structured extra output (a dict holding a tuple) are written leaf
    by leaf into their blocks; the chunks must equal the per-step runner's."""
    made = []
    for cls in (PerStepRunner, EnvRunner):
        spec = EnvSpec(
            case["obs"], case["action"], case["p_terminate"], case["p_truncate"], case["p_info"]
        )
        env = make_vec(spec, case["num_envs"], case["mode"])
        policy = Policy(env.single_action_space, case["recurrent"], nested_extras=True)
        made.append(
            cls(
                env,
                policy,
                len_lookback_buffer=case["lookback"],
                seed=case["seed"],
                numpy_episodes=case["numpy_episodes"],
            )
        )
    reference, batched = made
    ids: dict[str, str] = {}
    for size in case["sizes"]:
        assert_same_chunks(reference.sample(size), batched.sample(size), ids)


@pytest.mark.parametrize("fast", [True, False], ids=["blocks", "chunks"])
def test_dict_actions_get_a_clear_error_from_the_rollout_converter(fast):
    spec = EnvSpec("box", "dict", 0.2, 0.2, 0.0)
    env = make_vec(spec, 2, "NextStep")
    chunks = EnvRunner(env, Policy(env.single_action_space, False), seed=0).sample(4)
    with pytest.raises(ValueError, match="one action tensor per step"):
        episodes_to_rollout(
            chunks if fast else list(chunks), gamma=0.9, value_fn=value_fn, keys=KEYS
        )
