"""Regressions against the converter before this session, pinned (fix-reg11a).

- Observations (or actions) recorded as Python ints in one env or chunk and as floats in
  another, under one equal declared Box space, were refused by kind; numpy promotes them, as
  before. Kinds still decide where the spaces differ or are missing (a Discrete env's int
  actions next to a Box env's floats), and the message says which.
- Whole-number float teacher actions (a float32 argmax) for int actions were refused by
  dtype; they are cast exactly when finite, whole and in range.
- An unhashable episode id (a list) next to a stepless ending chunk raised ``TypeError`` in
  ``episodes_to_batch`` and ``AddLearnerColumns``: such an id matches no end.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.connectors import AddLearnerColumns
from episodes.converter import ColumnKeys, episodes_to_batch, episodes_to_rollout, group_by_env

GAMMA = 0.9
BOX2 = gym.spaces.Box(-10, 10, (2,), np.float32)
BOX1 = gym.spaces.Box(-1, 1, (1,), np.float32)
OTHER_BOX2 = gym.spaces.Box(-5, 5, (2,), np.float32)
INTS = [[0, 1], [1, 1], [2, 1], [3, 1]]
FLOATS = [[0.5, 1.5], [1.5, 1.5], [2.5, 1.5], [3.5, 1.5]]
# Without a space a list is a struct of parts: spaceless chunks record arrays.
INTS_A, FLOATS_A = [np.array(o) for o in INTS], [np.array(o) for o in FLOATS]


def chunk(id_, obs, actions=(0, 1, 0), *, numpy=False, **kw):
    n = len(actions)
    ep = SingleAgentEpisode(
        id_,
        observations=obs[: n + 1],
        actions=list(actions),
        rewards=[1.0] * n,
        extra_model_outputs={"vf_preds": [0.0] * n, "action_logp": [0.0] * n},
        len_lookback_buffer=0,
        **kw,
    )
    if numpy:
        ep.to_numpy()
    return ep


def zeros(o):
    return np.zeros(len(o))


# name -> (groups builder(numpy), field, expected float sum of that field)
SAME_SPACE_JOINED = {
    "obs: two envs": (
        lambda np_: [
            [chunk("a", INTS, numpy=np_, observation_space=BOX2)],
            [chunk("b", FLOATS, numpy=np_, observation_space=BOX2)],
        ],
        "observations",
        sum(map(sum, INTS[:3])) + sum(map(sum, FLOATS[:3])),
    ),
    "obs: two chunks of one env": (
        lambda np_: [
            [
                chunk("c", INTS, numpy=np_, observation_space=BOX2, terminated=True),
                chunk("d", FLOATS, numpy=np_, observation_space=BOX2),
            ]
        ],
        "observations",
        sum(map(sum, INTS[:3])) + sum(map(sum, FLOATS[:3])),
    ),
    "Box actions: two envs": (
        lambda np_: [
            [chunk("a", FLOATS_A, [[0], [1], [0]], numpy=np_, action_space=BOX1)],
            [chunk("b", FLOATS_A, [[0.25], [0.5], [0.25]], numpy=np_, action_space=BOX1)],
        ],
        "actions",
        2.0,
    ),
}


@pytest.mark.parametrize("numpy", [False, True])
@pytest.mark.parametrize("layout", ["per_env", "per_chunk"])
@pytest.mark.parametrize("case", SAME_SPACE_JOINED)
def test_ints_and_floats_under_one_equal_space_are_joined_as_numpy_promotes(case, layout, numpy):
    make, field, total = SAME_SPACE_JOINED[case]
    groups = make(numpy)
    if layout == "per_chunk":
        groups = [c for g in groups for c in g]  # one column per chunk
    r = episodes_to_rollout(groups, gamma=GAMMA, value_fn=zeros, layout=layout)
    tensor = getattr(r.storage, field)
    assert tensor.dtype == torch.float64  # as before: np.stack promoted int64 and float64
    assert float(tensor.double().sum()) == pytest.approx(total)


# name -> (groups, match, text the message must not hold)
KINDS_REFUSED = {
    "Discrete vs Box actions (spaces differ)": (
        [
            [chunk("a", FLOATS_A, [0, 1, 0], action_space=gym.spaces.Discrete(2))],
            [chunk("b", FLOATS_A, [[0.25], [0.5], [0.25]], action_space=BOX1)],
        ],
        "actions: env 0 .*int64.* env 1 .*float.*declared spaces differ",
        None,
    ),
    "obs of other Boxes (spaces differ)": (
        [
            [chunk("a", INTS, observation_space=BOX2)],
            [chunk("b", FLOATS, observation_space=OTHER_BOX2)],
        ],
        "observations: env 0 .* env 1 .*declared spaces differ",
        None,
    ),
    "spaceless envs, int vs float obs": (
        [[chunk("a", INTS_A)], [chunk("b", FLOATS_A)]],
        "observations: env 0 .* env 1 .*dtypes/kinds differ",
        "spaces differ",
    ),
    "spaceless chunks of one env, int vs float obs": (
        [[chunk("c", INTS_A, terminated=True), chunk("d", FLOATS_A)]],
        r"observations: env 0's chunk of episode 'c' .*dtypes/kinds differ",
        "spaces differ",
    ),
    "one env declares the space, the other not": (
        [[chunk("a", INTS_A, observation_space=BOX2)], [chunk("b", FLOATS_A)]],
        "observations: env 0 .* env 1 .*dtypes/kinds differ",
        "spaces differ",
    ),
}


@pytest.mark.parametrize("case", KINDS_REFUSED)
def test_kinds_still_refused_where_spaces_differ_or_are_missing(case):
    groups, match, absent = KINDS_REFUSED[case]
    with pytest.raises(ValueError, match=match) as info:
        episodes_to_rollout(groups, gamma=GAMMA, value_fn=zeros)
    if absent is not None:
        assert absent not in str(info.value)


def teacher_chunk(id_, actions, teacher):
    return SingleAgentEpisode(
        id_,
        observations=[np.full(3, t, np.float32) for t in range(len(actions) + 1)],
        actions=list(actions),
        rewards=[1.0] * len(actions),
        extra_model_outputs={"teacher": list(teacher)},
        len_lookback_buffer=0,
    )


# name -> (student actions, teacher actions, stored dtype, stored values)
TEACHER_TAKEN = {
    "float32 argmax into int64": (
        [0, 1, 1, 0],
        np.array([1, 0, 1, 1], np.float32),
        torch.int64,
        [1, 0, 1, 1],
    ),
    "float64 into uint8": (
        np.array([0, 1, 1, 0], np.uint8),
        np.array([255, 0, 3, -0.0]),
        torch.uint8,
        [255, 0, 3, 0],
    ),
    "float16 into int8": (
        np.array([0, 1, 1, 0], np.int8),
        np.array([-128, 127, 0, 1], np.float16),
        torch.int8,
        [-128, 127, 0, 1],
    ),
}


@pytest.mark.parametrize("layout", ["per_env", "per_chunk"])
@pytest.mark.parametrize("case", TEACHER_TAKEN)
def test_whole_float_teacher_actions_are_cast_exactly(case, layout):
    actions, teacher, dtype, expected = TEACHER_TAKEN[case]
    r = episodes_to_rollout(
        [[teacher_chunk("a", actions, teacher)], [teacher_chunk("b", actions, teacher)]],
        gamma=GAMMA,
        training_type="distillation",
        keys=ColumnKeys(privileged_actions="teacher"),
        layout=layout,
    )
    stored = r.storage.privileged_actions
    assert stored.dtype == dtype
    assert stored[:, 0].flatten().tolist() == expected


# name -> (student actions, teacher actions, match)
TEACHER_REFUSED = {
    "a fraction": ([0, 1], np.array([0.7, 1.0], np.float32), "fractions or non-finite"),
    "nan": ([0, 1], np.array([np.nan, 1.0]), "fractions or non-finite"),
    "inf": ([0, 1], np.array([np.inf, 1.0]), "fractions or non-finite"),
    "300.0 into int8": (np.array([0, 1], np.int8), np.array([300.0, 0.0]), r"\[0, 300\]"),
    "-1.0 into uint8": (np.array([0, 1], np.uint8), np.array([-1.0, 0.0]), r"\[-1, 0\]"),
    "2**63 into int64": ([0, 1], np.array([2.0**63, 0.0]), "beyond its range"),
}


@pytest.mark.parametrize("case", TEACHER_REFUSED)
def test_teacher_floats_that_int_actions_cannot_hold_stay_refused(case):
    actions, teacher, match = TEACHER_REFUSED[case]
    with pytest.raises(ValueError, match="privileged_actions.*" + match):
        episodes_to_rollout(
            [teacher_chunk("a", actions, teacher)],
            gamma=GAMMA,
            training_type="distillation",
            keys=ColumnKeys(privileged_actions="teacher"),
        )


def steps_chunk(id_):
    return SingleAgentEpisode(
        id_, observations=[0.0, 1.0, 2.0], actions=[0, 1], rewards=[1.0, 1.0], len_lookback_buffer=0
    )


def end_chunk(id_, t):
    # Its observation is steps_chunk's last: an end must join the chunk it ends.
    return SingleAgentEpisode(
        id_, observations=[2.0], t_started=t, terminated=True, len_lookback_buffer=0
    )


# name -> chunks whose ids differ: no end is matched, every chunk its own env
UNHASHABLE = {
    "list id, another episode's stepless end": lambda: [steps_chunk(["run", 1]), end_chunk("b", 3)],
    "dict id, another episode's stepless end": lambda: [steps_chunk({"run": 1}), end_chunk("b", 3)],
    "tuple holding a list": lambda: [steps_chunk(("run", [1])), end_chunk("b", 3)],
}
READERS = {
    "episodes_to_batch": lambda chunks: episodes_to_batch(chunks)["terminateds"].tolist(),
    "AddLearnerColumns": lambda chunks: AddLearnerColumns()(chunks, {})["terminateds"].tolist(),
    "group_by_env": lambda chunks: [[len(c) for c in env] for env in group_by_env(chunks)],
}
EXPECTED = {
    "episodes_to_batch": [False, False],
    "AddLearnerColumns": [False, False],
    "group_by_env": [[2], [0]],
}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("case", UNHASHABLE)
def test_unhashable_ids_match_no_stepless_end(case, reader):
    assert READERS[reader](UNHASHABLE[case]()) == EXPECTED[reader]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("id_", ["a", ["run", 1], {"run": [1]}], ids=["str", "list", "dict"])
def test_ids_match_their_own_stepless_end(id_, reader):
    # Unhashable ids are matched by value (``episodes.structs.id_key``), as hashable ones.
    chunks = [steps_chunk(id_), end_chunk(id_, 2)]
    expected = [[2, 0]] if reader == "group_by_env" else [False, True]
    assert READERS[reader](chunks) == expected
