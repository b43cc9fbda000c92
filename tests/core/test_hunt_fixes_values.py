"""What a numpy'd column takes (contract §3.7, §4.4; deviation numpy-step-misfit).

- A column of numbers or bools takes numbers and bools only: None, strings (even "2.5") and
  dicts are a ValueError naming the column, nothing changed (numpy cast them: None to NaN,
  "2.5" to 2.5, "False" to True).
- A flat object column stores an appended or set value itself, not a 0-d array wrapping it.
- A float column refuses a finite value its dtype would turn into inf (1e40 into float32), by
  append, set, extend and concat alike; inf and NaN themselves stay accepted.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode

OB = np.zeros(2, np.float32)
VF = {"vf": np.float32(0)}


def _numpy_episode() -> SingleAgentEpisode:
    """Float32 observations rows, int64 actions, float64 rewards, a float32 "vf" column."""
    ep = SingleAgentEpisode("x")
    ep.add_env_reset(OB)
    for t in range(1, 4):
        row = np.full(2, t, np.float32)
        ep.add_env_step(row, 0, 1.0, extra_model_outputs={"vf": np.float32(t)})
    return ep.to_numpy()


def _mask_episode() -> SingleAgentEpisode:
    """A numpy'd episode with a bool extra-model-output (an action mask, say)."""
    ep = SingleAgentEpisode("x")
    ep.add_env_reset(0)
    for _ in range(2):
        ep.add_env_step(1, 0, 1.0, extra_model_outputs={"mask": np.bool_(False)})
    return ep.to_numpy()


def _float_buffer() -> InfiniteLookbackBuffer:
    buf = InfiniteLookbackBuffer([1.0, 2.0])
    buf.finalize()
    return buf


def _successor(reward: Any, *, numpy: bool) -> SingleAgentEpisode:
    """A chunk continuing :func:`_numpy_episode` whose one step has ``reward``."""
    successor = SingleAgentEpisode(
        "x",
        observations=[np.full(2, 3, np.float32), OB],
        actions=[0],
        rewards=[reward],
        extra_model_outputs={"vf": [np.float32(0)]},
        t_started=3,
        len_lookback_buffer=0,
    )
    return successor.to_numpy() if numpy else successor


