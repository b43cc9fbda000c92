"""Faster paths of the episode and its numpy stores give what the slower ones gave.

- A numpy store's pickle and deep copy carry its primary slots only (the layout facts are
  derived again on loading); states written with every slot still load.
- The masked-array scan counts the types of a level instead of building a set of them.
- ``get_return`` of float rewards sums them as numpy did, bit for bit.
- The constructor sets its fields with code generated from the field table.
"""

from __future__ import annotations

import copy
import math
import pickle
import struct
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.buffer import InfiniteLookbackBuffer
from episodes.buffer.array_store import ArrayStore
from episodes.buffer.plain_arrays import holds_masked, native_leaves, plain_leaves
from episodes.buffer.slots import slot_values
from episodes.buffer.view_store import ViewStore
from episodes.episode import state as snapshot
from episodes.episode.fields import FIELDS
from episodes.episode.returns import reward_sum

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in reduce:RuntimeWarning")

# ------------------------------------------------------------------ numpy stores' pickles

DERIVED = {"_kind", "_row_dtype", "_row_shape", "_always_fit", "_ranged", "_low", "_high"}


def _stores() -> list[tuple[str, Any]]:
    rows = ArrayStore.from_batch(np.arange(6, dtype=np.float32).reshape(3, 2))
    rows.append(np.ones(2, np.float32))  # pending, written in by the pickle
    scalars = ArrayStore.from_batch(np.arange(3))
    scalars.append(7)
    nested = ArrayStore.from_batch({"a": np.zeros((2, 2)), "b": (np.arange(2), np.ones(2))})
    objects = ArrayStore.from_batch(np.array([{"x": 1}, None], dtype=object))
    adopted = ArrayStore.untyped()
    adopted.append((1, 2.5))
    emptied = ArrayStore.untyped()
    emptied.append(3)
    emptied.pop(0)
    view = ViewStore.from_batch({"obs": np.arange(6).reshape(3, 2)[:, 0]})
    return [
        ("rows", rows),
        ("scalars", scalars),
        ("nested", nested),
        ("objects", objects),
        ("untyped", ArrayStore.untyped()),
        ("adopted", adopted),
        ("emptied", emptied),
        ("text", ArrayStore.from_batch(np.array(["ab", "c"]))),
        ("view", view),
    ]


STORES = _stores()


def _facts(store: ArrayStore) -> dict[str, Any]:
    """Everything a store holds, its data as lists."""
    values = slot_values(store, frozenset(("_leaves", "_before_adoption", "_origin", "_shared")))
    values.pop("detached", None)  # a copy owns its arrays: checked apart
    values["items"] = [repr(leaf[: store.size].tolist()) for leaf in store.leaves]
    values["leaf_dtypes"] = [leaf.dtype for leaf in store.leaves]
    return values


def _same_store(a: ArrayStore, b: ArrayStore) -> None:
    fa, fb = _facts(a), _facts(b)
    assert fa.keys() == fb.keys()
    for key in fa:
        assert repr(fa[key]) == repr(fb[key]), key


@pytest.mark.parametrize(("name", "store"), STORES, ids=[n for n, _ in STORES])
def test_a_store_state_holds_no_derived_slots(name: str, store: ArrayStore) -> None:
    _, state = store.__getstate__()
    assert not DERIVED & state.keys()
    assert "_shared" not in state and "_origin" not in state


@pytest.mark.parametrize(("name", "store"), STORES, ids=[n for n, _ in STORES])
@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_stores_round_trip(name: str, store: ArrayStore, how: str) -> None:
    clone = pickle.loads(pickle.dumps(store)) if how == "pickle" else copy.deepcopy(store)
    _same_store(store, clone)
    assert clone._shared is False
    if isinstance(clone, ViewStore):
        assert clone.detached and clone._origin is None
    # The clone appends as the store does (the derived slots drive the append paths).
    probe = copy.deepcopy(store)
    if store.typed and store.size:
        item = store.get(0)
        probe.append(item)
        clone.append(item)
        _same_store(probe, clone)


def _old_state(store: ArrayStore) -> tuple[None, dict[str, Any]]:
    # What __getstate__ wrote before: every slot with a value but _shared.
    slots = slot_values(store)
    slots.pop("_shared", None)
    if isinstance(store, ViewStore):
        slots.pop("_origin", None)
    return None, {**slots, "_leaves": [leaf[: store.size] for leaf in store.leaves]}


@pytest.mark.parametrize(("name", "store"), STORES, ids=[n for n, _ in STORES])
def test_states_with_every_slot_still_load(name: str, store: ArrayStore) -> None:
    old = _old_state(store)
    assert DERIVED <= old[1].keys()
    loaded = type(store).__new__(type(store))
    loaded.__setstate__(pickle.loads(pickle.dumps(old)))  # dtypes unpickled: new objects
    _same_store(store, loaded)
    assert loaded._row_dtype is np.dtype(loaded._row_dtype.type) or (
        loaded._row_dtype != np.dtype(loaded._row_dtype.type)
    )


