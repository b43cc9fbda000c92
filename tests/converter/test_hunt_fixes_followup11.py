"""Converter and learner-column follow-ups (round 11), pinned: one table per bug.

- ``AddLearnerColumns`` ignored a later chunk without steps that ends its episode (a valid
  layout, docs/format.md), which ``episodes_to_batch`` honours: the two disagreed.
- A refused conversion into a given storage had already changed it: ``ready_storage``
  cleared it (and the fast path gathered matching fields into it) before ``write_block``
  refused ints a narrower int field would wrap.
- ``group_by_env`` cast ``custom_data["env_index"]`` with ``int()``: 0.9 and 0.1 (or True and
  1) merged two envs silently.
- ``episodes_to_rollout`` called ``value_fn`` on observations the storage cannot hold (a Tuple
  space's) before refusing them, so numpy's reshape error surfaced instead of the TypeError.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.connectors import AddLearnerColumns
from episodes.converter import episodes_to_batch, episodes_to_rollout, group_by_env
from episodes.rollout import RolloutStorage
from episodes.runner import EnvRunner

GAMMA = 0.9


def zero_values(obs: Any) -> np.ndarray:
    return np.zeros(len(obs))


def chunk(id_: Any, t0: int, n: int, **kw: Any) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[np.full(2, t, np.float32) for t in range(t0, t0 + n + 1)],
        actions=[t % 2 for t in range(t0, t0 + n)],
        rewards=[1.0] * n,
        extra_model_outputs={"vf_preds": [0.0] * n, "action_logp": [0.0] * n},
        t_started=t0,
        len_lookback_buffer=0,
        **kw,
    )


# ----------------------------------------------- 1. AddLearnerColumns and stepless ends
def _pieces(flag: str, numpy: bool, interleaved: bool) -> list[SingleAgentEpisode]:
    head = chunk("a", 0, 3)
    if numpy:
        head.to_numpy()
    tail = head.cut()
    setattr(tail, f"is_{flag}", True)
    other = chunk("b", 0, 2)
    return [head, other, tail] if interleaved else [head, tail, other]


@pytest.mark.parametrize(
    "flag, numpy, interleaved",
    [
        ("terminated", False, False),
        ("terminated", True, False),
        ("truncated", False, False),
        ("truncated", True, True),
        ("terminated", True, True),
    ],
)
def test_learner_columns_honour_a_stepless_end(flag: str, numpy: bool, interleaved: bool) -> None:
    pieces = _pieces(flag, numpy, interleaved)
    head, tail = pieces[0], pieces[2] if interleaved else pieces[1]
    joined = copy.deepcopy(head)
    joined.concat_episode(copy.deepcopy(tail))
    other = [p for p in pieces if p.id_ == "b"]
    out = AddLearnerColumns()(pieces, {})
    want = AddLearnerColumns()([joined, *other], {})
    batch = episodes_to_batch(pieces)
    for key in ("terminateds", "truncateds"):
        # The joined list holds the episodes in another order when interleaved.
        by_id = {i: np.asarray(out[key])[np.asarray(out["eps_id"]) == i].tolist() for i in "ab"}
        wanted = {i: np.asarray(want[key])[np.asarray(want["eps_id"]) == i].tolist() for i in "ab"}
        assert by_id == wanted, key
        assert np.asarray(out[key]).tolist() == batch[key].tolist(), key
    assert np.asarray(out[f"{flag}s"]).sum() == 1


@pytest.mark.parametrize(
    "case",
    ["end-elsewhere", "other-episode", "chunk-done-already"],
)
def test_learner_columns_ignore_unrelated_stepless_chunks(case: str) -> None:
    head = chunk("a", 0, 3, terminated=case == "chunk-done-already")
    if case == "end-elsewhere":  # starts where no chunk of "a" stops
        stray = SingleAgentEpisode(
            "a",
            observations=[np.zeros(2, np.float32)],
            t_started=7,
            terminated=True,
            len_lookback_buffer=0,
        )
    elif case == "other-episode":
        stray = SingleAgentEpisode(
            "z",
            observations=[np.zeros(2, np.float32)],
            t_started=3,
            terminated=True,
            len_lookback_buffer=0,
        )
    else:
        stray = SingleAgentEpisode(
            "a",
            observations=[np.zeros(2, np.float32)],
            t_started=3,
            truncated=True,
            len_lookback_buffer=0,
        )
    out = AddLearnerColumns()([head, stray], {})
    alone = AddLearnerColumns()([head], {})
    for key in ("terminateds", "truncateds"):
        assert np.asarray(out[key]).tolist() == np.asarray(alone[key]).tolist(), key


# ----------------------------------------------- 2. a refused storage is left unchanged
class IntEnv(gym.Env):
    """Observations of ``obs_dtype`` holding ``obs_value`` (after the reset); episodes of 3."""

    action_space = gym.spaces.Discrete(1000)

    def __init__(self, obs_dtype: Any = np.uint8, obs_value: int = 5):
        info = np.iinfo(obs_dtype)
        self.observation_space = gym.spaces.Box(info.min, info.max, (3,), obs_dtype)
        self.obs_dtype, self.obs_value = obs_dtype, obs_value

    def reset(self, seed: Any = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return np.full(3, 1, self.obs_dtype), {}

    def step(self, action: Any) -> Any:
        self.t += 1
        return np.full(3, self.obs_value, self.obs_dtype), 1.0, self.t % 3 == 0, False, {}


def runner_chunks(obs_dtype: Any, obs_value: int, action: int, teacher: int | None = None) -> Any:
    env = gym.vector.SyncVectorEnv(
        [lambda: IntEnv(obs_dtype, obs_value)] * 2,
        autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP,
    )

    def policy(obs: Any) -> Any:
        n = len(obs)
        extras = {"vf_preds": np.zeros(n), "action_logp": np.zeros(n)}
        if teacher is not None:
            extras["teacher"] = np.full(n, teacher, np.int64)
        return np.full(n, action, np.int64), extras

    chunks = EnvRunner(env, policy, seed=0).sample(4)
    assert chunks.gather_plan("observations") is not None  # the fast path gathers
    return chunks


def given_storage(obs_dtype: torch.dtype, actions_dtype: torch.dtype, training: str = "rl"):
    kw = {"distribution_params": ()} if training == "rl" else {}
    storage = RolloutStorage(
        training, 2, 4, ((3,), obs_dtype), (1,), actions_dtype=actions_dtype, **kw
    )
    for tensor in storage.tensors.values():  # an earlier rollout's data
        tensor.fill_(7)
    storage.step = 4
    storage.valid = torch.ones(4, 2, dtype=torch.bool)
    return storage


def snapshot(storage: RolloutStorage) -> dict[str, Any]:
    return {
        "tensors": {k: v.clone() for k, v in storage.tensors.items()},
        "step": storage.step,
        "valid": storage.valid,
    }


REFUSED = [
    # name, chunk obs dtype, obs value, action, storage obs dtype, storage actions dtype, match
    ("actions-200-into-int8", np.uint8, 5, 200, torch.uint8, torch.int8, "actions"),
    ("obs-300-into-uint8", np.int64, 300, 1, torch.uint8, torch.int64, "observations"),
    ("both-narrow-obs-refused", np.int64, 300, 1, torch.uint8, torch.int8, "observations"),
    ("negative-obs-into-uint8", np.int16, -1, 1, torch.uint8, torch.int64, "observations"),
]


@pytest.mark.parametrize("path", ["fast", "general"])
@pytest.mark.parametrize(
    "name, obs_dtype, obs_value, action, st_obs, st_actions, match",
    REFUSED,
    ids=[row[0] for row in REFUSED],
)
def test_refused_values_leave_the_given_storage_unchanged(
    path: str,
    name: str,
    obs_dtype: Any,
    obs_value: int,
    action: int,
    st_obs: Any,
    st_actions: Any,
    match: str,
) -> None:
    chunks = runner_chunks(obs_dtype, obs_value, action)
    episodes = chunks if path == "fast" else [copy.deepcopy(c) for c in chunks]
    storage = given_storage(st_obs, st_actions)
    before = snapshot(storage)
    with pytest.raises(ValueError, match=match):
        episodes_to_rollout(episodes, gamma=GAMMA, value_fn=zero_values, storage=storage)
    assert storage.step == before["step"] and storage.valid is before["valid"]
    changed = [k for k, v in before["tensors"].items() if not torch.equal(v, storage.tensors[k])]
    assert changed == []
    if path == "fast":
        assert chunks.built() == []  # the fast path refused them, not the general one


def test_refused_teacher_actions_leave_the_given_storage_unchanged() -> None:
    # The teacher's 200 fits the chunks' int64 actions, not the storage's int8 field.
    chunks = runner_chunks(np.uint8, 5, 1, teacher=200)
    storage = given_storage(torch.uint8, torch.int8, training="distillation")
    before = snapshot(storage)
    from episodes.converter import ColumnKeys

    with pytest.raises(ValueError, match="privileged_actions"):
        episodes_to_rollout(
            chunks,
            gamma=GAMMA,
            training_type="distillation",
            storage=storage,
            keys=ColumnKeys(privileged_actions="teacher"),
        )
    assert storage.step == before["step"]
    assert all(torch.equal(v, storage.tensors[k]) for k, v in before["tensors"].items())


@pytest.mark.parametrize("path", ["fast", "general"])
def test_values_that_fit_a_narrower_storage_are_written(path: str) -> None:
    chunks = runner_chunks(np.int64, 200, 100)
    episodes = chunks if path == "fast" else [copy.deepcopy(c) for c in chunks]
    storage = given_storage(torch.uint8, torch.int8)
    fresh = episodes_to_rollout(copy.deepcopy(list(chunks)), gamma=GAMMA, value_fn=zero_values)
    episodes_to_rollout(episodes, gamma=GAMMA, value_fn=zero_values, storage=storage)
    assert storage.observations.dtype == torch.uint8 and storage.actions.dtype == torch.int8
    assert storage.observations.long().tolist() == fresh.storage.observations.tolist()
    assert storage.actions.long().tolist() == fresh.storage.actions.tolist()


def test_matching_dtypes_still_gather_into_the_given_storage() -> None:
    chunks = runner_chunks(np.uint8, 5, 3)
    storage = given_storage(torch.uint8, torch.int64)
    storage.own()
    pointers = (storage.observations.data_ptr(), storage.actions.data_ptr())
    episodes_to_rollout(chunks, gamma=GAMMA, value_fn=zero_values, storage=storage)
    assert (storage.observations.data_ptr(), storage.actions.data_ptr()) == pointers
    assert storage.actions.unique().tolist() == [3]


# ----------------------------------------------- 3. env_index must be an integer
def indexed(id_: str, env_index: Any) -> SingleAgentEpisode:
    ep = chunk(id_, 0, 2)
    ep.custom_data["env_index"] = env_index
    return ep


@pytest.mark.parametrize(
    "first, second",
    [(0.9, 0.1), (1.2, 1.7), (True, 1), (np.bool_(False), 0), (np.float64(0.0), 1), ("0", 1)],
    ids=["floats", "floats-one-int", "bool", "numpy-bool", "numpy-float", "string"],
)
def test_a_non_integer_env_index_is_refused(first: Any, second: Any) -> None:
    chunks = [indexed("a", first), indexed("b", second)]
    with pytest.raises(ValueError, match="episode 'a'.*env index is an integer"):
        group_by_env(chunks)
    with pytest.raises(ValueError, match="env_index"):
        episodes_to_rollout(chunks, gamma=GAMMA, value_fn=zero_values)


@pytest.mark.parametrize("indices", [(1, 0), (np.int64(1), np.int32(0)), (np.uint8(1), 0)], ids=str)
def test_integer_env_indices_group_by_value(indices: tuple[Any, Any]) -> None:
    chunks = [indexed("a", indices[0]), indexed("b", indices[1])]
    assert [[c.id_ for c in g] for g in group_by_env(chunks)] == [["b"], ["a"]]
    rollout = episodes_to_rollout(chunks, gamma=GAMMA, value_fn=zero_values)
    assert tuple(rollout.storage.rewards.shape[:2]) == (2, 2)


# ----------------------------------------------- 4. no value_fn call on refused observations
class TupleEnv(gym.Env):
    observation_space = gym.spaces.Tuple((gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(3)))
    action_space = gym.spaces.Discrete(2)

    def reset(self, seed: Any = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        return (np.zeros(2, np.float32), 0), {}

    def step(self, action: Any) -> Any:
        return (np.zeros(2, np.float32), 1), 1.0, False, False, {}


def tuple_chunks(kind: str) -> Any:
    if kind == "runner":
        env = gym.vector.SyncVectorEnv([TupleEnv] * 3)

        def policy(obs: Any) -> Any:
            n = len(obs[0])
            return np.zeros(n, np.int64), {"vf_preds": np.zeros(n), "action_logp": np.zeros(n)}

        return EnvRunner(env, policy, seed=0).sample(3)
    ep = SingleAgentEpisode(
        "a",
        observations=[(np.zeros(2), 1)] * 3,
        actions=[0, 0],
        rewards=[1.0, 1.0],
        truncated=True,
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.0, 0.0], "action_logp": [0.0, 0.0]},
    )
    if kind == "two-chunks":
        other = copy.deepcopy(ep)
        other.id_ = "b"
        return [ep, other]
    return [ep]


@pytest.mark.parametrize(
    "kind, layout",
    [("one-chunk", "per_env"), ("two-chunks", "per_chunk"), ("runner", "per_env")],
)
def test_value_fn_never_sees_observations_the_storage_refuses(kind: str, layout: str) -> None:
    seen: list[str] = []

    def value_fn(obs: Any) -> np.ndarray:
        seen.append(type(obs).__name__)
        return np.zeros(len(obs))

    with pytest.raises(TypeError, match="pass obs_fn"):
        episodes_to_rollout(tuple_chunks(kind), gamma=GAMMA, value_fn=value_fn, layout=layout)
    assert seen == []


def test_obs_fn_that_flattens_tuples_still_reaches_value_fn() -> None:
    seen: list[tuple[int, ...]] = []

    def obs_fn(obs: Any) -> np.ndarray:
        return np.concatenate([obs[0], np.asarray(obs[1], np.float32)[..., None]], axis=-1)

    def value_fn(obs: Any) -> np.ndarray:
        seen.append(obs.shape)
        return np.zeros(len(obs))

    rollout = episodes_to_rollout(
        tuple_chunks("one-chunk"), gamma=GAMMA, value_fn=value_fn, obs_fn=obs_fn
    )
    assert seen == [(1, 3)] and rollout.storage.observations.shape == (2, 1, 3)
