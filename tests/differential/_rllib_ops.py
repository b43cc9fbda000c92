"""Helpers for the RLlib differential tests: twin episodes, random values, leaf-wise comparison.

Everything here runs one operation on OUR object and on RLlib's, and compares what comes back.
Known RLlib deviations (docs/deviations.md) are recognised by the ``*_deviation`` predicates so
the random tests can leave those cases out of the comparison; each has its own direct test.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np

# Imported in the reference venv only: conftest.py leaves this module out of the project
# venv's collection (--doctest-modules), and makes a failing RLlib import stop the run.
from ray.rllib.env.single_agent_episode import SingleAgentEpisode as RSAE
from ray.rllib.env.utils.infinite_lookback_buffer import InfiniteLookbackBuffer as RBuf

from episodes import InfiniteLookbackBuffer as OBuf
from episodes import SingleAgentEpisode as OSAE

__all__ = ["OBuf", "OSAE", "RBuf", "RSAE"]

BOX_OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
DICT_OBS = gym.spaces.Dict(
    {"pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32), "k": gym.spaces.Discrete(3)}
)
DISCRETE_ACT = gym.spaces.Discrete(4)
MULTI_ACT = gym.spaces.MultiDiscrete([3, 2])
OBS_SPACES = {"box": BOX_OBS, "dict": DICT_OBS}
ACT_SPACES = {"discrete": DISCRETE_ACT, "multidiscrete": MULTI_ACT}
EMO_KEYS = ("vf_preds", "action_logp")


# ------------------------------------------------------------------------------ random values
def sample_obs(space: gym.Space, rng: np.random.Generator) -> Any:
    if isinstance(space, gym.spaces.Dict):
        return {
            "pos": rng.uniform(-1, 1, 2).astype(np.float32),
            "k": np.int64(rng.integers(3)),
        }
    return rng.uniform(-1, 1, space.shape).astype(np.float32)


def sample_action(space: gym.Space, rng: np.random.Generator) -> Any:
    if isinstance(space, gym.spaces.Discrete):
        # Env runners hand over plain ints as often as numpy ints; use both.
        a = int(rng.integers(space.n))
        return a if rng.random() < 0.5 else np.int64(a)
    return np.array([rng.integers(n) for n in space.nvec], dtype=np.int64)


def sample_emo(rng: np.random.Generator) -> dict[str, Any]:
    return {"vf_preds": np.float32(rng.normal()), "action_logp": float(rng.normal())}


# ------------------------------------------------------------------------------- comparison
class Mismatch(AssertionError):
    pass


def assert_same(ours: Any, theirs: Any, path: str = "", *, dtypes: bool = True) -> None:
    """Leaf-wise equality: container types, lengths, keys, array shapes, dtypes and values."""
    if isinstance(theirs, dict):
        if not isinstance(ours, dict) or set(ours) != set(theirs):
            raise Mismatch(f"{path}: dict keys {_keys(ours)} != RLlib {_keys(theirs)}")
        for k in theirs:
            assert_same(ours[k], theirs[k], f"{path}[{k!r}]", dtypes=dtypes)
        return
    if isinstance(theirs, (list, tuple)):
        if type(ours) is not type(theirs) or len(ours) != len(theirs):
            raise Mismatch(f"{path}: {_desc(ours)} != RLlib {_desc(theirs)}")
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{path}[{i}]", dtypes=dtypes)
        return
    if isinstance(theirs, np.ndarray) or isinstance(ours, np.ndarray):
        if not (isinstance(ours, np.ndarray) and isinstance(theirs, np.ndarray)):
            # A 0-d array against a numpy scalar is the same leaf; anything else is not.
            if not (
                np.ndim(ours) == 0 and np.ndim(theirs) == 0 and _is_np(ours) and _is_np(theirs)
            ):
                raise Mismatch(f"{path}: {_desc(ours)} != RLlib {_desc(theirs)}")
        a, b = np.asarray(ours), np.asarray(theirs)
        if a.shape != b.shape:
            raise Mismatch(f"{path}: shape {a.shape} != RLlib {b.shape}")
        if dtypes and a.dtype != b.dtype:
            raise Mismatch(f"{path}: dtype {a.dtype} != RLlib {b.dtype}")
        if a.dtype == object or b.dtype == object:
            for i, (x, y) in enumerate(zip(a.ravel().tolist(), b.ravel().tolist())):
                assert_same(x, y, f"{path}.flat[{i}]", dtypes=dtypes)
            return
        if not dtypes and a.dtype != b.dtype and a.dtype.kind == b.dtype.kind == "f":
            # Compare at the lower precision: the other side may have rounded.
            low = min(a.dtype, b.dtype, key=lambda d: d.itemsize)
            a, b = a.astype(low), b.astype(low)
        if not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
            raise Mismatch(f"{path}: values {a!r} != RLlib {b!r}")
        return
    if dtypes and _is_np(ours) != _is_np(theirs):
        raise Mismatch(f"{path}: {_desc(ours)} != RLlib {_desc(theirs)}")
    if dtypes and _is_np(theirs) and np.asarray(ours).dtype != np.asarray(theirs).dtype:
        raise Mismatch(
            f"{path}: dtype {np.asarray(ours).dtype} != RLlib {np.asarray(theirs).dtype}"
        )
    if not (ours == theirs or (ours != ours and theirs != theirs)):
        raise Mismatch(f"{path}: {ours!r} != RLlib {theirs!r}")


def _is_np(x: Any) -> bool:
    return isinstance(x, (np.ndarray, np.generic))


def _keys(x: Any) -> Any:
    return sorted(x) if isinstance(x, dict) else type(x).__name__


def _desc(x: Any) -> str:
    if isinstance(x, (list, tuple)):
        return f"{type(x).__name__}(len={len(x)})"
    if isinstance(x, np.ndarray):
        return f"ndarray{x.shape}:{x.dtype}"
    return f"{type(x).__name__}({x!r})"


@dataclasses.dataclass
class Outcome:
    """A call's value, or the exception type it raised."""

    value: Any = None
    error: type[BaseException] | None = None


