"""Converter and learner-column bugs a hunt found (edge11), pinned: one table per bug.

- A chunk without steps that ends its episode (a valid way to store an end: docs/format.md,
  ``io.shards.piece_ends``) was dropped, so the episode counted as still running.
- Distillation cast the teacher's actions into the student's action dtype unchecked (0.7
  into int64 became 0, 300 into int8 became 44).
- Tuple episode ids were spread over a second axis of ``eps_id`` (ints cast to strings).
- Chunks of envs with other spaces failed with bare numpy/dm-tree errors, or were promoted
  (a Discrete env's int actions stored as float64 next to a Box env's).
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.connectors import AddLearnerColumns
from episodes.converter import ColumnKeys, episodes_to_batch, episodes_to_rollout
from episodes.rollout import RolloutStorage
from episodes.runner import EnvRunner

GAMMA, LAM = 0.9, 0.95


def obs(t: float) -> np.ndarray:
    return np.array([float(t)], np.float32)


def steps(id_, t0: int, n: int, **kw) -> SingleAgentEpisode:
    """A chunk of ``n`` steps from ``t0``; observation t is [t], value 0.1 t."""
    return SingleAgentEpisode(
        id_,
        observations=[obs(t) for t in range(t0, t0 + n + 1)],
        actions=[t % 2 for t in range(t0, t0 + n)],
        rewards=[1.0 + t for t in range(t0, t0 + n)],
        extra_model_outputs={
            "vf_preds": [0.1 * t for t in range(t0, t0 + n)],
            "action_logp": [0.0] * n,
        },
        t_started=t0,
        len_lookback_buffer=0,
        **kw,
    )


def end(id_, t: int, **kw) -> SingleAgentEpisode:
    """A chunk without steps, starting at ``t``, carrying how the episode ended."""
    return SingleAgentEpisode(
        id_,
        observations=[obs(t)],
        actions=[],
        rewards=[],
        extra_model_outputs={"vf_preds": [], "action_logp": []},
        t_started=t,
        len_lookback_buffer=0,
        **kw,
    )


def joined(*chunks: SingleAgentEpisode) -> SingleAgentEpisode:
    whole = copy.deepcopy(chunks[0])
    for chunk in chunks[1:]:
        whole.concat_episode(copy.deepcopy(chunk))
    return whole


def value_fn(observations) -> np.ndarray:
    return 10.0 + np.asarray(observations)[..., 0]  # V([t]) = 10 + t: which obs is visible


def rollout_facts(episodes, **kw) -> dict[str, list]:
    r = episodes_to_rollout(episodes, gamma=GAMMA, value_fn=value_fn, **kw)
    r.storage.compute_returns(r.last_values, GAMMA, LAM, normalize_advantage=False)
    st = r.storage
    return {
        "dones": st.dones[..., 0].T.tolist(),
        "rewards": st.rewards[..., 0].T.tolist(),
        "returns": st.returns[..., 0].T.tolist(),
        "last_values": r.last_values.tolist(),
    }


FLAGS = {"terminated": {"terminated": True}, "truncated": {"truncated": True}}


# (pieces as given, the same episodes joined); each env a list of chunks.
def stepless_cases(flag: dict) -> dict[str, tuple[list, list]]:
    head, tail = steps("a", 0, 3), end("a", 3, **flag)
    other = steps("b", 0, 3)
    mid = steps("a", 3, 2)
    return {
        "head+end": ([[head, tail]], [[joined(head, tail)]]),
        "two heads+end": (
            [[head, mid, end("a", 5, **flag)]],
            [[joined(head, mid, end("a", 5, **flag))]],
        ),
        "end, next episode after": (
            [[steps("a", 0, 2), end("a", 2, **flag), steps("c", 0, 1)]],
            [[joined(steps("a", 0, 2), end("a", 2, **flag)), steps("c", 0, 1)]],
        ),
        "other episode between": (
            [[steps("a", 0, 2), steps("c", 0, 1), end("a", 2, **flag)]],
            [[joined(steps("a", 0, 2), end("a", 2, **flag)), steps("c", 0, 1)]],
        ),
        "second env running": ([[head, tail], [other]], [[joined(head, tail)], [other]]),
    }


@pytest.mark.parametrize("how", FLAGS)
@pytest.mark.parametrize("case", list(stepless_cases({})))
def test_a_stepless_end_converts_as_the_joined_episode(how, case):
    given, whole = stepless_cases(FLAGS[how])[case]
    assert rollout_facts(given) == rollout_facts(whole)


@pytest.mark.parametrize("how", FLAGS)
def test_a_stepless_end_in_a_flat_list(how):
    head, tail = steps("a", 0, 3), end("a", 3, **FLAGS[how])
    expected = rollout_facts([joined(head, tail)])
    assert rollout_facts([head, tail]) == expected  # no env_index: one env per episode
    for chunk in (head, tail):
        chunk.custom_data["env_index"] = 0
    assert rollout_facts([head, tail]) == expected


@pytest.mark.parametrize("how", FLAGS)
def test_a_stepless_end_per_chunk(how):
    # A still-running chunk's column ends with a bootstrapped done; the ended one must not.
    head, tail = steps("a", 0, 3), end("a", 3, **FLAGS[how])
    given = rollout_facts([[head, tail], [steps("b", 0, 2)]], layout="per_chunk")
    whole = rollout_facts([[joined(head, tail)], [steps("b", 0, 2)]], layout="per_chunk")
    assert given == whole


def test_a_stepless_truncation_bootstraps_from_the_end_chunks_custom_data():
    head, tail = steps("a", 0, 2), end("a", 2, truncated=True)
    head.custom_data["bootstrap_value"] = 1.0
    tail.custom_data["bootstrap_value"] = 5.0  # concat_episode: the later chunk's wins
    r = episodes_to_rollout([[head, tail]], gamma=GAMMA)
    assert r.storage.rewards[:, 0, 0].tolist() == pytest.approx([1.0, 2.0 + GAMMA * 5.0])


def test_a_stepless_end_after_the_episode_ended_is_refused():
    with pytest.raises(ValueError, match="episode 'a' starting at t=3"):
        episodes_to_rollout(
            [[steps("a", 0, 3, terminated=True), end("a", 3, terminated=True)]],
            gamma=GAMMA,
            value_fn=value_fn,
        )


@pytest.mark.parametrize("how", FLAGS)
def test_a_stepless_end_in_a_flat_batch(how):
    head, tail = steps("a", 0, 3), end("a", 3, **FLAGS[how])
    given = episodes_to_batch([head, steps("b", 0, 1), tail])
    whole = episodes_to_batch([joined(head, tail), steps("b", 0, 1)])
    for name in ("terminateds", "truncateds", "dones"):
        assert given[name].tolist() == whole[name].tolist(), name


# --- distillation: the teacher's actions must fit the student's action dtype -------------


def distill_chunk(actions: list, teacher: list) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        observations=[np.zeros(2, np.float32)] * (len(actions) + 1),
        actions=actions,
        rewards=[0.0] * len(actions),
        extra_model_outputs={"teacher": teacher},
        len_lookback_buffer=0,
    )
    ep.to_numpy()
    return ep


DISTILL_REFUSED = {
    "float into int64": ([0, 1], [0.7, 1.9], "float64 values"),
    "int64 beyond int8": ([np.int8(0), np.int8(1)], [300, -200], r"\[-200, 300\]"),
    "negative into uint8": ([np.uint8(0), np.uint8(1)], [1, -1], r"\[-1, 1\]"),
}


@pytest.mark.parametrize("case", DISTILL_REFUSED)
def test_teacher_actions_the_student_dtype_cannot_hold_are_refused(case):
    actions, teacher, match = DISTILL_REFUSED[case]
    keys = ColumnKeys(privileged_actions="teacher")
    ep = distill_chunk(actions, teacher)
    with pytest.raises(ValueError, match="privileged_actions.*" + match):
        episodes_to_rollout([ep], gamma=GAMMA, training_type="distillation", keys=keys)


def test_a_refused_teacher_leaves_a_given_storage_as_it_was():
    keys = ColumnKeys(privileged_actions="teacher")
    storage = RolloutStorage("distillation", 1, 2, (2,), (1,), actions_dtype=torch.int64)
    storage.observations.fill_(7.0)
    with pytest.raises(ValueError, match="privileged_actions"):
        episodes_to_rollout(
            [distill_chunk([0, 1], [0.5, 1.5])],
            gamma=GAMMA,
            training_type="distillation",
            keys=keys,
            storage=storage,
        )
    assert bool((storage.observations == 7.0).all())


DISTILL_TAKEN = {
    "int64 within int8": ([np.int8(0), np.int8(1)], [100, -100], torch.int8, [100, -100]),
    "int into float": ([0.5, 0.5], [1, 2], torch.float64, [1.0, 2.0]),
    "float64 into float32": ([np.float32(0.5)] * 2, [0.25, 0.75], torch.float32, [0.25, 0.75]),
}


@pytest.mark.parametrize("case", DISTILL_TAKEN)
def test_teacher_actions_that_fit_are_taken(case):
    actions, teacher, dtype, expected = DISTILL_TAKEN[case]
    keys = ColumnKeys(privileged_actions="teacher")
    r = episodes_to_rollout(
        [distill_chunk(actions, teacher)], gamma=GAMMA, training_type="distillation", keys=keys
    )
    assert r.storage.privileged_actions.dtype == dtype
    assert r.storage.privileged_actions.flatten().tolist() == expected


@pytest.mark.parametrize("path", ["blocks", "general"])
def test_runner_float_teacher_for_int_actions_is_refused(path):
    def policy(o):
        n = len(o)
        return np.zeros(n, np.int64), {"teacher": np.full(n, 0.6)}

    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    chunks = EnvRunner(env, policy, seed=0).sample(3)
    if path == "general":
        chunks = [copy.deepcopy(c) for c in chunks]
    keys = ColumnKeys(privileged_actions="teacher")
    with pytest.raises(ValueError, match="privileged_actions"):
        episodes_to_rollout(chunks, gamma=GAMMA, training_type="distillation", keys=keys)


# --- tuple episode ids: one id per row --------------------------------------------------


def id_chunk(id_, n: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[float(t) for t in range(n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        len_lookback_buffer=0,
    )


def as_rows(column) -> list:
    assert column.ndim == 1, column.shape
    return column.tolist()


@pytest.mark.parametrize("numpy", [False, True], ids=["lists", "numpy'd"])
def test_tuple_ids_are_one_value_per_row(numpy):
    a, b, c = id_chunk(("run", 1), 2), id_chunk(("run", 2), 1), id_chunk(("run", 3, "x"), 1)
    if numpy:
        for ep in (a, b, c):
            ep.to_numpy()
    expected = [("run", 1), ("run", 1), ("run", 2), ("run", 3, "x")]
    assert as_rows(episodes_to_batch([a, b, c])["eps_id"]) == expected
    assert as_rows(AddLearnerColumns()([a, b, c], {})["eps_id"]) == expected
    assert as_rows(AddLearnerColumns()([b], {})["eps_id"]) == [("run", 2)]
    if numpy:
        assert as_rows(a.get_data_dict()["eps_id"]) == [("run", 1)] * 2


@pytest.mark.parametrize(
    ("id_", "dtype"), [("ep", np.dtype("<U2")), (7, np.dtype(np.int64))], ids=["str", "int"]
)
def test_scalar_ids_keep_their_dtype(id_, dtype):
    ep = id_chunk(id_, 2)
    assert episodes_to_batch([ep])["eps_id"].dtype == dtype
    ep.to_numpy()
    assert ep.get_data_dict()["eps_id"].dtype == dtype
    assert AddLearnerColumns()([ep], {})["eps_id"].dtype == dtype


def test_tuple_and_string_ids_mix_as_objects():
    column = episodes_to_batch([id_chunk(("run", 1), 1), id_chunk("b", 2)])["eps_id"]
    assert as_rows(column) == [("run", 1), "b", "b"]


# --- envs (or chunks) of different spaces: refused, naming the field and both ------------


def env_chunk(
    env: int, observations: list, actions: list, values: list | None = None, **kw
) -> SingleAgentEpisode:
    n = len(actions)
    ep = SingleAgentEpisode(
        observations=observations,
        actions=actions,
        rewards=[1.0] * n,
        extra_model_outputs={"vf_preds": values or [0.0] * n, "action_logp": [0.0] * n},
        len_lookback_buffer=0,
        **kw,
    )
    ep.custom_data["env_index"] = env
    return ep


Z2, Z3 = np.zeros(2, np.float32), np.zeros(3, np.float32)
MIXED = {
    "obs (2,) vs (3,)": (
        [env_chunk(0, [Z2] * 3, [0, 1]), env_chunk(1, [Z3] * 3, [0, 1])],
        "observations: env 0 .* env 1",
    ),
    "Dict obs with other keys": (
        [env_chunk(0, [{"a": Z2}] * 3, [0, 1]), env_chunk(1, [{"b": Z2}] * 3, [0, 1])],
        "observations: env 0 .* env 1",
    ),
    "Discrete vs Box actions": (
        [
            env_chunk(0, [Z2] * 3, [0, 1], action_space=gym.spaces.Discrete(2)),
            env_chunk(1, [Z2] * 3, [0.25, -0.75], action_space=gym.spaces.Box(-1, 1, ())),
        ],
        "actions: env 0 .*int64.* env 1 .*float",
    ),
    "one env's chunks differ": (
        [
            env_chunk(0, [Z2] * 2, [0], terminated=True),
            env_chunk(0, [Z3] * 2, [0]),
            env_chunk(1, [Z2] * 3, [0, 1]),
        ],
        r"observations: env 0's chunk of episode .* \(t=0\) has steps of float32\(2,\)",
    ),
    "values of other shapes": (
        [env_chunk(0, [Z2] * 3, [0, 1]), env_chunk(1, [Z2] * 3, [0, 1], values=[[0.0]] * 2)],
        "extra output 'vf_preds': env 0 .* env 1",
    ),
}


@pytest.mark.parametrize("case", MIXED)
def test_chunks_of_other_spaces_are_refused_clearly(case):
    chunks, match = MIXED[case]
    storage = RolloutStorage("rl", 2, 2, (2,), (1,), distribution_params=())
    storage.observations.fill_(7.0)
    with pytest.raises(ValueError, match=match):
        episodes_to_rollout(
            chunks, gamma=GAMMA, value_fn=lambda o: np.zeros(len(o)), storage=storage
        )
    assert bool((storage.observations == 7.0).all())
