"""Masked arrays and longdouble columns on their way to training batches.

- A numpy masked array with masked entries, recorded in a list-mode episode, was batched by the
  converter and the connectors with its mask dropped: the placeholder values under it became
  data, where ``to_numpy``, the setters and the replay buffer refuse such a value. Now refused
  (``ValueError`` naming the field); a masked array with nothing masked is the plain array it
  holds, batched as one.
- ``np.longdouble`` columns reached ``torch.from_numpy`` in ``episodes_to_rollout`` and failed
  in torch's words. Those bound for a float field of the storage (values, log-probs,
  distribution parameters) are rounded into its dtype on the host, as float64 ones are; those
  kept in their own dtype (observations, actions), which no tensor holds, are the
  ``TypeError`` naming the column.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.connectors.learner import AddLearnerColumns
from episodes.connectors.list_rows import layout_rows
from episodes.connectors.observations import FlattenObservations, FrameStack
from episodes.converter import ColumnKeys, episodes_to_batch, episodes_to_rollout
from episodes.spaces import batch_with_layout

MASKED = "a numpy masked array with masked entries"
EXTRAS = ("vf_preds", "action_logp")


def masked(values: list[float], hidden: list[bool]) -> np.ma.MaskedArray:
    return np.ma.masked_array(np.asarray(values, np.float64), mask=hidden)


def episode(
    *,
    obs_at: int | None = None,
    act_at: int | None = None,
    vf_at: int | None = None,
    done: bool = True,
    length: int = 3,
    wrap: Callable[[Any, bool], Any] | None = None,
) -> SingleAgentEpisode:
    """A list-mode episode whose observation ``obs_at`` (action ``act_at``, value ``vf_at``) has
    a masked entry over a -999 placeholder; ``wrap(value, hide)`` builds every such value."""
    wrap = wrap or (lambda value, hide: masked(value, [hide] * len(value)))
    ep = SingleAgentEpisode("e")
    ep.add_env_reset(wrap([0.0, -999.0 if obs_at == 0 else 0.0], obs_at == 0))
    for t in range(1, length + 1):
        hide = obs_at == t
        ep.add_env_step(
            wrap([float(t), -999.0 if hide else float(t)], hide),
            wrap([1.0], act_at == t - 1) if act_at is not None else 1,
            1.0,
            terminated=done and t == length,
            extra_model_outputs={
                "vf_preds": wrap([0.5], vf_at == t - 1)[0] if vf_at is not None else 0.5,
                "action_logp": 0.0,
            },
        )
    return ep


def zero_values(obs: Any) -> torch.Tensor:
    return torch.zeros(len(obs))


# What each path gives for a batch of episodes: the arrays compared between masked (nothing
# masked) and plain items.
PATHS: dict[str, Callable[[list[SingleAgentEpisode]], Any]] = {
    "episodes_to_rollout": lambda eps: (
        episodes_to_rollout(eps, gamma=0.9, value_fn=zero_values).storage.observations
    ),
    "episodes_to_batch": lambda eps: episodes_to_batch(eps)["obs"],
    "episodes_to_batch next_obs": lambda eps: episodes_to_batch(eps)["next_obs"],
    "AddLearnerColumns": lambda eps: AddLearnerColumns()(eps, {})["obs"],
    "FlattenObservations": lambda eps: FlattenObservations()(eps, {})["obs"],
    "FrameStack": lambda eps: FrameStack(2, fill=np.zeros(2))(eps, {})["obs"],
}

REFUSED = [
    # (path, episode, the field named)
    ("episodes_to_rollout", episode(obs_at=1), r"^observations: item 1 of 3: "),
    ("episodes_to_batch", episode(obs_at=2), r"^observations: item 2 of 3: "),
    ("episodes_to_batch next_obs", episode(obs_at=3), r"^observations: item 2 of 3: "),
    ("AddLearnerColumns", episode(obs_at=0), r"^AddLearnerColumns' 'obs' column: item 0 of 3: "),
    ("FlattenObservations", episode(obs_at=1), r"^FlattenObservations' 'obs' column: item 1 "),
    ("FrameStack", episode(obs_at=1), r"^FrameStack's 'obs' column: "),
    # The last observation of an ongoing chunk is read only to bootstrap it.
    ("episodes_to_rollout", episode(obs_at=3, done=False), r"^observations: item 0 of 1: "),
    ("episodes_to_rollout", episode(act_at=1), r"^actions: item 1 of 3: "),
    ("episodes_to_rollout", episode(vf_at=2), r"vf_preds'\]: item 2 of 3: "),
    ("episodes_to_batch", episode(act_at=0), r"^actions: item 0 of 3: "),
]


@pytest.mark.parametrize(("path", "ep", "field"), REFUSED)
def test_masked_entries_are_refused(path: str, ep: SingleAgentEpisode, field: str) -> None:
    with pytest.raises(ValueError, match=f"{field}.*{MASKED}"):
        PATHS[path]([ep])


def nothing_masked(value: list[float], hide: bool) -> Any:
    return np.ma.masked_array(np.asarray(value, np.float64), mask=False)


def plain(value: list[float], hide: bool) -> Any:
    return np.asarray(value, np.float64)


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("done", [True, False])
def test_nothing_masked_batches_as_plain_arrays(path: str, done: bool) -> None:
    def run(wrap: Callable[[Any, bool], Any]) -> Any:
        ep = episode(wrap=wrap, done=done, act_at=-1, vf_at=-1)
        return PATHS[path]([ep])

    got, want = run(nothing_masked), run(plain)
    assert type(got) is type(want) and got.dtype == want.dtype
    assert not isinstance(got, np.ma.MaskedArray)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def longdouble_episode(where: str, numpy: bool) -> SingleAgentEpisode:
    ld = np.longdouble
    third = ld(1) / ld(3)
    ep = SingleAgentEpisode("e")
    ep.add_env_reset(np.zeros(2, ld if where == "obs" else np.float32))
    for t in range(3):
        ep.add_env_step(
            np.full(2, t, ld if where == "obs" else np.float32),
            ld(1) if where == "actions" else 1,
            1.0,
            terminated=t == 2,
            extra_model_outputs={
                "vf_preds": third * t if where == "vf_preds" else 0.5,
                "action_logp": -third * t if where == "action_logp" else 0.0,
                "logits": np.full(2, third * t, ld if where == "logits" else np.float64),
            },
        )
    if numpy:
        ep.to_numpy()
    return ep


FLOAT_FIELDS = [("vf_preds", "values"), ("action_logp", "actions_log_prob"), ("logits", "mu")]


@pytest.mark.parametrize("numpy", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("key", "field"), FLOAT_FIELDS)
def test_longdouble_rounds_into_a_float_field(
    key: str, field: str, dtype: torch.dtype, numpy: bool
) -> None:
    ep = longdouble_episode(key, numpy)
    keys = ColumnKeys(distribution=("logits",))
    storage = episodes_to_rollout([ep], gamma=0.9, keys=keys, dtype=dtype).storage
    held = storage.tensors[field] if field != "mu" else storage.distribution_params[0]
    recorded = np.asarray(ep.get_extra_model_outputs(key), np.longdouble)
    want = recorded.astype(np.float32 if dtype == torch.float32 else np.float64)
    assert held.dtype == dtype
    np.testing.assert_array_equal(held.reshape(-1).numpy(), want.reshape(-1))


@pytest.mark.parametrize("numpy", [False, True])
@pytest.mark.parametrize("where", ["obs", "actions"])
def test_longdouble_in_a_column_of_its_own_dtype_is_refused(where: str, numpy: bool) -> None:
    ep = longdouble_episode(where, numpy)
    with pytest.raises(TypeError, match="RolloutStorage holds numbers.*no tensor holds"):
        episodes_to_rollout([ep], gamma=0.9, value_fn=zero_values)


# The batching of items whose one class can hold no mask goes through ``batch_one_class``:
# it must give what ``batch_with_layout`` gives, whatever the items.
_SCALARS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**70), 2**70),
    st.booleans(),
)
NUMPY_NUMBERS = [np.dtype(code).type for code in "?bhilqBHILQefdgFDG"]
OTHER_SCALARS = [  # timedelta64 is an int by class, its items may differ in unit
    lambda v: np.timedelta64(v, "s" if v % 2 else "ms"),
    lambda v: np.datetime64(v, "D"),
    np.str_,
]
_DTYPES = st.sampled_from(["float32", "float64", "int8", "int64", "uint64", "bool", "float16"])


@st.composite
def item_lists(draw: st.DrawFn) -> list[Any]:
    size = draw(st.integers(1, 5))
    kind = draw(st.sampled_from(["scalars", "one scalar kind", "arrays", "mixed arrays", "rows"]))
    if kind == "scalars":  # any mix of Python numbers
        return draw(st.lists(_SCALARS, min_size=size, max_size=size))
    if kind == "one scalar kind":
        maker = draw(st.sampled_from([float, int, bool, *NUMPY_NUMBERS, *OTHER_SCALARS]))
        values = draw(st.lists(st.integers(0, 100), min_size=size, max_size=size))
        return [maker(v) for v in values]
    shape = draw(st.sampled_from([(), (0,), (2,), (2, 3), (1, 0)]))
    if kind == "arrays":
        dtype = draw(_DTYPES)
        return [np.asarray(draw(st.integers(0, 100)) + np.zeros(shape), dtype) for _ in range(size)]
    if kind == "mixed arrays":  # dtypes, and numbers or masked arrays with nothing masked
        out: list[Any] = []
        for _ in range(size):
            value = np.array(draw(st.integers(-(2**63), 2**64 - 1)))  # int64 or uint64
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                array = np.full(shape, value).astype(draw(_DTYPES))  # wrapped into the dtype
            form = draw(st.sampled_from(["array", "unmasked", "number"]))
            out.append(
                np.ma.masked_array(array, mask=False)
                if form == "unmasked"
                else (array.tolist() if form == "number" else array)
            )
        return out
    return [draw(st.lists(_SCALARS, min_size=2, max_size=2)) for _ in range(size)]


def _outcome(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except (ValueError, TypeError, OverflowError, IndexError) as err:  # as either raises
        return type(err)


def assert_same_batch(got: Any, want: Any) -> None:
    if isinstance(want, type):
        assert got is want
        return
    assert type(got) is type(want)
    if isinstance(want, (list, tuple)):
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert_same_batch(a, b)
        return
    assert got.dtype == want.dtype and got.shape == want.shape
    for a, b in zip(got.ravel().tolist(), want.ravel().tolist()):  # NaN equal to NaN
        assert type(a) is type(b) and (a == b or (a != a and b != b))


@settings(max_examples=300, deadline=None)
@given(items=item_lists(), space=st.sampled_from([None, "box", "discrete"]))
def test_layout_rows_batches_as_batch_with_layout(items: list[Any], space: Any) -> None:
    spaces = {"box": gym.spaces.Box(-1, 1, (2,)), "discrete": gym.spaces.Discrete(3)}
    chosen = spaces.get(space)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _outcome(lambda: layout_rows(items, chosen, "x"))
        want = _outcome(lambda: batch_with_layout(items, chosen))
    assert_same_batch(got, want)