# (make the object, write a value it cannot hold, the column the error names)
NOT_NUMBERS: dict[str, tuple[Callable[[], Any], Callable[[Any], None], str]] = {
    "step reward None (was NaN)": (
        _numpy_episode,
        lambda ep: ep.add_env_step(OB, 0, None, extra_model_outputs=VF),
        "rewards",
    ),
    "step reward '2.5' (was 2.5)": (
        _numpy_episode,
        lambda ep: ep.add_env_step(OB, 0, "2.5", extra_model_outputs=VF),
        "rewards",
    ),
    "step reward 'nan' (was NaN)": (
        _numpy_episode,
        lambda ep: ep.add_env_step(OB, 0, "nan", extra_model_outputs=VF),
        "rewards",
    ),
    "step action '3' into int64 (was 3)": (
        _numpy_episode,
        lambda ep: ep.add_env_step(OB, "3", 1.0, extra_model_outputs=VF),
        "actions",
    ),
    "step extra-model-output None (was NaN)": (
        _numpy_episode,
        lambda ep: ep.add_env_step(OB, 0, 1.0, extra_model_outputs={"vf": None}),
        "vf",
    ),
    "step observation [None, '7'] (was [nan, 7])": (
        _numpy_episode,
        lambda ep: ep.add_env_step([None, "7"], 0, 1.0, extra_model_outputs=VF),
        "observations",
    ),
    "set extra-model-output None (was NaN)": (
        _numpy_episode,
        lambda ep: ep.set_extra_model_outputs(key="vf", new_data=None, at_indices=0),
        "vf",
    ),
    "set extra-model-output '3' (was 3.0)": (
        _numpy_episode,
        lambda ep: ep.set_extra_model_outputs(key="vf", new_data="3", at_indices=0),
        "vf",
    ),
    "set a batch of strings (was [5.0, 6.0])": (
        _numpy_episode,
        lambda ep: ep.set_extra_model_outputs(
            key="vf", new_data=np.array(["5", "6"]), at_indices=slice(0, 2)
        ),
        "vf",
    ),
    "set a batch of None (was NaN)": (
        _numpy_episode,
        lambda ep: ep.set_extra_model_outputs(
            key="vf", new_data=np.array([None, None]), at_indices=slice(0, 2)
        ),
        "vf",
    ),
    "step bool 'False' (was True)": (
        _mask_episode,
        lambda ep: ep.add_env_step(2, 0, 1.0, extra_model_outputs={"mask": "False"}),
        "mask",
    ),
    "step bool 'x' (was True)": (
        _mask_episode,
        lambda ep: ep.add_env_step(2, 0, 1.0, extra_model_outputs={"mask": "x"}),
        "mask",
    ),
    "step bool dict (was True)": (
        _mask_episode,
        lambda ep: ep.add_env_step(2, 0, 1.0, extra_model_outputs={"mask": {"k": 1}}),
        "mask",
    ),
    "step bool None (was False)": (
        _mask_episode,
        lambda ep: ep.add_env_step(2, 0, 1.0, extra_model_outputs={"mask": None}),
        "mask",
    ),
    "set bools from strings (was [True, True])": (
        _mask_episode,
        lambda ep: ep.set_extra_model_outputs(
            key="mask", new_data=np.array(["False", "no"]), at_indices=slice(0, 2)
        ),
        "mask",
    ),
    "concat a list-mode chunk with reward None": (
        _numpy_episode,
        lambda ep: ep.concat_episode(_successor(None, numpy=False)),
        "rewards",
    ),
    "concat a list-mode chunk with reward '2.5'": (
        _numpy_episode,
        lambda ep: ep.concat_episode(_successor("2.5", numpy=False)),
        "rewards",
    ),
    "concat a numpy'd chunk with an object reward column": (
        _numpy_episode,
        lambda ep: ep.concat_episode(_successor(None, numpy=True)),
        "rewards",
    ),
    "concat a numpy'd chunk with a string reward column": (
        _numpy_episode,
        lambda ep: ep.concat_episode(_successor("2.5", numpy=True)),
        "rewards",
    ),
    "buffer append None (was NaN)": (
        _float_buffer,
        lambda buf: buf.append(None),
        "numpy column",
    ),
    "buffer append '4' (was 4.0)": (
        _float_buffer,
        lambda buf: buf.append("4"),
        "numpy column",
    ),
    "buffer set None (was NaN)": (
        _float_buffer,
        lambda buf: buf.set(None, at_indices=0),
        "numpy column",
    ),
    "buffer extend with an object batch (was NaN)": (
        _float_buffer,
        lambda buf: buf.extend(np.array([None, 1.0])),
        "numpy column",
    ),
}


@pytest.mark.parametrize("make, write, column", NOT_NUMBERS.values(), ids=NOT_NUMBERS.keys())
def test_a_number_column_refuses_what_is_no_number(make, write, column) -> None:
    thing = make()
    before = copy.deepcopy(thing)
    with pytest.raises(ValueError, match=column) as caught:
        write(thing)
    assert "numpy column" in str(caught.value)
    assert thing == before


NUMBERS_STILL_TAKEN = {
    "a numpy bool into floats": (np.float64, np.bool_(True), 1.0),
    "an int beyond int64 into float64": (np.float64, 2**70, float(2**70)),
    "an int beyond int64 into float32": (np.float32, 2**70, float(np.float32(2**70))),
    "a 0-d float array into float64": (np.float64, np.array(2.5), 2.5),
    "inf into float32": (np.float32, float("inf"), float("inf")),
    "float32's largest value": (np.float32, 3.4e38, float(np.float32(3.4e38))),
}


@pytest.mark.parametrize("op", ["append", "set"])
@pytest.mark.parametrize(
    "dtype, value, stored", NUMBERS_STILL_TAKEN.values(), ids=NUMBERS_STILL_TAKEN.keys()
)
def test_numbers_still_fit(op: str, dtype: Any, value: Any, stored: float) -> None:
    buf = InfiniteLookbackBuffer([dtype(1), dtype(2)])
    buf.finalize()
    if op == "append":
        buf.append(value)
    else:
        buf.set(value, at_indices=-1)
    assert buf.get(-1).item() == stored and buf.get().dtype == dtype


