"""The C accelerator does exactly what the pure-Python code it mirrors does.

The module ``episodes._speedups`` (sources in ``episodes/_csrc/``) speeds up ``add_env_step``,
small Box checks and row stacking; the Python implementations stay the reference. Here:

- a property runs drawn step sequences (good and hostile arguments, every call style, list and
  numpy mode, done and unreset episodes) through the C method and through the Python one on
  copies of the same episode, and compares outcome, error message and the storage state;
- a property compares the C Box checker with ``space.contains`` on arrays of many dtypes,
  layouts and byte orders;
- tables name the rows the C row-joiner must refuse (the Python path then decides);
- reference counts stay exact (no leak, no premature free).

Where the extension is not built these tests skip, except the one that insists on it when
``EPISODES_REQUIRE_SPEEDUPS=1`` (set by ``make test``).
"""

from __future__ import annotations

import copy
import importlib.util
import os
import sys
import warnings
from collections import OrderedDict
from typing import Any

import gymnasium.spaces as gs
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode, _accel
from episodes.spaces.batching import _join_rows_python, batch
from episodes.spaces.contains import make_checker
from episodes.structs import data_equal
from tests.properties.test_bad_input_properties import _action, _obs, hostile_values, recorded

speedups = _accel.speedups
needs_speedups = pytest.mark.skipif(speedups is None, reason="the C accelerator is not built")
PYTHON_STEP = SingleAgentEpisode._add_env_step_python  # type: ignore[attr-defined]


def test_the_accelerator_is_built_where_required():
    if os.environ.get("EPISODES_REQUIRE_SPEEDUPS", "") in ("", "0"):
        pytest.skip("EPISODES_REQUIRE_SPEEDUPS is not set")
    # Built, whether or not this run turned it off.
    assert importlib.util.find_spec("episodes._speedups") is not None, "no compiled module"
    if os.environ.get("EPISODES_PURE_PYTHON", "") not in ("", "0"):
        assert speedups is None  # turned off: the pure-Python paths run
        assert SingleAgentEpisode.add_env_step is PYTHON_STEP
    else:
        assert speedups is not None, "episodes._speedups did not import"
        assert SingleAgentEpisode.add_env_step is not PYTHON_STEP


@needs_speedups
def test_the_c_method_keeps_the_python_signature_and_docs():
    import inspect

    python_params = list(inspect.signature(PYTHON_STEP).parameters)
    assert list(inspect.signature(SingleAgentEpisode.add_env_step).parameters) == python_params
    assert "Records one env step" in (SingleAgentEpisode.add_env_step.__doc__ or "")


@needs_speedups
def test_a_failed_bind_leaves_the_c_step_working():
    with pytest.raises((AttributeError, TypeError)):
        speedups.bind(  # type: ignore[union-attr]
            episode_type=SingleAgentEpisode,
            buffer_type=object,  # no ``_items`` slot to read
            columns_type=object,
            slow=PYTHON_STEP,
            clock=lambda: 0.0,
            integers=frozenset(),
            max_pending=1,
            doc="",
        )
    ep = SingleAgentEpisode()
    ep.add_env_reset(0)
    assert not traced(ep.add_env_step, 1, 0, 1.0)[0]
    assert ep.get_observations() == [0, 1] and ep.t == 1


# ---------------------------------------------------------------------------- add_env_step
def storage_state(ep: SingleAgentEpisode) -> dict[str, Any]:
    """Everything a step can change, down to the numpy columns' pending lists."""
    state: dict[str, Any] = {
        "t": ep.t,
        "flags": (ep.is_terminated, ep.is_truncated),
        "started": ep._start_time is not None,
        "stepped": ep._last_step_time is not None,
        "extra_keys": list(ep.extra_model_outputs),
    }
    columns = {
        "observations": ep.observations,
        "actions": ep.actions,
        "rewards": ep.rewards,
        "infos": ep.infos,
        **{f"emo[{k}]": c for k, c in ep.extra_model_outputs.items()},
    }
    for name, column in columns.items():
        cols = column._columns
        if cols is None:
            state[name] = ("list", column.lookback, list(column._items))
        else:
            pending = list(cols._pending)  # read before leaf_views() writes them out
            views = [(v.dtype.str, v.shape, v.tobytes()) for v in cols.leaf_views()]
            state[name] = ("numpy", column.lookback, cols.size, cols._kind, pending, views)
    return state


def same(a: Any, b: Any) -> bool:
    """Equal down to the types of stored items (the objects a step hands over are shared)."""
    if isinstance(a, (tuple, list)) and type(a) is type(b):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and type(a) is type(b) and a.keys() == b.keys():
        return all(same(a[k], b[k]) for k in a)
    return a is b or (type(a) is type(b) and data_equal(a, b))