def call(fn: Any, *args: Any, **kwargs: Any) -> Outcome:
    try:
        return Outcome(fn(*args, **kwargs))
    except Exception as err:  # noqa: BLE001 - the exception type is the compared result
        return Outcome(error=type(err))


def assert_same_outcome(ours: Outcome, theirs: Outcome, what: str, *, dtypes: bool = True) -> None:
    if ours.error or theirs.error:
        if ours.error is not theirs.error:
            raise Mismatch(f"{what}: ours raised {ours.error}, RLlib raised {theirs.error}")
        return
    assert_same(ours.value, theirs.value, what, dtypes=dtypes)


# --------------------------------------------------------------------- buffers and episodes
COLUMNS = ("observations", "infos", "actions", "rewards")


def assert_buffers_match(o: Any, r: Any, what: str, *, space: bool = True) -> None:
    if (o.lookback, o.finalized, o.len_incl_lookback()) != (
        r.lookback,
        r.finalized,
        r.len_incl_lookback(),
    ):
        raise Mismatch(
            f"{what}: (lookback, finalized, len_incl_lookback) "
            f"{(o.lookback, o.finalized, o.len_incl_lookback())} != RLlib "
            f"{(r.lookback, r.finalized, r.len_incl_lookback())}"
        )
    if space and o.space != r.space:
        raise Mismatch(f"{what}: space {o.space} != RLlib {r.space}")
    assert_same(o.data, r.data, f"{what}.data")


AGENT_IDS = ("agent_id", "module_id", "multi_agent_episode_id")


