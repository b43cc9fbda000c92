"""custom_data a deep copy cannot make, NaNs in its keys, and flags assigned by hand.

- ``cut``/``slice`` share only the values no deep copy can make, whatever the copy raised,
  and copy everything beside them (contract §6.1, §5.3);
- ``get_state``/``from_state`` take the same copy, so they carry what ``cut`` carries (§7.3);
- ``==`` finds a NaN-holding key of ``custom_data`` in a pickled copy (§7.4);
- ``is_terminated``/``is_truncated`` take only bools (deviation flag-attribute).
"""

from __future__ import annotations

import copy
import pickle
import threading
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.episode.custom_copy import copied_custom, copied_or_shared
from episodes.structs import data_equal

NAN = float("nan")


def _episode() -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "x", observations=[0.0, 1.0, 2.0], actions=[0, 1], rewards=[1.0, 2.0], len_lookback_buffer=0
    )


class _RefusesCopy:
    """A value whose deep copy raises RuntimeError, as a torch tensor that is no graph leaf."""

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        raise RuntimeError("only graph leaves support the deepcopy protocol")


CHUNKS = {
    "cut": lambda ep: ep.cut(),
    "slice": lambda ep: ep[0:1],
    "state": lambda ep: SingleAgentEpisode.from_state(ep.get_state()),
}


# ------------------------------------------------------------------- values no copy can make
@pytest.mark.parametrize("make", list(CHUNKS))
def test_a_value_whose_copy_raises_runtime_error_is_shared(make: str) -> None:
    ep = _episode()
    odd = _RefusesCopy()
    ep.custom_data.update(odd=odd, rows=[1])
    chunk = CHUNKS[make](ep)
    assert chunk.custom_data["odd"] is odd
    rows = chunk.custom_data["rows"]
    assert rows == [1] and rows is not ep.custom_data["rows"]


@pytest.mark.parametrize("make", list(CHUNKS))
def test_a_torch_tensor_that_needs_grad_is_shared(make: str) -> None:
    torch = pytest.importorskip("torch")
    ep = _episode()
    value = torch.ones(1, requires_grad=True) * 2.0  # a critic's output, not detached
    ep.custom_data["bootstrap_value"] = value
    assert CHUNKS[make](ep).custom_data["bootstrap_value"] is value


@pytest.mark.parametrize("make", list(CHUNKS))
def test_values_beside_a_lock_are_copied_not_shared(make: str) -> None:
    ep = _episode()
    lock = threading.Lock()
    ep.custom_data["state"] = {"lock": lock, "rows": [1], "pair": ([2], lock)}
    chunk = CHUNKS[make](ep)
    state = chunk.custom_data["state"]
    assert state["lock"] is lock and state["pair"][1] is lock
    state["rows"].append(2)
    state["pair"][0].append(3)
    assert ep.custom_data["state"]["rows"] == [1]
    assert ep.custom_data["state"]["pair"][0] == [2]


def test_get_state_and_from_state_take_a_lock_as_cut_does() -> None:
    ep = _episode()
    lock = threading.Lock()
    ep.custom_data.update(lock=lock, rows=[1])
    state = ep.get_state()
    assert state["custom_data"]["lock"] is lock
    assert state["custom_data"]["rows"] is not ep.custom_data["rows"]
    back = SingleAgentEpisode.from_state(state)
    assert back.custom_data["lock"] is lock and back == ep
    assert back.custom_data["rows"] is not state["custom_data"]["rows"]


def test_the_piecewise_copy_keeps_shared_values_shared_and_cycles() -> None:
    lock = threading.Lock()
    rows = [1]
    loop: list[Any] = [lock]
    loop.append(loop)
    data = {"a": rows, "b": (rows, lock), "loop": loop, "set": {1, 2}, "frozen": frozenset({3})}
    copied = copied_custom(data)
    assert copied["a"] is copied["b"][0] and copied["a"] is not rows
    assert copied["b"][1] is lock
    assert copied["loop"][0] is lock and copied["loop"][1] is copied["loop"]
    assert copied["set"] == {1, 2} and copied["set"] is not data["set"]
    assert copied["frozen"] == frozenset({3})