def test_a_numpy_episode_pickles_smaller_and_round_trips() -> None:
    ep = SingleAgentEpisode(observation_space=gym.spaces.Box(-1, 1, (4,), np.float32))
    ep.add_env_reset(np.zeros(4, np.float32))
    for i in range(10):
        ep.add_env_step(np.full(4, i / 10, np.float32), 1, 0.5, extra_model_outputs={"v": 1.0})
    ep.to_numpy()
    data = pickle.dumps(ep)
    assert pickle.loads(data) == ep and copy.deepcopy(ep) == ep
    # No dtype, shape or bounds of the derived slots in the pickle.
    assert b"_row_dtype" not in data and b"_always_fit" not in data


class _Base:
    __slots__ = "a"


class _Child(_Base):
    __slots__ = ("b", "c", "__weakref__")


def test_slot_values_caches_names_per_class_and_skip() -> None:
    child = _Child()
    child.a, child.b = 1, 2
    assert slot_values(child) == {"b": 2, "a": 1}
    assert list(slot_values(child)) == ["b", "a"]
    assert slot_values(child, frozenset("a")) == {"b": 2}
    child.c = 3
    assert slot_values(child) == {"b": 2, "c": 3, "a": 1}
    base = _Base()
    assert slot_values(base) == {}


# ----------------------------------------------------------------------- the masked scan


def _holds_masked_reference(items: Any) -> bool:
    # The scan as it was: a set of the types per level (levels walked in full).
    values = list(items)
    while values:
        classes = set(map(type, values))
        if not any(issubclass(c, (np.ma.MaskedArray, dict, list, tuple)) for c in classes):
            return False
        inner: list[Any] = []
        for value in values:
            if isinstance(value, dict):
                inner.extend(value.values())
            elif isinstance(value, (list, tuple)):
                inner.extend(value)
            elif isinstance(value, np.ma.MaskedArray) and np.ma.count_masked(value):
                return True
        values = inner
    return False


class _Masked(np.ma.MaskedArray):
    pass


class _Float(float):
    pass


def _masked(mask: Any = 1) -> np.ma.MaskedArray:
    return np.ma.masked_array([1.0, 2.0], mask=[0, mask])


MASKED_CASES: list[list[Any]] = [
    [1.0, 2.0, 3.0],
    [1, 2, True],
    [np.zeros(2), np.zeros(2)],
    [np.zeros(2), _masked()],
    [_masked(), np.zeros(2)],
    [_masked(0), _masked(0)],
    [_masked(), _masked()],
    [_Float(1.0), 2.0],
    [1.0, _Masked([1.0], mask=[1])],
    [_Masked([1.0], mask=[0])],
    [np.ma.masked, 1.0],
    [np.ma.masked_array(1.0, mask=True)],
    [np.ma.masked_array(1.0, mask=False), 2.0],
    [{"a": 1.0}, {"a": 2.0}],
    [{"a": np.zeros(2)}, {"a": _masked()}],
    [{"a": (1.0, [_masked()])}],
    [(1.0, 2.0), [3.0, 4.0]],
    [(1.0, _masked()), [3.0, 4.0]],
    [[1.0], (2.0,), {"x": 3.0}],
    [[], [], ()],
    [None, "a", b"b"],
    [np.float32(1.0), 1.0],
    [{"a": {"b": {"c": [[_masked()]]}}}],
]


@pytest.mark.parametrize("items", MASKED_CASES, ids=range(len(MASKED_CASES)))
def test_masked_scan_agrees_with_the_set_scan(items: list[Any]) -> None:
    assert holds_masked(items) is _holds_masked_reference(items)
    assert holds_masked(tuple(items)) is _holds_masked_reference(items)


_LEAVES = st.sampled_from(
    [1.0, 2, True, None, "s", np.zeros(2), np.float32(1), _Float(2.0)]
    + [_masked(0), _masked(1), _Masked([1.0], mask=[1])]
)
_ITEMS = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.sampled_from("ab"), inner, max_size=2)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ITEMS, max_size=6))
def test_masked_scan_agrees_on_any_nesting(items: list[Any]) -> None:
    assert holds_masked(items) is _holds_masked_reference(items)


@pytest.mark.parametrize(
    "batch",
    [np.arange(3), np.arange(3, dtype=">i4"), np.zeros((2, 2), ">f8"), np.array(["a"])],
    ids=["native", "big-endian", "big-endian rows", "text"],
)
def test_a_flat_batch_takes_the_same_leaves_as_a_nested_one(batch: np.ndarray) -> None:
    flat_native, nested_native = native_leaves(batch), native_leaves({"x": batch})["x"]
    assert flat_native.dtype == nested_native.dtype and flat_native.dtype.isnative
    assert (flat_native is batch) is (nested_native is batch)
    leaves, structure = plain_leaves(batch)
    assert structure is None and len(leaves) == 1 and leaves[0] is batch


# -------------------------------------------------------------------------- get_return


def _numpy_sum(rewards: list[float]) -> float:
    return float(np.asarray(rewards).sum())


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


ODD_FLOATS = [0.0, -0.0, 1e308, -1e308, 5e-324, 0.1, 1 / 3, math.inf, -math.inf, math.nan]