def test_nan_still_fits_a_float32_column() -> None:
    buf = InfiniteLookbackBuffer([np.float32(1)])
    buf.finalize()
    buf.append(float("nan"))
    buf.set(np.float64("nan"), at_indices=0)
    assert np.isnan(buf.get()).all() and buf.get().dtype == np.float32


# -------------------------------------------------------------------- object columns
def test_an_object_column_stores_an_appended_value_itself() -> None:
    ep = SingleAgentEpisode("x")
    ep.add_env_reset(0)
    ep.add_env_step(1, 0, 1.0, extra_model_outputs={"note": Fraction(1, 3)})
    ep.to_numpy()
    assert ep.extra_model_outputs["note"].data.dtype == object
    ep.add_env_step(2, 0, 1.0, extra_model_outputs={"note": Fraction(2, 3)})
    last = ep.get_extra_model_outputs("note", -1)
    assert type(last) is Fraction and last == Fraction(2, 3)
    assert [type(v) for v in ep.get_extra_model_outputs("note")] == [Fraction, Fraction]


@pytest.mark.parametrize("op", ["append", "set", "extend"])
def test_an_object_buffer_stores_the_value_itself(op: str) -> None:
    buf = InfiniteLookbackBuffer([Fraction(1, 2), Fraction(1, 3)])
    buf.finalize()
    if op == "append":
        buf.append(Fraction(3, 4))
    elif op == "set":
        buf.set(Fraction(3, 4), at_indices=-1)
    else:
        buf.extend([Fraction(3, 4)])
    got = buf.get(-1)
    assert type(got) is Fraction and got == Fraction(3, 4)


# ---------------------------------------------------------- floats beyond their range
def _float32_buffer() -> InfiniteLookbackBuffer:
    buf = InfiniteLookbackBuffer([np.float32(1), np.float32(2)])
    buf.finalize()
    return buf


def _float32_vf_episode() -> SingleAgentEpisode:
    return _numpy_episode()  # its "vf" column is float32


def _vf_successor(vf: Any, *, numpy: bool) -> SingleAgentEpisode:
    successor = SingleAgentEpisode(
        "x",
        observations=[np.full(2, 3, np.float32), OB],
        actions=[0],
        rewards=[1.0],
        extra_model_outputs={"vf": [vf]},
        t_started=3,
        len_lookback_buffer=0,
    )
    return successor.to_numpy() if numpy else successor


BEYOND_FLOAT32 = {
    "append a Python float": (_float32_buffer, lambda buf: buf.append(1e40)),
    "append a numpy float64": (_float32_buffer, lambda buf: buf.append(np.float64(1e40))),
    "append a Python int": (_float32_buffer, lambda buf: buf.append(10**39)),
    "append a 0-d array": (_float32_buffer, lambda buf: buf.append(np.array(1e40))),
    "set a Python float": (_float32_buffer, lambda buf: buf.set(1e40, at_indices=0)),
    "extend with a float64 batch": (_float32_buffer, lambda buf: buf.extend(np.array([1e40]))),
    "extend with a list": (_float32_buffer, lambda buf: buf.extend([1.0, 1e40])),
    "step an extra-model-output": (
        _float32_vf_episode,
        lambda ep: ep.add_env_step(OB, 0, 1.0, extra_model_outputs={"vf": 1e40}),
    ),
    "step an observation row": (
        _float32_vf_episode,
        lambda ep: ep.add_env_step([0.0, 1e40], 0, 1.0, extra_model_outputs=VF),
    ),
    "concat a list-mode chunk": (
        _float32_vf_episode,
        lambda ep: ep.concat_episode(_vf_successor(1e40, numpy=False)),
    ),
    "concat a numpy'd float64 chunk": (
        _float32_vf_episode,
        lambda ep: ep.concat_episode(_vf_successor(1e40, numpy=True)),
    ),
}


@pytest.mark.filterwarnings("error::RuntimeWarning")  # refused, not cast to inf with a warning
@pytest.mark.parametrize("make, write", BEYOND_FLOAT32.values(), ids=BEYOND_FLOAT32.keys())
def test_a_float32_column_refuses_what_would_be_inf(make, write) -> None:
    thing = make()
    before = copy.deepcopy(thing)
    with pytest.raises(ValueError, match="float32"):
        write(thing)
    assert thing == before
