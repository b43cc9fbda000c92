"""episodes_to_rollout takes one real number per reward step, else refuses before the storage.

Complex rewards lost their imaginary part silently; vector rewards (a multi-objective env's,
or one-item arrays) were stored, broadcast or failed with numpy's error after a given storage
was cleared. Both are refused naming the rewards, and a given storage is left as it was
(contract §5.3 for the rewards' "one real number per step").
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_rollout


def _chunk(id_, rewards, *, numpy=False, **flags):
    ep = SingleAgentEpisode(
        id_,
        observations=[np.full(1, 7, np.float32)] * (len(rewards) + 1),
        actions=[0] * len(rewards),
        rewards=rewards,
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.5] * len(rewards), "action_logp": [0.0] * len(rewards)},
        **flags,
    )
    return ep.to_numpy() if numpy else ep


def _values(obs):
    return np.zeros(len(obs))


def _filled(layout):
    good = [_chunk("g", [1.0, 2.0, 3.0], terminated=True)]
    return episodes_to_rollout(good, gamma=0.9, value_fn=_values, layout=layout).storage


def _state(storage):
    return storage.step, {k: v.clone() for k, v in storage.tensors.items()}, storage.valid


def _assert_unchanged(storage, before):
    step, tensors, valid = before
    assert storage.step == step
    assert storage.valid is valid
    for name, tensor in storage.tensors.items():
        assert torch.equal(tensor, tensors[name]), name


LAYOUTS = ("per_env", "per_chunk")
FLAGS = {"terminated": {"terminated": True}, "truncated": {"truncated": True}, "running": {}}

COMPLEX = {
    "complex": [1 + 5j, 2 + 7j, 3 + 0j],
    "complex_only_last": [1.0, 2.0, 3 + 1j],
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("flags", FLAGS.values(), ids=FLAGS.keys())
@pytest.mark.parametrize("rewards", COMPLEX.values(), ids=COMPLEX.keys())
def test_complex_rewards_are_refused_before_the_storage(layout, numpy, flags, rewards):
    storage = _filled(layout)
    before = _state(storage)
    bad = _chunk("b", rewards, numpy=numpy, **flags)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning: refused before any cast
        with pytest.raises(
            TypeError, match=r"rewards of episode 'b' must be real numbers.*complex"
        ):
            episodes_to_rollout([bad], gamma=0.9, value_fn=_values, layout=layout)
        with pytest.raises(TypeError, match="imaginary"):
            episodes_to_rollout([bad], gamma=0.9, value_fn=_values, layout=layout, storage=storage)
    _assert_unchanged(storage, before)


VECTORS = {
    "one_item": ([np.array([1.0]), np.array([2.0]), np.array([3.0])], "(1,)"),
    "two_objectives": ([np.array([1.0, 10.0])] * 3, "(2,)"),
    "matrix": ([np.ones((2, 2))] * 3, "(2, 2)"),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("flags", FLAGS.values(), ids=FLAGS.keys())
@pytest.mark.parametrize("envs", [1, 2])
@pytest.mark.parametrize("rewards, shape", VECTORS.values(), ids=VECTORS.keys())
def test_vector_rewards_are_refused_before_the_storage(layout, numpy, flags, envs, rewards, shape):
    storage = _filled(layout)
    if envs == 2:  # a storage of the chunks' size: the refusal is about the rewards alone
        storage = episodes_to_rollout(
            [_chunk(str(n), [1.0] * 3, terminated=True) for n in range(2)],
            gamma=0.9,
            value_fn=_values,
            layout=layout,
        ).storage
    before = _state(storage)
    bad = [_chunk(str(n), rewards, numpy=numpy, **flags) for n in range(envs)]
    match = rf"rewards of episode '0' have steps of shape {re.escape(shape)}.*one number per step"
    with pytest.raises(ValueError, match=match):
        episodes_to_rollout(bad, gamma=0.9, value_fn=_values, layout=layout)
    with pytest.raises(ValueError, match=match):
        episodes_to_rollout(bad, gamma=0.9, value_fn=_values, layout=layout, storage=storage)
    _assert_unchanged(storage, before)


def test_a_vector_chunk_after_scalar_chunks_is_refused_naming_it():
    first = _chunk("a", [1.0, 2.0], truncated=True)
    second = _chunk("b", [np.array([1.0, 2.0])] * 2, terminated=True)
    storage = _filled("per_env")
    before = _state(storage)
    with pytest.raises(ValueError, match=r"rewards of episode 'b' have steps of shape \(2,\)"):
        episodes_to_rollout([[first, second]], gamma=0.9, value_fn=_values)
    with pytest.raises(ValueError, match="episode 'b'"):
        episodes_to_rollout([[first, second]], gamma=0.9, value_fn=_values, storage=storage)
    _assert_unchanged(storage, before)


NOT_NUMBERS = {
    "strings": (["1.5", "2", "3"], TypeError, "real numbers"),  # were parsed silently
    "none": ([1.0, None, 3.0], TypeError, "real numbers"),  # was NaN silently
    "dicts": ([{"a": 1.0}] * 3, ValueError, "hold a dict per step"),
    "ragged": ([1.0, np.array([1.0, 2.0]), 3.0], ValueError, "do not form one array"),
}


@pytest.mark.parametrize("rewards, error, match", NOT_NUMBERS.values(), ids=NOT_NUMBERS.keys())
def test_rewards_that_are_not_one_real_number_a_step_are_refused(rewards, error, match):
    storage = _filled("per_env")
    before = _state(storage)
    bad = _chunk("b", rewards, terminated=True)
    with pytest.raises(error, match=rf"rewards of episode 'b'.*{match}"):
        episodes_to_rollout([bad], gamma=0.9, value_fn=_values, storage=storage)
    _assert_unchanged(storage, before)


SCALARS = {
    "floats": [1.0, 2.0, 3.0],
    "ints": [1, 2, 3],
    "bools": [True, False, True],
    "float32": [np.float32(1.0), np.float32(2.0), np.float32(3.0)],
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("rewards", SCALARS.values(), ids=SCALARS.keys())
def test_real_scalar_rewards_still_convert(layout, numpy, rewards):
    chunk = _chunk("a", rewards, numpy=numpy, truncated=True)
    rollout = episodes_to_rollout(
        [chunk], gamma=0.5, value_fn=lambda o: np.full(len(o), 4.0), layout=layout
    )
    expected = [float(r) for r in rewards]
    expected[-1] += 0.5 * 4.0  # the truncation's bootstrap
    assert rollout.storage.rewards[:, 0, 0].tolist() == expected


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_ints_beyond_int64_convert_as_float64(numpy):
    rollout = episodes_to_rollout(
        [[_chunk("a", [2**70, 1], numpy=numpy, terminated=True)]], gamma=0.9
    )
    assert rollout.storage.rewards[:, 0, 0].tolist() == [float(np.float32(2.0**70)), 1.0]
    huge = _chunk("b", [10**400], numpy=numpy, terminated=True)
    with pytest.raises(ValueError, match="beyond any float's range"):
        episodes_to_rollout([[huge]], gamma=0.9)
