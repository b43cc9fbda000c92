"""Episode bookkeeping found by hunt 20: checked fields, refused steps, returns, infos.

- ``from_fields`` checks ``t``/``t_started`` (integers) and the clocks (numbers or None) as
  ``from_state`` and the constructor do (contract §7.3, §8.2);
- a refused numpy step names the column whose write failed (contract §4.4);
- ``get_return`` of rewards that are not one number per step is a ``ValueError`` (§5.3);
- falsy infos record ``{}`` and an empty infos buffer means default infos, as RLlib 2.60;
- constructor arguments that are no dict / no sequence are a ``TypeError`` naming them (§8).
"""

from __future__ import annotations

import copy
import math
import re
from typing import Any

import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer as Buf
from episodes import SingleAgentEpisode as Episode
from episodes.io.format import piece_return


def _fields(**changes: Any) -> dict[str, Any]:
    values = {
        "id_": "a",
        "observations": Buf([0, 1]),
        "infos": Buf([{}, {}]),
        "actions": Buf([1]),
        "rewards": Buf([0.5]),
        "extra_model_outputs": {},
    }
    values.update(changes)
    return values


# ---------------------------------------------------------------- 1. from_fields time fields
BAD_FIELDS = {
    "float t_started and t": ({"t_started": 1.5, "t": 2.5}, "t_started must be an integer"),
    "float t": ({"t": 1.0}, "t must be an integer, got 1.0"),
    "numpy float t": ({"t": np.float64(1.0)}, "t must be an integer"),
    "bool t_started": ({"t_started": True, "t": 2}, "t_started must be an integer, got True"),
    "string times": ({"t_started": "1", "t": "2"}, "t_started must be an integer, got '1'"),
    "None times": ({"t_started": None, "t": None}, "t_started must be an integer, got None"),
    "string clock": ({"start_time": "x"}, "start_time must be a number or None, got 'x'"),
    "bool clock": ({"last_step_time": True}, "last_step_time must be a number or None"),
}


@pytest.mark.parametrize("name", BAD_FIELDS)
def test_from_fields_refuses_times_and_clocks_of_the_wrong_type(name: str) -> None:
    changes, message = BAD_FIELDS[name]
    with pytest.raises(TypeError, match=message):
        Episode.from_fields(_fields(**changes))


def test_from_fields_takes_numpy_ints_and_clocks_as_python_numbers() -> None:
    ep = Episode.from_fields(
        _fields(t_started=np.int64(3), t=np.int32(4), start_time=np.float32(1.5), last_step_time=2)
    )
    assert (ep.t_started, ep.t, len(ep), ep.get_duration_s()) == (3, 4, 1, 0.5)
    assert type(ep.t) is int and type(ep.t_started) is int
    assert Episode.from_state(ep.get_state()) == ep


def test_from_state_still_refuses_a_float_t_with_a_value_error() -> None:
    state = Episode(observations=[0, 1], actions=[0], rewards=[1.0]).get_state()
    with pytest.raises(ValueError, match="episode state's t must be an integer, got 1.0"):
        Episode.from_state({**state, "t": 1.0})


# -------------------------------------------------------- 2. the refused column is named
def _numpy_episode() -> Episode:
    ep = Episode("x")
    ep.add_env_reset(0)
    ep.add_env_step(1, 0, 1.0, extra_model_outputs={"a": 0.5, "b": 0.25})
    return ep.to_numpy()


REFUSED_EXTRAS = {
    "second key refused, given first": ({"b": "oops", "a": 0.5}, "extra_model_outputs['b']"),
    "first key refused, given last": ({"b": 0.5, "a": "oops"}, "extra_model_outputs['a']"),
    "first key refused, given first": ({"a": "oops", "b": 0.5}, "extra_model_outputs['a']"),
}


@pytest.mark.parametrize("name", REFUSED_EXTRAS)
def test_a_refused_step_names_the_column_whose_write_failed(name: str) -> None:
    extras, column = REFUSED_EXTRAS[name]
    ep = _numpy_episode()
    before = copy.deepcopy(ep)
    with pytest.raises(ValueError, match=rf"the value for {re.escape(column)} cannot be stored"):
        ep.add_env_step(2, 0, 1.0, extra_model_outputs=extras)
    assert ep == before


def test_a_refused_reward_is_still_named_rewards() -> None:
    ep = _numpy_episode()
    with pytest.raises(ValueError, match="the value for rewards cannot be stored"):
        ep.add_env_step(2, 0, "x", extra_model_outputs={"b": 0.5, "a": 0.5})


# ------------------------------------------------------------ 3. vector rewards: no return
def _vector_episode(numpy: bool) -> Episode:
    ep = Episode("x")
    ep.add_env_reset(0)
    ep.add_env_step(1, 0, np.array([1.0, 10.0]))
    ep.add_env_step(2, 0, np.array([1.0, 10.0]))
    return ep.to_numpy() if numpy else ep


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_get_return_refuses_vector_rewards(numpy: bool) -> None:
    ep = _vector_episode(numpy)
    with pytest.raises(ValueError, match=r"one number per step .* shape \(2, 2\)"):
        ep.get_return()
    assert "return=?" in repr(ep)
    assert math.isnan(piece_return(ep))  # no return: the manifest stores null