def assert_same_storage(fast: SingleAgentEpisode, slow: SingleAgentEpisode) -> None:
    fast_state, slow_state = storage_state(fast), storage_state(slow)
    assert fast_state.keys() == slow_state.keys()
    for key in fast_state:
        assert same(fast_state[key], slow_state[key]), (key, fast_state[key], slow_state[key])


def _outcome(step, ep, args, kwargs):
    try:
        step(ep, *args, **kwargs)
    except Exception as error:  # noqa: BLE001 - the exact type and message are compared
        return type(error), str(error)
    return None


def traced(step, *args, **kwargs) -> tuple[bool, Any]:
    """Calls ``step``: whether the Python add_env_step ran (the C path handed over), and what
    ``step`` returned."""
    entered = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is PYTHON_STEP.__code__:
            entered.append(True)

    sys.setprofile(profile)
    try:
        result = step(*args, **kwargs)
    finally:
        sys.setprofile(None)
    return bool(entered), result


@st.composite
def step_calls(draw: st.DrawFn, ep: SingleAgentEpisode):
    """One add_env_step call as (args, kwargs), in any of the ways Python allows."""
    kind = ep.custom_data.get("kind", "discrete")
    i = ep.t + 1
    value = draw(hostile_values())
    observation = draw(st.sampled_from([_obs(i), value]))
    action = draw(st.sampled_from([_action(kind, i), value, np.int64(1), np.int32(-1), 2**70]))
    reward = draw(st.sampled_from([1.0, value, np.float32(0.5), 3, np.float64(2.0)]))
    extras = draw(
        st.sampled_from(
            [
                {"vf": 0.5},
                {"vf": value},
                {"vf": np.float32(1.5)},
                None,
                {},
                {"vf": 0.5, "new": 1.0},
                {"new": 1.0},
                OrderedDict(vf=0.5),
            ]
        )
    )
    infos = draw(st.sampled_from([None, {"i": i}, "not a dict"]))
    flags = draw(
        st.sampled_from(
            [
                {},
                {"terminated": True},
                {"truncated": True},
                {"terminated": True, "truncated": True},
                {"terminated": False, "truncated": False},
                {"terminated": np.True_},
                {"truncated": 1},
                {"terminated": 0},
                {"terminated": None},
            ]
        )
    )
    style = draw(st.sampled_from(["infos positional", "infos keyword", "all keywords", "bad"]))
    kwargs: dict[str, Any] = dict(flags)
    if extras is not None or draw(st.booleans()):
        kwargs["extra_model_outputs"] = extras
    if style == "infos positional":
        args: tuple[Any, ...] = (observation, action, reward, infos)
    elif style == "infos keyword":
        args = (observation, action, reward)
        kwargs["infos"] = infos
    elif style == "all keywords":
        args = ()
        kwargs.update(observation=observation, action=action, reward=reward, infos=infos)
    else:
        args = draw(st.sampled_from([(observation,), (observation, action, reward, infos, True)]))
        if draw(st.booleans()):
            kwargs["unknown"] = 1
    return args, kwargs


@st.composite
def episodes_to_step(draw: st.DrawFn) -> SingleAgentEpisode:
    which = draw(st.sampled_from(["recorded", "recorded", "recorded", "fresh", "done"]))
    if which == "fresh":
        return SingleAgentEpisode("ep")
    ep = draw(recorded())
    if which == "done":
        ep.is_terminated = True
    return ep