@pytest.mark.parametrize(
    "rewards",
    [
        [-0.0],
        [-0.0, -0.0],
        [0.0, -0.0],
        [1e308, 1e308],
        [1e308, 1e308, -1e308],
        [math.inf, -math.inf],
        [math.nan, 1.0],
        [0.1] * 7,
        [0.1] * 9,
        [0.1] * 129,
        [1e16, 1.0, -1e16] * 50,
        ODD_FLOATS,
    ],
)
def test_float_rewards_sum_as_numpy_sums_them(rewards: list[float]) -> None:
    assert _bits(reward_sum(rewards)) == _bits(_numpy_sum(rewards))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(ODD_FLOATS),
        min_size=1,
        max_size=300,
    )
)
def test_any_float_rewards_sum_as_numpy_sums_them(rewards: list[float]) -> None:
    assert _bits(reward_sum(rewards)) == _bits(_numpy_sum(rewards))
    episode = SingleAgentEpisode(
        observations=[0] * (len(rewards) + 1),
        actions=[0] * len(rewards),
        rewards=rewards,
        len_lookback_buffer=0,
    )
    assert _bits(episode.get_return()) == _bits(_numpy_sum(rewards))


@pytest.mark.parametrize(
    ("rewards", "expected"),
    [
        (np.array([1.5, 2.5], ">f8"), 4.0),  # float64 of the other byte order: numpy's sum
        (np.array([[1.0], [2.0]]), 3.0),  # one number per step in arrays of one item
        ([2**62, 2**62, 0.5], 2**63 + 0.5),  # ints beside floats: numpy's float64 sum
        ([True, 1.5], 2.5),
    ],
)
def test_other_rewards_take_their_paths(rewards: Any, expected: float) -> None:
    assert reward_sum(rewards) == expected


# ---------------------------------------------------------------- generated field setting


def _reference_assign(episode: Any, values: dict[str, Any]) -> None:
    # The loop the generated code replaces.
    for field in FIELDS:
        value = snapshot.field_value(field, values.get(field.name, field.default))
        object.__setattr__(episode, field.slot, value)


_GOOD: dict[str, Any] = {
    "id_": "a",
    "agent_id": ("x", 1),
    "observations": InfiniteLookbackBuffer([0, 1]),
    "is_terminated": np.bool_(True),
    "t_started": np.int64(3),
    "t": 4,
    "observation_space": gym.spaces.Discrete(2),
    "start_time": 1,
    "last_step_time": np.float32(2.5),
    "custom_data": {"k": [1]},
    "extra_model_outputs": {"v": InfiniteLookbackBuffer([1.0])},
}

ASSIGN_CASES: list[dict[str, Any]] = [
    {},
    _GOOD,
    {**_GOOD, "custom_data": None, "extra_model_outputs": None, "observations": None},
    {**_GOOD, "is_truncated": 1},
    {**_GOOD, "t": 1.5},
    {**_GOOD, "t_started": True},
    {**_GOOD, "start_time": math.inf},
    {**_GOOD, "last_step_time": "x"},
    {**_GOOD, "actions": [1, 2]},
    {**_GOOD, "infos": [{}]},
    {**_GOOD, "extra_model_outputs": {"v": [1.0]}},
    {**_GOOD, "custom_data": [1]},
    {**_GOOD, "is_terminated": "no", "t": 1.5},  # the first refused field decides
]


def _outcome(assign: Any, values: dict[str, Any]) -> Any:
    episode = SingleAgentEpisode.__new__(SingleAgentEpisode)
    try:
        assign(episode, values)
    except Exception as error:  # noqa: BLE001 - compared below
        outcome: Any = (type(error), str(error))
    else:
        outcome = None
    slots = {}
    for field in FIELDS:
        value = getattr(episode, field.slot, "<unset>")
        if isinstance(value, InfiniteLookbackBuffer):
            value = ("buffer", value.get_state()["data"] if not value.finalized else "np")
        elif isinstance(value, dict) and field.kind == "columns":
            value = sorted(value)
        slots[field.slot] = (type(value), repr(value) if field.name != "id_" else value)
    return outcome, slots


@pytest.mark.parametrize("values", ASSIGN_CASES, ids=range(len(ASSIGN_CASES)))
def test_generated_assignments_match_the_field_loop(values: dict[str, Any]) -> None:
    got = _outcome(snapshot.assign_fields, values)
    assert got == _outcome(_reference_assign, values)


def test_a_refused_constructor_leaves_given_buffers_their_spaces() -> None:
    observations = InfiniteLookbackBuffer([0, 1], space=gym.spaces.Discrete(5))
    actions = InfiniteLookbackBuffer([0])
    with pytest.raises((ValueError, AssertionError)):
        SingleAgentEpisode(
            observations=observations,
            actions=actions,
            rewards=[1.0, 2.0],  # one too many
            observation_space=gym.spaces.Discrete(3),
            action_space=gym.spaces.Discrete(2),
        )
    assert observations.space == gym.spaces.Discrete(5) and actions.space is None