def test_get_return_refuses_ragged_rewards_and_sums_single_item_arrays() -> None:
    ragged = Episode(observations=[0, 1, 2], actions=[0, 0], len_lookback_buffer=0,
                     rewards=[np.array([1.0]), np.array([1.0, 2.0])])  # fmt: skip
    with pytest.raises(ValueError, match="one number per step .* ragged"):
        ragged.get_return()
    column = Episode(observations=[0, 1, 2], actions=[0, 0], len_lookback_buffer=0,
                     rewards=[np.array([1.0]), np.array([2.0])])  # fmt: skip
    assert column.get_return() == 3.0  # one number per step, each in a one-item array


def test_get_return_of_scalar_rewards_is_unchanged() -> None:
    ep = Episode(observations=[0, 1, 2], actions=[0, 0], len_lookback_buffer=0,
                 rewards=[np.float32(1.5), np.array(2.0)])  # fmt: skip
    assert ep.get_return() == 3.5 and ep.to_numpy().get_return() == 3.5


# --------------------------------------------------------------------- 4. falsy infos
FALSY_INFOS = {"empty list": [], "empty tuple": (), "zero": 0, "empty string": "",
               "False": False, "numpy zero": np.int64(0), "None": None}  # fmt: skip


@pytest.mark.parametrize("name", FALSY_INFOS)
def test_falsy_infos_record_an_empty_dict(name: str) -> None:
    ep = Episode("x")
    ep.add_env_reset(0, FALSY_INFOS[name])
    ep.add_env_step(1, 0, 1.0, FALSY_INFOS[name])
    assert ep.get_infos() == [{}, {}]


def test_infos_that_are_given_stay_as_given() -> None:
    info = {"k": 1}
    ep = Episode("x")
    ep.add_env_reset(0, info)
    ep.add_env_step(1, 0, 1.0, [1])
    assert ep.get_infos()[0] is info and ep.get_infos()[1] == [1]


def test_an_empty_infos_buffer_means_default_infos() -> None:
    ep = Episode(observations=[0, 1], infos=Buf(), actions=[0], rewards=[1.0],
                 len_lookback_buffer=0)  # fmt: skip
    assert ep.get_infos() == [{}, {}]
    lookback = Episode(observations=Buf([0, 1, 2], lookback=1), infos=Buf(), actions=Buf([0]),
                       rewards=Buf([1.0]))  # fmt: skip
    assert lookback.infos.lookback == 1 and lookback.get_infos() == [{}, {}]


# -------------------------------------------------------- 5. constructor argument errors
BASE = {"observations": [0, 1], "actions": [0], "rewards": [1.0], "len_lookback_buffer": 0}
EMO = "extra_model_outputs"
BAD_ARGUMENTS = {
    "extras a list of pairs": ({EMO: [("v", [0.5])]}, f"{EMO} must be a dict"),
    "extras a string": ({EMO: "v"}, f"{EMO} must be a dict .* got str"),
    "extras an int": ({EMO: 3}, f"{EMO} must be a dict .* got int"),
    "extra column a float": ({EMO: {"v": 0.5}}, rf"{EMO}\['v'\] must be a list"),
    "observations a float": ({"observations": 1.5}, "observations must be a list .* got float"),
    "infos an int": ({"infos": 7}, "infos must be a list .* got int"),
    "rewards a float": ({"rewards": 1.0}, "rewards must be a list .* got float"),
    "actions a dict of scalars": ({"actions": {"x": 1}}, "actions given as a dict must be"),
}


@pytest.mark.parametrize("name", BAD_ARGUMENTS)
def test_constructor_names_the_argument_it_refuses(name: str) -> None:
    changes, message = BAD_ARGUMENTS[name]
    with pytest.raises(TypeError, match=message):
        Episode(**{**BASE, **changes})


# ------------------------------------------- regressions found against the session's start
@pytest.mark.parametrize("reward", [[1, 2], np.array([1.0, 2.0])], ids=["list", "array"])
def test_an_object_rewards_column_refuses_a_reward_that_is_no_number(reward: Any) -> None:
    ep = Episode(observations=[0, 1, 2], actions=[0, 0], rewards=[2**70, 1], len_lookback_buffer=0)
    ep.to_numpy()
    before = copy.deepcopy(ep)
    with pytest.raises(ValueError, match="the value for rewards"):
        ep.add_env_step(3, 0, reward)
    assert ep == before and ep.get_return() == float(2**70 + 1)


@pytest.mark.parametrize("given", [np.str_("vf"), "vf"], ids=["numpy str", "str"])
def test_a_refused_step_names_the_column_of_a_key_equal_to_a_recorded_one(given: Any) -> None:
    ep = Episode(
        observations=[0, 1], actions=[0], rewards=[1.0], extra_model_outputs={"vf": [0.5]},
        len_lookback_buffer=0,
    ).to_numpy()  # fmt: skip
    with pytest.raises(ValueError, match=r"extra_model_outputs\['vf'\]"):
        ep.add_env_step(2, 0, 1.0, extra_model_outputs={given: "oops"})
    assert len(ep) == 1


@pytest.mark.parametrize(
    "scalar", [np.True_, np.array(0.5), np.array(3)], ids=["numpy bool", "0-d float", "0-d int"]
)
@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_scalars_beside_ints_beyond_int64_have_a_return(scalar: Any, numpy: bool) -> None:
    ep = Episode(
        observations=[0, 1, 2], actions=[0, 0], rewards=[2**70, scalar], len_lookback_buffer=0
    )
    if numpy:
        ep.to_numpy()
    assert ep.get_return() == float(2**70 + float(scalar))