@needs_speedups
@settings(
    max_examples=600,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(data=st.data())
def test_c_and_python_add_env_step_agree(data):
    fast = data.draw(episodes_to_step())
    slow = copy.deepcopy(fast)
    for _ in range(data.draw(st.integers(1, 4))):
        args, kwargs = data.draw(step_calls(fast))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            handed_over, fast_outcome = traced(
                _outcome, SingleAgentEpisode.add_env_step, fast, args, kwargs
            )
            slow_outcome = _outcome(PYTHON_STEP, slow, args, kwargs)
        event("handed to Python" if handed_over else "C fast path")
        assert fast_outcome == slow_outcome
        assert_same_storage(fast, slow)
        assert fast == slow


@needs_speedups
@pytest.mark.parametrize("mode", ["list", "numpy"])
def test_many_steps_cross_the_pending_flush_the_same_way(mode):
    space = gs.Box(-1.0, 1.0, (3,), np.float32)
    fast = SingleAgentEpisode("x", observation_space=space, action_space=gs.Discrete(4))
    fast.add_env_reset(np.zeros(3, np.float32))
    if mode == "numpy":
        fast.to_numpy()
    slow = copy.deepcopy(fast)
    rows = np.random.default_rng(0).uniform(-1, 1, (9000, 3)).astype(np.float32)
    for i in range(9000):
        step = (rows[i], i % 4, float(i))
        extras = {"logp": -float(i)}
        if i == 0:
            # The first step adds the key (the Python path); every later one is plain.
            fast.add_env_step(*step, extra_model_outputs=extras)
        else:
            assert not traced(fast.add_env_step, *step, extra_model_outputs=extras)[0]
        PYTHON_STEP(slow, *step, extra_model_outputs={"logp": -float(i)})
        if i % 1500 == 0:
            assert_same_storage(fast, slow)
    assert_same_storage(fast, slow)
    assert fast == slow
    fast.validate()


@needs_speedups
@pytest.mark.parametrize("mode", ["list", "numpy"])
def test_reference_counts_stay_exact(mode):
    ep = SingleAgentEpisode("x")
    ep.add_env_reset(np.zeros(2, np.float32))
    ep.add_env_step(np.zeros(2, np.float32), 0, 0.0, extra_model_outputs={"vf": 0.0})
    if mode == "numpy":
        ep.to_numpy()
    observation, action, reward = np.ones(2, np.float32), 1, 1.5
    info, vf = {"k": 1}, 0.25
    held = [sys.getrefcount(x) for x in (observation, reward, info, vf)]
    for _ in range(100):
        ep.add_env_step(observation, action, reward, info, extra_model_outputs={"vf": vf})
    after = [sys.getrefcount(x) for x in (observation, reward, info, vf)]
    # List mode keeps each object once per step; numpy mode copies the row's bytes and keeps
    # numbers only until the next read writes them into the arrays.
    observation_refs = 100 if mode == "list" else 0
    assert after == [held[0] + observation_refs, held[1] + 100, held[2] + 100, held[3] + 100]
    ep.get_rewards()  # numpy mode: the pending numbers are written out and released
    del ep
    assert [sys.getrefcount(x) for x in (observation, reward, info, vf)] == held


# ------------------------------------------------------------------------------- BoxCheck
BOX_DTYPES = [np.float32, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32]


@st.composite
def boxes_and_arrays(draw: st.DrawFn):
    dtype = np.dtype(draw(st.sampled_from(BOX_DTYPES)))
    shape = draw(st.sampled_from([(1,), (4,), (2, 3), (16,), (2, 2, 2)]))
    if dtype.kind == "f":
        low = draw(st.sampled_from([-1.0, 0.0, -np.inf]))
        high = draw(st.sampled_from([1.0, 2.5, np.inf]))
        per_element = draw(st.booleans())
        if per_element:
            low = np.linspace(-1, 0, int(np.prod(shape))).reshape(shape).astype(dtype)
            high = low + np.asarray(draw(st.sampled_from([0.5, 2.0])), dtype)
        space = gs.Box(low, high, shape if not per_element else None, dtype)
    else:
        info = np.iinfo(dtype)
        low = draw(st.sampled_from([int(info.min), 0, 1]))
        high = draw(st.sampled_from([int(info.max), 5, 100]))
        space = gs.Box(low, high, shape, dtype)
    base = space.sample()
    item_dtype = draw(st.sampled_from([dtype, dtype, np.float64, np.int8, np.float16, np.bool_]))
    variant = draw(
        st.sampled_from(
            ["same", "nan", "above", "below", "wrong shape", "fortran", "strided", "swapped"]
        )
    )
    with np.errstate(all="ignore"):  # a cast may overflow: any resulting item is a fair input
        item = base.astype(item_dtype)
    flat = item.reshape(-1).copy()
    k = draw(st.integers(0, flat.size - 1))
    if variant == "nan" and flat.dtype.kind == "f":
        flat[k] = np.nan
    elif variant in ("above", "below"):
        # Just past a finite bound: the next float, or one more/less for integers.
        bound = float((space.high if variant == "above" else space.low).reshape(-1)[k])
        direction = np.inf if variant == "above" else -np.inf
        if np.isfinite(bound):
            past = np.nextafter(bound, direction) if flat.dtype.kind == "f" else bound
            past += 0 if flat.dtype.kind == "f" else (1 if variant == "above" else -1)
            try:
                with np.errstate(all="ignore"):
                    flat[k] = past
            except OverflowError:
                pass  # not representable in the item's dtype: the item stays as sampled
    item = flat.reshape(item.shape)
    if variant == "wrong shape":
        item = np.concatenate([item.reshape(-1), item.reshape(-1)[:1]])
    elif variant == "fortran" and item.ndim > 1:
        item = np.asfortranarray(item)
    elif variant == "strided":
        item = np.repeat(item.reshape(-1), 2)[::2].reshape(item.shape)
    elif variant == "swapped":
        item = item.astype(item.dtype.newbyteorder())
    return space, item


@needs_speedups
@settings(max_examples=400, deadline=None)
@given(case=boxes_and_arrays())
def test_the_c_box_checker_agrees_with_gymnasium(case):
    space, item = case
    check = make_checker(space)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = bool(space.contains(item))
    assert check(item) is expected


@needs_speedups
def test_small_native_boxes_get_the_c_checker_and_others_do_not():
    assert isinstance(make_checker(gs.Box(-1.0, 1.0, (4,), np.float32)), speedups.BoxCheck)  # type: ignore[union-attr]
    for python_only in (
        gs.Box(-1.0, 1.0, (5, 5), np.float32),  # large: one numpy comparison is faster
        gs.Box(-1.0, 1.0, (), np.float32),  # scalar: numbers are judged by value
        gs.Box(-1, 1, (4,), np.int64),  # 64-bit integers do not fit a double exactly
        gs.Box(-1.0, 1.0, (4,), np.float16),
    ):
        assert not isinstance(make_checker(python_only), speedups.BoxCheck)  # type: ignore[union-attr]


# ------------------------------------------------------------------------------ join_rows
F32 = np.float32
REFUSED_ROWS = {
    "other_dtype_same_size": [np.zeros(2, F32), np.zeros(2, np.int32)],
    "other_shape_same_bytes": [np.zeros(4, F32), np.zeros((2, 2), F32)],
    "shorter_row": [np.zeros(4, F32), np.zeros(3, F32)],
    "non_contiguous_row": [np.zeros(2, F32), np.zeros(4, F32)[::2]],
    "swapped_byte_order": [np.zeros(2, F32), np.zeros(2, F32).astype(">f4")],
    "subclass_row": [np.zeros(2, F32), np.zeros(2, F32).view(np.ma.MaskedArray)],
    "not_an_array": [np.zeros(2, F32), [0.0, 0.0]],
}


@needs_speedups
@pytest.mark.parametrize("rows", REFUSED_ROWS.values(), ids=REFUSED_ROWS.keys())
def test_join_rows_refuses_what_is_not_one_plain_layout(rows):
    out = np.empty((len(rows), *rows[0].shape), rows[0].dtype)
    assert speedups.join_rows(rows, out) is False  # type: ignore[union-attr]


@needs_speedups
@pytest.mark.parametrize("dtype", ["object", "U3", "complex64", "datetime64[s]"])
def test_join_rows_never_byte_copies_references_or_exotic_dtypes(dtype):
    rows = [np.zeros(2, dtype), np.zeros(2, dtype)]
    out = np.empty((2, 2), dtype)
    try:
        joined = speedups.join_rows(rows, out)  # type: ignore[union-attr]
    except (BufferError, ValueError, TypeError):
        joined = False  # no buffer to write into: refused before any copy
    assert joined is False


JOINED_ROWS = {
    "float32_rows": [np.arange(3, dtype=F32) + i for i in range(5)],
    "bool_rows": [np.array([True, False]), np.array([False, False])],
    "uint8_images": [np.full((2, 2, 3), i, np.uint8) for i in range(3)],
    "empty_rows": [np.zeros(0, F32), np.zeros(0, F32)],
    "one_row": [np.ones(4)],
    **REFUSED_ROWS,
}


@pytest.mark.parametrize("rows", JOINED_ROWS.values(), ids=JOINED_ROWS.keys())
def test_batch_of_rows_is_what_asarray_builds(rows):
    try:
        expected = np.asarray(rows)
    except ValueError:
        with pytest.raises(ValueError):
            batch(rows)
        assert _join_rows_python(rows) is None
        return
    for joined in (batch(rows), _join_rows_python(rows)):
        if joined is None:
            continue
        assert joined.dtype == expected.dtype and joined.shape == expected.shape
        np.testing.assert_array_equal(joined, expected)


BAD_BOX_CHECKS = {
    "64_bit_integers": dict(format="q", shape=(2,), low=(0.0,), high=(1.0,)),
    "two_char_format": dict(format="<f", shape=(2,), low=(0.0,), high=(1.0,)),
    "scalar_shape": dict(format="f", shape=(), low=(0.0,), high=(1.0,)),
    "negative_dimension": dict(format="f", shape=(-1,), low=(0.0,), high=(1.0,)),
    "bounds_count": dict(format="f", shape=(3,), low=(0.0, 1.0), high=(1.0, 2.0)),
    "low_high_lengths": dict(format="f", shape=(2,), low=(0.0,), high=(1.0, 2.0)),
}


@needs_speedups
@pytest.mark.parametrize("kwargs", BAD_BOX_CHECKS.values(), ids=BAD_BOX_CHECKS.keys())
def test_box_check_refuses_layouts_it_cannot_read(kwargs):
    with pytest.raises(ValueError):
        speedups.BoxCheck(fallback=bool, **kwargs)  # type: ignore[union-attr]