def test_a_failed_copy_leaves_no_half_built_value_behind() -> None:
    class Holder:
        def __init__(self) -> None:
            self.rows = [1]
            self.lock = threading.Lock()

    holder = Holder()
    data = {"pair": [holder, holder], "plain": {"rows": [1, [2]], "arr": np.arange(3)}}
    copied = copied_custom(data)
    assert copied["pair"] is not data["pair"]  # the list is copied, the Holder shared
    assert copied["pair"][0] is holder and copied["pair"][1] is holder
    assert data_equal(copied["plain"], data["plain"])
    assert copied["plain"]["rows"][1] is not data["plain"]["rows"][1]
    assert copied_or_shared((1, "a"), {}) == (1, "a")


# -------------------------------------------------------------------------- NaNs in the keys
def test_a_nan_key_equals_its_pickled_copy() -> None:
    ep = _episode()
    ep.custom_data[("score", NAN)] = 1
    ep.custom_data[NAN] = {("inner", NAN): [NAN]}
    assert pickle.loads(pickle.dumps(ep)) == ep
    assert copy.deepcopy(ep) == ep


NAN_KEY_CASES = [  # (a, b, equal): b's NaNs are other NaN objects than a's
    ({("s", NAN): 1}, {("s", float("nan")): 1}, True),
    ({("s", NAN): 1, "k": 2}, {"k": 2, ("s", float("nan")): 1}, True),
    ({NAN: 1, float("nan"): 2}, {float("nan"): 2, float("nan"): 1}, True),
    ({("s", NAN): 1}, {("s", float("nan")): 2}, False),
    ({("s", NAN): 1}, {("t", float("nan")): 1}, False),
    ({("s", NAN): 1, "k": 2}, {("s", float("nan")): 1, "j": 2}, False),
    ({NAN: 1, float("nan"): 1}, {float("nan"): 1}, False),
]


def test_data_equal_pairs_nan_keys_and_nothing_else() -> None:
    for a, b, equal in NAN_KEY_CASES:
        assert data_equal(a, b) is equal and data_equal(b, a) is equal, (a, b)


# ---------------------------------------------------------------------------------- the flags
@pytest.mark.parametrize("name", ["is_terminated", "is_truncated"])
@pytest.mark.parametrize("value", ["no", 1, 0, None, np.array([True])], ids=repr)
def test_a_flag_that_is_no_bool_is_refused(name: str, value: Any) -> None:
    ep = _episode()
    with pytest.raises(TypeError, match=f"{name} must be a bool"):
        setattr(ep, name, value)
    assert getattr(ep, name) is False and ep.is_done is False
    assert SingleAgentEpisode.from_state(ep.get_state()) == ep


@pytest.mark.parametrize("name", ["is_terminated", "is_truncated"])
def test_a_flag_takes_bools_and_numpy_bools_as_bools(name: str) -> None:
    ep = _episode()
    setattr(ep, name, np.True_)
    assert getattr(ep, name) is True and ep.is_done is True
    assert SingleAgentEpisode.from_state(ep.get_state()) == ep
    for other in (pickle.loads(pickle.dumps(ep)), copy.deepcopy(ep), ep[0:2]):
        assert getattr(other, name) is True and other.is_done
    setattr(ep, name, False)
    assert getattr(ep, name) is False and ep.is_done is False
    fresh = SingleAgentEpisode()
    fresh.add_env_reset(0)
    fresh.add_env_step(1, 0, 1.0, **{name[3:]: np.True_})
    assert getattr(fresh, name) is True and fresh.is_done


def test_a_pickle_naming_the_flags_without_underscore_still_loads_checked() -> None:
    # Pickles made before the flags moved behind properties name them "is_terminated".
    state = _episode().__getstate__()
    old = {k.lstrip("_") if k.startswith("_is_") else k: v for k, v in state.items()}
    old["is_terminated"] = np.True_
    back = SingleAgentEpisode.__new__(SingleAgentEpisode)
    back.__setstate__(old)
    assert back.is_terminated is True and back.is_truncated is False and back.is_done