def assert_episodes_match(
    o: Any,
    r: Any,
    what: str = "ep",
    *,
    reward_space: bool = True,
    custom_data: bool = True,
    agent_ids: bool = True,
) -> None:
    """Every field both libraries define the same way (not get_state: our keys are our own).

    ``agent_ids=False`` skips ``AGENT_IDS``, for the ``cut``/``slice`` results of an episode
    that has them: RLlib's drop them, ours keep them (deviation "chunks-keep-agent-ids").
    """
    attrs = ("id_", "t", "t_started", "is_terminated", "is_truncated", "is_reset", "is_done")
    for attr in attrs + (AGENT_IDS if agent_ids else ()):
        if getattr(o, attr) != getattr(r, attr):
            raise Mismatch(f"{what}.{attr}: {getattr(o, attr)!r} != RLlib {getattr(r, attr)!r}")
    if len(o) != len(r) or o.is_numpy != r.is_numpy:
        raise Mismatch(f"{what}: len/is_numpy {(len(o), o.is_numpy)} != {(len(r), r.is_numpy)}")
    if o.observation_space != r.observation_space or o.action_space != r.action_space:
        raise Mismatch(f"{what}: spaces differ")
    for name in COLUMNS:
        # Our rewards column keeps its Box space in slices; RLlib's slice drops it (documented).
        check_space = reward_space or name != "rewards"
        assert_buffers_match(
            getattr(o, name), getattr(r, name), f"{what}.{name}", space=check_space
        )
    if set(o.extra_model_outputs) != set(r.extra_model_outputs):
        raise Mismatch(f"{what}: extra_model_outputs keys differ")
    for key in r.extra_model_outputs:
        assert_buffers_match(
            o.extra_model_outputs[key], r.extra_model_outputs[key], f"{what}.emo[{key!r}]"
        )
    if custom_data:  # RLlib's slice drops custom_data (deviation "slice-custom-data")
        assert_same(o.custom_data, r.custom_data, f"{what}.custom_data")
    if not np.isclose(o.get_return(), float(r.get_return())):
        raise Mismatch(f"{what}.get_return: {o.get_return()} != RLlib {r.get_return()}")


# ------------------------------------------------------------------------- index resolution
def resolve(index: int | None, default: int, lookback: int, total: int, neg: bool) -> int:
    """The storage position of a user index (docs/contract.md §3.2), None -> ``default``."""
    if index is None:
        return default
    if index >= 0 or neg:
        return lookback + index
    return total + index


def slice_bounds(s: slice, lookback: int, total: int, neg: bool) -> tuple[int, int]:
    return (
        resolve(s.start, lookback, lookback, total, neg),
        resolve(s.stop, total, lookback, total, neg),
    )


def getter_deviation(buf: Any, indices: Any, *, neg: bool, fill: Any, one_hot: bool) -> str | None:
    """Name of the docs/deviations.md entry that makes RLlib's answer differ, if any."""
    lookback, total = buf.lookback, buf.len_incl_lookback()
    if one_hot and fill not in (None, 0):
        return "one-hot-filler"  # RLlib fills with `fill`, docs/contract.md §3.5 says zeros
    if isinstance(indices, slice) and total == 0:
        start, stop = slice_bounds(indices, lookback, total, neg)
        if stop < 0 <= start:
            return "empty-buffer-slice-assert"  # RLlib's slice maths asserts start >= 0
    if isinstance(indices, slice) and fill is not None:
        start, stop = slice_bounds(indices, lookback, total, neg)
        if start < 0 and stop > total:
            return "fill-both-edges"
        if start > stop and (stop < 0 or start >= total):
            return "reversed-slice-fill"
        if indices.step not in (None, 1) and (start < 0 or stop > total):
            return "fill-with-step"
    flat_numpy = buf.finalized and isinstance(buf.data, np.ndarray)
    if flat_numpy and fill is None and not one_hot and neg:
        ints = [indices] if isinstance(indices, int) else indices
        if isinstance(ints, list) and any(lookback + i < 0 for i in ints):
            return "numpy-neg-index-wraps"
    if isinstance(indices, list) and not indices and buf.finalized:
        return "empty-list-index-numpy"
    return None


# ---------------------------------------------------------------------------- twin episodes
@dataclasses.dataclass
class Twin:
    """Our episode and RLlib's, driven with the same calls."""

    ours: Any
    theirs: Any

    def both(self, method: str, *args: Any, **kwargs: Any) -> tuple[Outcome, Outcome]:
        """Runs the call on both, each outcome (value or exception type) kept to compare."""
        return (
            call(getattr(self.ours, method), *args, **kwargs),
            call(getattr(self.theirs, method), *args, **kwargs),
        )

    def setup(self, method: str, *args: Any, **kwargs: Any) -> None:
        """Runs a call the test builds on, on both: an exception from either fails the test.

        Unlike :meth:`both`, nothing is caught: a setup step that started raising would
        otherwise leave the test checking an episode the step never reached.
        """
        getattr(self.ours, method)(*args, **kwargs)
        getattr(self.theirs, method)(*args, **kwargs)


def new_twin(obs_space: gym.Space, act_space: gym.Space, id_: str = "twin") -> Twin:
    return Twin(
        OSAE(id_, observation_space=obs_space, action_space=act_space),
        RSAE(id_, observation_space=obs_space, action_space=act_space),
    )
