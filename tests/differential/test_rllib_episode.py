"""Differential tests: our SingleAgentEpisode / InfiniteLookbackBuffer against RLlib 2.60.

Random operation sequences run through both libraries; every result is compared leaf by leaf.
Cases where RLlib is wrong per docs/contract.md are excluded from the random comparison by
``_rllib_ops.getter_deviation`` (each names its docs/deviations.md entry) and pinned below by
tests that assert OUR behaviour. Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_episode.py
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.differential._rllib_ops import (
    ACT_SPACES,
    BOX_OBS,
    DICT_OBS,
    DISCRETE_ACT,
    EMO_KEYS,
    MULTI_ACT,
    OBS_SPACES,
    OSAE,
    RSAE,
    OBuf,
    RBuf,
    Twin,
    assert_buffers_match,
    assert_episodes_match,
    assert_same,
    assert_same_outcome,
    call,
    getter_deviation,
    new_twin,
    sample_action,
    sample_emo,
    sample_obs,
)

pytestmark = pytest.mark.differential

# derandomize: the same examples on every run, so CI never flakes on a fresh seed.
SETTINGS = settings(
    derandomize=True,
    deadline=None,
    max_examples=600,
    report_multiple_bugs=False,
    # Each example drives a long random operation sequence through two libraries: slow
    # generation and large draws are the point of this test, not a symptom.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

FILLS = (None, 0.0, -1)


# ------------------------------------------------------------------------------ index drawing
def draw_int(data: Any, total: int) -> int:
    return data.draw(st.integers(-total - 3, total + 3), label="int index")


def draw_indices(data: Any, total: int) -> Any:
    kind = data.draw(st.sampled_from(["none", "int", "slice", "list"]), label="index kind")
    if kind == "none":
        return None
    if kind == "int":
        return draw_int(data, total)
    if kind == "list":
        return data.draw(st.lists(st.integers(-total - 3, total + 3), max_size=4), label="list")
    bound = st.none() | st.integers(-total - 3, total + 3)
    step = data.draw(st.sampled_from([None, None, None, 1, 2]), label="step")
    return slice(data.draw(bound, label="start"), data.draw(bound, label="stop"), step)


def compare_getter(twin: Twin, data: Any, what: str = "") -> None:
    """One random getter call on both episodes; skip only documented RLlib deviations."""
    o, r = twin.ours, twin.theirs
    columns = ["observations", "actions", "rewards", "infos", *o.extra_model_outputs]
    column = data.draw(st.sampled_from(columns), label="column")
    buf = (
        getattr(o, column)
        if column in ("observations", "actions", "rewards", "infos")
        else o.extra_model_outputs[column]
    )
    indices = draw_indices(data, buf.len_incl_lookback())
    neg = data.draw(st.booleans(), label="neg_index_as_lookback")
    fill = data.draw(st.sampled_from(FILLS), label="fill")
    kwargs: dict[str, Any] = {"neg_index_as_lookback": neg, "fill": fill}
    # RLlib's get_rewards/get_infos/get_extra_model_outputs take no one_hot_discrete.
    one_hot = column in ("observations", "actions") and data.draw(st.booleans(), label="one_hot")
    if column in ("observations", "actions"):
        kwargs["one_hot_discrete"] = one_hot
    if getter_deviation(buf, indices, neg=neg, fill=fill, one_hot=one_hot):
        return
    if column in EMO_KEYS:
        ours = call(o.get_extra_model_outputs, column, indices, **kwargs)
        theirs = call(r.get_extra_model_outputs, column, indices, **kwargs)
    else:
        name = f"get_{column}"
        ours, theirs = (
            call(getattr(o, name), indices, **kwargs),
            call(getattr(r, name), indices, **kwargs),
        )
    if one_hot and empty_one_hot(ours, theirs):
        return
    # RLlib's dtype for a numpy list read mixing items and fillers follows the first item;
    # ours is the column's dtype, as for slices (deviation "list-fill-dtype").
    dtypes = not (isinstance(indices, list) and fill is not None and buf.finalized)
    assert_same_outcome(ours, theirs, f"{what}{column}.get({indices!r}, {kwargs})", dtypes=dtypes)


def empty_one_hot(ours: Any, theirs: Any) -> bool:
    """RLlib skips (flat) or fails (nested) one-hot on an empty numpy read; we return an empty
    one-hot batch (deviation "empty-one-hot")."""
    return _empty_batch(ours.value) and (theirs.error is ValueError or _empty_batch(theirs.value))


def _empty_batch(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_empty_batch(v) for v in value.values())
    return isinstance(value, np.ndarray) and value.ndim >= 1 and value.shape[0] == 0


# ------------------------------------------------------------------------ episode operations
def make_twin(data: Any, rng: np.random.Generator) -> tuple[Twin, gym.Space, gym.Space, bool]:
    obs_space = OBS_SPACES[data.draw(st.sampled_from(sorted(OBS_SPACES)), label="obs space")]
    act_space = ACT_SPACES[data.draw(st.sampled_from(sorted(ACT_SPACES)), label="act space")]
    with_emo = data.draw(st.booleans(), label="extra_model_outputs")
    if data.draw(st.booleans(), label="construct with data"):
        # The constructor path: n steps of given data, k of them lookback.
        n = data.draw(st.integers(0, 6), label="n")
        k = data.draw(st.sampled_from(["auto", 0, 1, 2, 5, 9]), label="len_lookback_buffer")
        obs = [sample_obs(obs_space, rng) for _ in range(n + 1)]
        acts = [sample_action(act_space, rng) for _ in range(n)]
        rews = [float(rng.normal()) for _ in range(n)]
        infos = [{"i": i} for i in range(n + 1)]
        emos = [sample_emo(rng) for _ in range(n)]
        kw = dict(observation_space=obs_space, action_space=act_space, len_lookback_buffer=k)
        if with_emo:
            kw["extra_model_outputs"] = {key: [e[key] for e in emos] for key in EMO_KEYS}
        t_started = data.draw(st.sampled_from([None, 0, 7]), label="t_started")
        twin = Twin(
            OSAE(
                "x",
                observations=list(obs),
                infos=list(infos),
                actions=list(acts),
                rewards=list(rews),
                t_started=t_started,
                **copy.deepcopy(kw),
            ),
            RSAE(
                "x",
                observations=list(obs),
                infos=list(infos),
                actions=list(acts),
                rewards=list(rews),
                t_started=t_started,
                **copy.deepcopy(kw),
            ),
        )
    else:
        twin = new_twin(obs_space, act_space, id_="x")
        ob = sample_obs(obs_space, rng)
        assert_same_outcome(*twin.both("add_env_reset", ob, {"reset": True}), "add_env_reset")
    return twin, obs_space, act_space, with_emo


def step_both(
    twin: Twin, rng: np.random.Generator, obs_space: Any, act_space: Any, with_emo: bool, done: Any
) -> None:
    ob, act, rew = sample_obs(obs_space, rng), sample_action(act_space, rng), float(rng.normal())
    kw: dict[str, Any] = {"terminated": done == "terminated", "truncated": done == "truncated"}
    if with_emo:
        kw["extra_model_outputs"] = sample_emo(rng)
    outcomes = twin.both("add_env_step", ob, act, rew, {"r": rew}, **kw)
    assert_same_outcome(*outcomes, "add_env_step")


def set_both(
    twin: Twin, data: Any, rng: np.random.Generator, obs_space: Any, act_space: Any
) -> None:
    """A valid int or slice write to observations/actions/rewards (sizes always match)."""
    o = twin.ours
    column = data.draw(st.sampled_from(["observations", "actions", "rewards"]), label="set col")
    n = len(getattr(o, column))
    buf = getattr(o, column)
    if n == 0 or (buf.finalized and isinstance(buf.space, gym.spaces.Dict)):
        return  # deviation "nested-numpy-set": RLlib always refuses these writes
    sample = {
        "observations": lambda: sample_obs(obs_space, rng),
        "actions": lambda: sample_action(act_space, rng),
        "rewards": lambda: float(rng.normal()),
    }[column]
    if data.draw(st.booleans(), label="set int"):
        at: Any = data.draw(st.integers(-n, n - 1), label="at")
        new: Any = sample()
        if getattr(o, column).finalized and column == "actions":
            new = np.asarray(new)  # RLlib's space check rejects a plain int in numpy mode
    else:
        a = data.draw(st.integers(0, n - 1), label="a")
        b = data.draw(st.integers(a + 1, n), label="b")
        at, new = slice(a, b), [sample() for _ in range(b - a)]
        if getattr(o, column).finalized:
            # RLlib writes a finalized slice leaf by leaf: it needs a batched struct.
            new = _batch(new)
    name = f"set_{column}"
    ours = call(getattr(o, name), new_data=copy.deepcopy(new), at_indices=at)
    theirs = call(getattr(twin.theirs, name), new_data=copy.deepcopy(new), at_indices=at)
    assert_same_outcome(ours, theirs, f"{name}(at_indices={at!r})")


def _batch(items: list[Any]) -> Any:
    if isinstance(items[0], dict):
        return {k: np.stack([np.asarray(i[k]) for i in items]) for k in items[0]}
    return np.stack([np.asarray(i) for i in items])


@SETTINGS
@given(st.data())
def test_random_episode_sequences(data: Any) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    twin, obs_space, act_space, with_emo = make_twin(data, rng)
    stack = [twin]  # cut chunks, newest last; "concat" folds the newest into its predecessor
    assert_episodes_match(twin.ours, twin.theirs, "init")
    for i in range(data.draw(st.integers(1, 10), label="n ops")):
        cur = stack[-1]
        o, r = cur.ours, cur.theirs
        op = data.draw(
            st.sampled_from(
                [
                    "step",
                    "step",
                    "get",
                    "get",
                    "get",
                    "cut",
                    "concat",
                    "numpy",
                    "slice",
                    "state",
                    "set",
                    "data_dict",
                ]
            ),
            label=f"op {i}",
        )
        where = f"op {i} {op}: "
        if op == "step":
            for _ in range(data.draw(st.integers(1, 5), label="steps")):
                done = data.draw(st.sampled_from([None] * 8 + ["terminated", "truncated"]))
                step_both(cur, rng, obs_space, act_space, with_emo, done)
        elif op == "get":
            for _ in range(4):
                compare_getter(cur, data, where)
        elif op == "cut":
            k = data.draw(st.integers(0, 5), label="cut lookback")
            if nested_numpy_clamp(o, k):
                continue
            ours, theirs = cur.both("cut", len_lookback_buffer=k)
            if ours.error or theirs.error:  # a done episode: both must refuse alike
                assert ours.error is theirs.error, (where, ours.error, theirs.error)
                continue
            ours.value.custom_data["chunk"] = theirs.value.custom_data["chunk"] = len(stack)
            # RLlib's numpy'd successor views the original's arrays, so a later write into it
            # also rewrites the original (deviation "numpy-chunks-share-data"): a copy keeps
            # the comparison about everything else.
            stack.append(Twin(ours.value, copy.deepcopy(theirs.value)))
        elif op == "concat" and len(stack) > 1:
            prev = stack[-2]
            if mixed_nested_concat(prev.ours, o):
                continue  # deviation "mixed-mode-concat-nested", see test_mixed_mode_concat
            if concat_both(prev, cur, where):
                return  # RLlib's episode may be half-concatenated now: nothing left to compare
            stack.pop()
        elif op == "numpy":
            if len(o) == 0:
                continue  # deviation "to_numpy-empty": see test_to_numpy_on_empty_chunk
            # to_numpy returns self; the episodes themselves are compared after every op.
            ours_np, theirs_np = call(o.to_numpy), call(r.to_numpy)
            ours_np.value = theirs_np.value = None
            assert_same_outcome(ours_np, theirs_np, where)
        elif op == "slice":
            n = len(o)
            a = data.draw(st.integers(0, n), label="slice a")
            b = data.draw(st.integers(a, n), label="slice b")
            neg_a = data.draw(st.booleans(), label="neg a")
            start: Any = a - n if neg_a and a < n else a
            lb = data.draw(st.sampled_from([None, 0, 1, 3, 8]), label="slice lookback")
            if nested_numpy_clamp(
                o, min(o.observations.lookback if lb is None else lb, a + o.observations.lookback)
            ):
                continue
            if lb is None and data.draw(st.booleans(), label="getitem"):
                so, sr = o[start:b], r[start:b]
            else:
                so = o.slice(slice(start, b), len_lookback_buffer=lb)
                sr = r.slice(slice(start, b), len_lookback_buffer=lb)
            # RLlib's slice drops the rewards Box space (deviation "slice-reward-space").
            # RLlib's slice also drops custom_data (deviation "slice-custom-data").
            assert_episodes_match(so, sr, where, reward_space=False, custom_data=False)
            assert so.custom_data == o.custom_data
        elif op == "state":
            state = pickle.loads(pickle.dumps(o.get_state()))
            if any(len(b) == 0 for b in r.extra_model_outputs.values()):
                # RLlib's get_state leaves an empty column as a buffer object, which its own
                # from_state then cannot read (deviation "state-empty-emo"); copy instead.
                stack[-1] = Twin(OSAE.from_state(state), copy.deepcopy(r))
            else:
                stack[-1] = Twin(OSAE.from_state(state), RSAE.from_state(r.get_state()))
        elif op == "set":
            set_both(cur, data, rng, obs_space, act_space)
        elif op == "data_dict" and len(o) > 0:
            # Row count on 0-length episodes differs (deviation "data-dict-empty").
            assert_same(o.get_data_dict(), r.get_data_dict(), where + "get_data_dict")
        assert_episodes_match(stack[-1].ours, stack[-1].theirs, where)
    # Fold every chunk back: must equal RLlib's fold (and the invariant "cut+concat = original").
    while len(stack) > 1:
        cur, prev = stack.pop(), stack[-1]
        if mixed_nested_concat(prev.ours, cur.ours):
            return
        if concat_both(prev, cur, "final concat"):
            return
        assert_episodes_match(prev.ours, prev.theirs, "final concat")


def mixed_nested_concat(ep: Any, other: Any) -> bool:
    """A list-mode episode of nested observations concatenating a numpy'd chunk."""
    return not ep.observations.finalized and isinstance(other.observations.data, dict)


def nested_numpy_clamp(ep: Any, lookback: int) -> bool:
    """RLlib builds a nested numpy column with ``min(lookback, len(dict))``: a lookback beyond the
    number of dict keys is silently cut and its own cut or slice fails (deviation
    "nested-numpy-lookback"; see test_nested_numpy_cut_and_slice_keep_lookback)."""
    obs = ep.observations
    return obs.finalized and isinstance(obs.data, dict) and lookback > len(obs.data)


def new_keys_into_empty_chunk(ep: Any, other: Any) -> bool:
    """A chunk with no steps yet concatenating a successor that records extra-model-output keys
    it lacks: RLlib asserts, we adopt the keys (deviation "concat-new-keys-into-empty";
    see test_concat_new_keys_into_empty_chunk)."""
    return (
        len(ep) == 0
        and len(other) > 0
        and bool(set(other.extra_model_outputs) - set(ep.extra_model_outputs))
    )


def concat_both(prev: Twin, cur: Twin, where: str) -> bool:
    """Concats on both sides; True if both refused (then RLlib's side may be half-mutated)."""
    before = copy.deepcopy(prev.ours)
    if new_keys_into_empty_chunk(prev.ours, cur.ours):
        # RLlib refuses (and may be half-mutated): nothing left to compare. Ours may still
        # refuse for another reason (e.g. a changed first observation), without side effects.
        if call(prev.ours.concat_episode, cur.ours).error:
            assert prev.ours == before, "a refused concat_episode changed our episode"
        return True
    ours = call(prev.ours.concat_episode, cur.ours)
    theirs = call(prev.theirs.concat_episode, cur.theirs)
    assert_same_outcome(ours, theirs, where + "concat_episode")
    if ours.error:
        # We check before mutating; RLlib asserts mid-way (deviation "concat-partial-mutation").
        assert prev.ours == before, "a refused concat_episode changed our episode"
    return ours.error is not None


# ------------------------------------------------------------------------- buffer sequences
BUFFER_SPACES = {
    "none": None,
    "discrete": DISCRETE_ACT,
    "multidiscrete": MULTI_ACT,
    "box": BOX_OBS,
    "dict": DICT_OBS,
}


def sample_item(space: Any, rng: np.random.Generator) -> Any:
    if space is None:
        return float(rng.normal())
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
        return sample_action(space, rng)
    return sample_obs(space, rng)


@SETTINGS
@given(st.data())
def test_random_buffer_sequences(data: Any) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    space = BUFFER_SPACES[data.draw(st.sampled_from(sorted(BUFFER_SPACES)), label="space")]
    items = [sample_item(space, rng) for _ in range(data.draw(st.integers(0, 7), label="n"))]
    lookback = data.draw(st.integers(0, 9), label="lookback")
    ours, theirs = (
        OBuf(copy.deepcopy(items), lookback, space),
        RBuf(copy.deepcopy(items), lookback, space),
    )
    if data.draw(st.booleans(), label="finalize first") and items:
        ours.finalize()
        theirs.finalize()
    for i in range(data.draw(st.integers(1, 8), label="n ops")):
        op = data.draw(st.sampled_from(["get", "get", "get", "set", "set", "append", "finalize"]))
        where = f"op {i} {op}: "
        if op == "get":
            indices = draw_indices(data, ours.len_incl_lookback())
            neg = data.draw(st.booleans(), label="neg")
            fill = data.draw(st.sampled_from(FILLS), label="fill")
            one_hot = data.draw(st.booleans(), label="one_hot")
            if getter_deviation(ours, indices, neg=neg, fill=fill, one_hot=one_hot):
                continue
            kw = dict(neg_index_as_lookback=neg, fill=fill, one_hot_discrete=one_hot)
            o, t = call(ours.get, indices, **kw), call(theirs.get, indices, **kw)
            if one_hot and empty_one_hot(o, t):
                continue
            if one_hot and space is None:
                # We always refuse; RLlib only when it reaches a stored item
                # (deviation "one-hot-without-space").
                assert o.error is ValueError, where
                continue
            dtypes = not (isinstance(indices, list) and fill is not None and ours.finalized)
            assert_same_outcome(o, t, f"{where}get({indices!r}, {kw})", dtypes=dtypes)
        elif op == "set":
            if not set_buffers(ours, theirs, data, rng, space, where):
                return  # RLlib may have written part of a refused list set
        elif op == "append":
            item = sample_item(space, rng)
            if ours.finalized and isinstance(item, (int, float)):
                item = np.asarray(item)  # RLlib needs an array-like leaf to concatenate
            ours.append(copy.deepcopy(item))
            theirs.append(copy.deepcopy(item))
        elif op == "finalize" and len(ours) + ours.lookback > 0:
            ours.finalize()
            theirs.finalize()
        assert_buffers_match(ours, theirs, where)


def set_buffers(
    ours: Any, theirs: Any, data: Any, rng: np.random.Generator, space: Any, where: str
) -> bool:
    """A random set on both buffers; False if both refused (RLlib may be half-written)."""
    if ours.finalized and isinstance(space, gym.spaces.Dict):
        # RLlib checks each numpy leaf against the whole Dict space and always refuses
        # (deviation "nested-numpy-set"); see test_set_on_nested_numpy_buffer.
        return True
    total = ours.len_incl_lookback()
    neg = data.draw(st.booleans(), label="set neg")
    kind = data.draw(st.sampled_from(["int", "slice", "list", "none"]), label="set kind")
    new: Any
    if kind == "int":
        at: Any = draw_int(data, total)
        new = sample_item(space, rng)
        if ours.finalized and not isinstance(new, (dict, np.ndarray)):
            new = np.asarray(new)
    else:
        if kind == "slice":
            bound = st.none() | st.integers(-total - 2, total + 2)
            step = data.draw(st.sampled_from([None, None, 2]), label="set step")
            at = slice(data.draw(bound), data.draw(bound), step)
            if getter_deviation(ours, at, neg=neg, fill=None, one_hot=False):
                return True  # "empty-buffer-slice-assert"
            count = len(ours.get(at, neg_index_as_lookback=neg)) if total else 0
            if isinstance(ours.get(at, neg_index_as_lookback=neg), dict):
                count = len(next(iter(ours.get(at, neg_index_as_lookback=neg).values())))
            # Now and then a wrong size: both libraries must raise IndexError for slices.
            count += data.draw(st.sampled_from([0, 0, 0, 1]), label="size error")
        elif kind == "list":
            at = data.draw(st.lists(st.integers(-total - 2, total + 2), max_size=3), label="at")
            count = len(at)
        else:
            at, count = None, len(ours)
        new = [sample_item(space, rng) for _ in range(count)]
        if ours.finalized and kind != "list":
            if not new:
                return True  # RLlib cannot batch zero items; nothing to write anyway
            new = _batch(new)
    kw = dict(at_indices=at, neg_index_as_lookback=neg)
    before = copy.deepcopy(ours)
    o, t = call(ours.set, copy.deepcopy(new), **kw), call(theirs.set, copy.deepcopy(new), **kw)
    assert_same_outcome(o, t, f"{where}set({at!r}, neg={neg})")
    if o.error:
        assert ours == before, "a refused set changed our buffer"
        return False
    return True


# -------------------------------------------------------------------- documented deviations
# One test per docs/deviations.md entry: OUR behaviour is asserted; RLlib 2.60's is asserted
# too, so the test flags the day RLlib changes (then revisit the entry).


def test_one_hot_respects_discrete_start() -> None:  # "one-hot-start"
    space = gym.spaces.Discrete(3, start=1)
    ours, theirs = OBuf([1, 2, 3], 0, space), RBuf([1, 2, 3], 0, space)
    assert ours.get(0, one_hot_discrete=True).tolist() == [1.0, 0.0, 0.0]
    assert theirs.get(0, one_hot_discrete=True).tolist() == [0.0, 1.0, 0.0]


@pytest.mark.parametrize("finalize", [False, True])
def test_fill_on_both_edges(finalize: bool) -> None:  # "fill-both-edges"
    ours, theirs = OBuf([1, 2, 3], 0), RBuf([1, 2, 3], 0)
    if finalize:
        ours.finalize()
        theirs.finalize()
    kw = dict(neg_index_as_lookback=True, fill=0)
    assert list(ours.get(slice(-2, 5), **kw)) == [0, 0, 1, 2, 3, 0, 0]
    assert list(theirs.get(slice(-2, 5), **kw)) == [0, 0, 1, 2, 3]


def test_neg_index_past_lookback_numpy() -> None:  # "numpy-neg-index-wraps"
    ours, theirs = OBuf([4, 5, 6, 7, 8, 9], 3), RBuf([4, 5, 6, 7, 8, 9], 3)
    ours.finalize()
    theirs.finalize()
    with pytest.raises(IndexError):
        ours.get(-5, neg_index_as_lookback=True)
    assert ours.get(-5, neg_index_as_lookback=True, fill=-1) == -1
    assert theirs.get(-5, neg_index_as_lookback=True) == 8  # wrapped to the end


def test_to_numpy_on_empty_chunk() -> None:  # "to_numpy-empty"
    twin = new_twin(BOX_OBS, DISCRETE_ACT)
    twin.setup("add_env_reset", np.zeros(4, np.float32))
    twin.ours.to_numpy()
    twin.theirs.to_numpy()
    assert twin.ours.is_numpy and isinstance(twin.ours.get_actions(), np.ndarray)
    assert not twin.theirs.is_numpy and twin.theirs.get_actions() == []


def test_data_dict_of_empty_episode() -> None:  # "data-dict-empty"
    twin = new_twin(BOX_OBS, DISCRETE_ACT)
    twin.setup("add_env_reset", np.zeros(4, np.float32))
    assert twin.ours.get_data_dict()["terminateds"] == []
    assert twin.theirs.get_data_dict()["terminateds"] == [False]


def test_late_extra_model_output_key() -> None:  # "late-emo-key"
    twin = new_twin(BOX_OBS, DISCRETE_ACT)
    ob = np.zeros(4, np.float32)
    twin.setup("add_env_reset", ob)
    twin.setup("add_env_step", ob, 0, 1.0)
    before = copy.deepcopy(twin.ours)
    with pytest.raises(AssertionError, match="new"):
        twin.ours.add_env_step(ob, 0, 1.0, extra_model_outputs={"v": 1.0})
    assert twin.ours == before
    twin.theirs.add_env_step(ob, 0, 1.0, extra_model_outputs={"v": 1.0})  # accepted ...
    with pytest.raises(AssertionError):
        twin.theirs.validate()  # ... and the episode is broken


@pytest.mark.parametrize("new", [[7, 8, 9], [7]])
def test_list_set_size_mismatch(new: list[int]) -> None:  # "set-size-mismatch"
    ours, theirs = OBuf([1, 2, 3]), RBuf([1, 2, 3])
    with pytest.raises(IndexError):
        ours.set(new, at_indices=[0, 1])
    assert ours.get() == [1, 2, 3]
    call(theirs.set, new, at_indices=[0, 1])
    assert theirs.get()[0] == 7  # RLlib wrote (part of) it


def test_one_hot_filler_is_zero_hot() -> None:  # "one-hot-filler"
    ours, theirs = OBuf([0, 1], 0, DISCRETE_ACT), RBuf([0, 1], 0, DISCRETE_ACT)
    assert ours.get(5, fill=-1, one_hot_discrete=True).tolist() == [0.0] * 4
    assert theirs.get(5, fill=-1, one_hot_discrete=True).tolist() == [-1.0] * 4


def test_reversed_slice_with_fill_is_empty() -> None:  # "reversed-slice-fill"
    ours, theirs = OBuf([1, 2, 3]), RBuf([1, 2, 3])
    kw = dict(neg_index_as_lookback=True, fill=0)
    assert ours.get(slice(-1, -3), **kw) == []
    assert theirs.get(slice(-1, -3), **kw) == [0, 0]


@pytest.mark.parametrize("fill", [2.7, float("nan")], ids=["fraction", "nan"])
def test_fill_an_integer_leaf_cannot_hold(fill: float) -> None:  # "fill-unrepresentable"
    space = gym.spaces.Discrete(3)
    ours, theirs = OBuf([0, 1, 2], space=space), RBuf([0, 1, 2], space=space)
    ours.finalize()
    theirs.finalize()
    kw = dict(neg_index_as_lookback=True, fill=fill)
    with pytest.raises(ValueError, match="cannot fill"):
        ours.get(slice(-2, 2), **kw)
    padded = theirs.get(slice(-2, 2), **kw)
    assert padded.dtype == np.int64 and padded[0] != fill  # cast: truncated or garbage


def test_fill_with_step() -> None:  # "fill-with-step"
    ours, theirs = OBuf([1, 2, 3, 4]), RBuf([1, 2, 3, 4])
    kw = dict(neg_index_as_lookback=True, fill=0)
    assert ours.get(slice(-3, 3, 2), **kw) == [0, 0, 2]  # [0, 0, 0, 1, 2, 3][::2]
    assert theirs.get(slice(-3, 3, 2), **kw) == [0, 0, 0, 1, 3]


def test_empty_list_index_numpy() -> None:  # "empty-list-index-numpy"
    ours, theirs = OBuf([1, 2]), RBuf([1, 2])
    ours.finalize()
    theirs.finalize()
    assert ours.get([]).shape == (0,)
    with pytest.raises(ValueError):
        theirs.get([])


def test_empty_one_hot_read() -> None:  # "empty-one-hot"
    ours, theirs = OBuf([1, 2], 2, DISCRETE_ACT), RBuf([1, 2], 2, DISCRETE_ACT)
    ours.finalize()
    theirs.finalize()
    assert ours.get(slice(0, 0), one_hot_discrete=True).shape == (0, 4)
    assert theirs.get(slice(0, 0), one_hot_discrete=True).shape == (0,)
    assert ours.get(one_hot_discrete=True).shape == (0, 4)
    with pytest.raises(ValueError):
        theirs.get(one_hot_discrete=True)


def test_negative_stop_on_empty_buffer() -> None:  # "empty-buffer-slice-assert"
    assert OBuf([]).get(slice(None, -1)) == []
    with pytest.raises(AssertionError):
        RBuf([]).get(slice(None, -1))


def test_one_hot_without_space() -> None:  # "one-hot-without-space"
    with pytest.raises(ValueError, match="space"):
        OBuf([1]).get(5, fill=0, one_hot_discrete=True)
    assert RBuf([1]).get(5, fill=0, one_hot_discrete=True) == 0


def _stepped_twin(obs_space: Any = BOX_OBS, n: int = 4, **step_kw: Any) -> Twin:
    rng = np.random.default_rng(1)
    twin = new_twin(obs_space, DISCRETE_ACT)
    twin.setup("add_env_reset", sample_obs(obs_space, rng))
    for i in range(n):
        done = step_kw if i == n - 1 else {}
        twin.setup("add_env_step", sample_obs(obs_space, rng), i % 4, float(i), **done)
    return twin


def test_slice_keeps_reward_space_and_custom_data() -> (
    None
):  # "slice-reward-space", "..-custom-data"
    twin = _stepped_twin()
    twin.ours.custom_data["k"] = twin.theirs.custom_data["k"] = 1
    ours, theirs = twin.ours[1:3], twin.theirs[1:3]
    assert ours.rewards.space is not None and ours.custom_data == {"k": 1}
    assert theirs.rewards.space is None and theirs.custom_data == {}
    assert_episodes_match(ours, theirs, reward_space=False, custom_data=False)


def test_slice_bounds_past_the_ends() -> None:  # "slice-out-of-range"
    twin = _stepped_twin(terminated=True)
    ours, theirs = twin.ours[0:10], twin.theirs[0:10]
    assert ours.is_terminated and len(ours) == 4
    assert not theirs.is_terminated
    ours = twin.ours[-10:2]
    assert (ours.t_started, len(ours)) == (0, 2)
    assert twin.theirs[-10:2].t_started == -6


def test_reversed_slice_holds_its_start_observation() -> None:  # "reversed-episode-slice"
    twin = _stepped_twin(n=6)
    ours, theirs = twin.ours[4:2], twin.theirs[4:2]
    assert len(ours) == len(theirs) == 0
    assert (ours.t_started, len(ours.get_observations())) == (4, 1)
    assert len(theirs.get_observations()) == 0 and not theirs.is_reset


def test_concat_keeps_both_flags_of_the_successor() -> None:  # "concat-both-flags"
    twin = _stepped_twin(n=2)
    nxt = Twin(twin.ours.cut(), twin.theirs.cut())
    obs = sample_obs(BOX_OBS, np.random.default_rng(2))
    nxt.setup("add_env_step", obs, 0, 1.0, terminated=True, truncated=True)
    twin.ours.concat_episode(nxt.ours)
    twin.theirs.concat_episode(nxt.theirs)
    assert twin.ours.is_terminated and twin.ours.is_truncated
    assert twin.theirs.is_terminated and not twin.theirs.is_truncated


@pytest.mark.parametrize("op", ["cut", "slice"])
def test_nested_numpy_cut_and_slice_keep_lookback(op: str) -> None:  # "nested-numpy-lookback"
    twin = _stepped_twin(DICT_OBS, n=6)
    twin.ours.to_numpy()
    twin.theirs.to_numpy()
    if op == "cut":
        ours, first = twin.ours.cut(len_lookback_buffer=4), 2
        with pytest.raises(AssertionError):
            twin.theirs.cut(len_lookback_buffer=4)
    else:
        ours, first = twin.ours.slice(slice(4, 6), len_lookback_buffer=4), 0
        with pytest.raises(AssertionError):
            twin.theirs.slice(slice(4, 6), len_lookback_buffer=4)
    ours.validate()
    assert ours.observations.lookback == 4
    want = twin.ours.get_observations(slice(first, None))
    assert_same(ours.get_observations(slice(-4, None), neg_index_as_lookback=True), want)


def test_set_on_nested_numpy_buffer() -> None:  # "nested-numpy-set"
    rng = np.random.default_rng(0)
    items = [sample_obs(DICT_OBS, rng) for _ in range(3)]
    ours, theirs = OBuf(copy.deepcopy(items), 0, DICT_OBS), RBuf(items, 0, DICT_OBS)
    ours.finalize()
    theirs.finalize()
    new = sample_obs(DICT_OBS, rng)
    ours.set(new, at_indices=1)
    assert_same(ours.get(1), {"pos": new["pos"], "k": new["k"]})
    with pytest.raises(AssertionError):
        theirs.set(new, at_indices=1)


def test_refused_concat_changes_nothing() -> None:  # "concat-partial-mutation"
    twin = new_twin(BOX_OBS, DISCRETE_ACT)
    ob = np.zeros(4, np.float32)
    twin.setup("add_env_reset", ob)
    twin.setup("add_env_step", ob, 0, 1.0)  # a step without the key "v"
    succ = Twin(twin.ours.cut(), twin.theirs.cut())
    succ.setup("add_env_step", ob, 0, 1.0, extra_model_outputs={"v": 0.0})
    before = copy.deepcopy(twin.ours)
    with pytest.raises(AssertionError):
        twin.ours.concat_episode(succ.ours)
    assert twin.ours == before
    with pytest.raises(AssertionError):
        twin.theirs.concat_episode(succ.theirs)
    assert twin.theirs.t == 2  # RLlib had already concatenated most columns


def test_a_step_without_a_reset_is_refused() -> None:  # "step-without-reset"
    def lookback_only(cls: Any, buf: Any) -> Any:
        return cls(
            observations=buf([0, 1], lookback=2),
            infos=buf([{}, {}], lookback=2),
            actions=buf([5], lookback=1),
            rewards=buf([1.0], lookback=1),
        )

    ours, theirs = lookback_only(OSAE, OBuf), lookback_only(RSAE, RBuf)
    before = copy.deepcopy(ours)
    with pytest.raises(AssertionError, match="needs add_env_reset"):
        ours.add_env_step(2, 0, 1.0)
    assert ours == before
    theirs.add_env_step(2, 0, 1.0)
    assert theirs.t == 1  # RLlib counted the lookback observations as a reset


def test_a_reset_after_lookback_only_data_starts_the_episode_as_rllib_does() -> None:
    # The refusal above points at add_env_reset, which both accept: the episode starts after
    # its lookback, and the steps that follow read alike.
    def lookback_only(cls: Any, buf: Any) -> Any:
        return cls(
            "a",
            observations=buf([0, 1], lookback=2),
            infos=buf([{}, {}], lookback=2),
            actions=buf([5], lookback=1),
            rewards=buf([1.0], lookback=1),
        )

    ours, theirs = lookback_only(OSAE, OBuf), lookback_only(RSAE, RBuf)
    for ep in (ours, theirs):
        ep.add_env_reset(2)
        ep.add_env_step(3, 0, 1.0)
    assert ours.t == theirs.t == 1 and len(ours) == len(theirs) == 1
    assert ours.get_observations() == theirs.get_observations() == [2, 3]
    assert ours.get_actions() == theirs.get_actions() == [0]
    lookback = {"indices": -1, "neg_index_as_lookback": True}
    assert ours.get_observations(**lookback) == theirs.get_observations(**lookback) == 1


@pytest.mark.parametrize("id_", ["", 0, False], ids=["empty-str", "zero", "false"])
def test_a_falsy_id_is_kept(id_: Any) -> None:  # "falsy-id"
    ours = OSAE(id_).id_
    assert ours == id_ and type(ours) is type(id_)
    theirs = RSAE(id_).id_
    assert isinstance(theirs, str) and len(theirs) == 32 and theirs != id_  # a fresh uuid4


def test_a_t_started_that_is_no_int_is_refused() -> None:  # "t-started-not-int"
    with pytest.raises(TypeError, match="t_started"):
        OSAE(t_started=2.7)
    assert RSAE(t_started=2.7).t_started == 2.7


def test_an_index_array_that_is_not_1d_is_a_type_error() -> None:  # "index-array-not-1d"
    ours, theirs = OBuf([1, 2, 3]), RBuf([1, 2, 3])
    with pytest.raises(TypeError, match="1-d"):
        ours.get(np.array(1))
    with pytest.raises(AssertionError):
        theirs.get(np.array(1))


def test_pop_inside_the_lookback_shrinks_it() -> None:  # "pop-lookback"
    ours, theirs = OBuf([1, 2, 3, 4, 5], lookback=3), RBuf([1, 2, 3, 4, 5], lookback=3)
    assert ours.pop(1) == 2
    theirs.pop(1)  # RLlib's pop returns nothing
    assert (ours.lookback, ours.get()) == (2, [4, 5])
    assert (theirs.lookback, theirs.get()) == (3, [5])


def test_concat_with_itself_is_refused() -> None:  # "concat-with-itself"
    ours, theirs = OSAE(), RSAE()
    ours.add_env_reset(0)
    theirs.add_env_reset(0)
    with pytest.raises(AssertionError, match="itself"):
        ours.concat_episode(ours)
    assert ours.get_observations() == [0] and ours.is_reset
    theirs.concat_episode(theirs)
    assert theirs.get_observations() == [] and not theirs.is_reset


@pytest.mark.parametrize("field", ["observation_space", "action_space"])
def test_a_space_that_is_no_space_is_refused(field) -> None:  # "space-not-a-space"
    ours, theirs = OSAE(), RSAE()
    with pytest.raises(TypeError, match="gymnasium Space"):
        setattr(ours, field, "x")
    assert getattr(ours, field) is None
    setattr(theirs, field, "x")
    assert getattr(theirs, field) == "x"


def test_concat_new_keys_into_empty_chunk() -> None:  # "concat-new-keys-into-empty"
    twin = new_twin(BOX_OBS, DISCRETE_ACT)
    ob = np.zeros(4, np.float32)
    twin.setup("add_env_reset", ob)
    succ = Twin(twin.ours.cut(), twin.theirs.cut())
    succ.setup("add_env_step", ob, 0, 1.0, extra_model_outputs={"v": 0.5})
    twin.ours.concat_episode(succ.ours)
    assert twin.ours.get_extra_model_outputs("v") == [0.5]
    twin.ours.validate()
    with pytest.raises(AssertionError):
        twin.theirs.concat_episode(succ.theirs)


def test_state_with_empty_extra_model_output() -> None:  # "state-empty-emo"
    ours = OSAE(
        "x",
        observations=[0, 1],
        actions=[0],
        rewards=[1.0],
        extra_model_outputs={"v": [0.5]},
        len_lookback_buffer="auto",
    )
    theirs = RSAE(
        "x",
        observations=[0, 1],
        actions=[0],
        rewards=[1.0],
        extra_model_outputs={"v": [0.5]},
        len_lookback_buffer="auto",
    )
    assert OSAE.from_state(pickle.loads(pickle.dumps(ours.get_state()))) == ours
    with pytest.raises(AssertionError):
        RSAE.from_state(theirs.get_state())


@pytest.mark.parametrize("t", [1, 99])
def test_space_checked_every_numpy_step(t: int) -> None:  # "space-check"
    twin = _stepped_twin(n=t)
    twin.ours.to_numpy()
    twin.theirs.to_numpy()
    bad = np.full(4, 5.0, np.float32)
    with pytest.raises(ValueError, match="observation"):
        twin.ours.add_env_step(bad, 0, 0.0)
    theirs = call(twin.theirs.add_env_step, bad, 0, 0.0)
    # RLlib checks only when the new t is not a multiple of 100, and with AssertionError.
    assert theirs.error is (None if t + 1 == 100 else AssertionError)


def test_list_fill_dtype_follows_column() -> None:  # "list-fill-dtype"
    space = gym.spaces.Box(float("-inf"), float("inf"), (), np.float32)
    ours, theirs = OBuf([0.1, 0.2], 0, space), RBuf([0.1, 0.2], 0, space)
    ours.finalize()
    theirs.finalize()
    assert ours.get([5, 0], fill=0.0).dtype == np.float64  # as ours.get(slice(0, 3), fill=0.0)
    assert theirs.get([5, 0], fill=0.0).dtype == np.float32  # the filler came first
    assert theirs.get([0, 5], fill=0.0).dtype == np.float64


@pytest.mark.parametrize("obs_space", [BOX_OBS, DICT_OBS])
@pytest.mark.parametrize("first_numpy", [False, True])
def test_mixed_mode_concat(obs_space: Any, first_numpy: bool) -> None:
    # Flat items: a list chunk + numpy chunk (and back) concatenate alike in both libraries.
    if True:
        twin = _stepped_twin(obs_space, n=2)
        if first_numpy:
            twin.ours.to_numpy()
            twin.theirs.to_numpy()
        succ = Twin(twin.ours.cut(len_lookback_buffer=1), twin.theirs.cut(len_lookback_buffer=1))
        ob = sample_obs(obs_space, np.random.default_rng(5))
        succ.setup("add_env_step", ob, 1, 2.0)
        if not first_numpy:
            succ.ours.to_numpy()
            succ.theirs.to_numpy()
        twin.ours.concat_episode(succ.ours)
        twin.theirs.concat_episode(succ.theirs)
        if mixed_nested_concat(twin.theirs, succ.theirs):
            # RLlib list.extend()s the dict of arrays: its keys become observations
            # (deviation "mixed-mode-concat-nested"). Ours appends the 3rd observation.
            assert twin.theirs.observations.data[-2:] == ["pos", "k"]
            assert_same(twin.ours.get_observations(-1), ob)
            assert len(twin.ours.get_observations()) == 4
            return
        assert_episodes_match(twin.ours, twin.theirs)


def test_numpy_step_a_column_cannot_hold() -> None:  # "numpy-step-misfit"
    twin = _stepped_twin(n=2)
    twin.ours.to_numpy()
    twin.theirs.to_numpy()
    ob = np.zeros(4, np.float32)
    before = copy.deepcopy(twin.ours)
    with pytest.raises(ValueError, match="rewards cannot be stored"):
        twin.ours.add_env_step(ob, 0, "high")
    assert twin.ours == before
    twin.theirs.add_env_step(ob, 0, "high")  # concatenated: the rewards turn into strings
    assert twin.theirs.get_rewards().dtype.kind == "U"


def test_to_numpy_that_cannot_stack_a_column() -> None:  # "to_numpy-partial"
    ob = np.zeros(4, np.float32)
    ours, theirs = OSAE(), RSAE()
    for ep in (ours, theirs):
        ep.add_env_reset(ob)
        ep.add_env_step(ob, np.zeros(2), 1.0)
        ep.add_env_step(ob, np.zeros(3), 1.0)  # actions of two shapes
    with pytest.raises(ValueError, match="actions cannot be stacked"):
        ours.to_numpy()
    assert not ours.observations.finalized and not ours.is_numpy
    with pytest.raises(ValueError):
        theirs.to_numpy()
    assert theirs.observations.finalized and not theirs.actions.finalized  # half numpy'd


def test_scalar_fill_on_numpy_rows_without_space() -> None:  # "fill-rows-no-space"
    rows = [np.full(2, i, np.float32) for i in range(4)]
    ours, theirs = OBuf(list(rows)), RBuf(list(rows))
    ours.finalize()
    theirs.finalize()
    for at in ([0, 7], slice(2, 6)):
        with pytest.raises(ValueError, match="give the buffer a space"):
            ours.get(at, fill=0)
    assert theirs.get([0, 7], fill=0).shape == (2, 2)  # broadcast for an index list ...
    with pytest.raises(ValueError):
        theirs.get(slice(2, 6), fill=0)  # ... but not for a slice


CONSTRUCTOR_INPUTS = {
    "tuples": lambda B: {"observations": (0.0, 1.0), "actions": (0,), "rewards": (1.0,)},
    "arrays": lambda B: {
        "observations": np.array([0.0, 1.0]),
        "actions": np.array([0]),
        "rewards": np.array([1.0]),
    },
    "ready_buffers": lambda B: {
        "observations": B([0.0, 1.0, 2.0], lookback=1),
        "actions": B([0, 1], lookback=1),
        "rewards": B([1.0, 2.0], lookback=1),
    },
    # A batched struct (a numpy'd column's form) of 4 items but 2 keys.
    "batched_dict": lambda B: {
        "observations": {"pos": np.arange(8.0).reshape(4, 2), "vel": np.ones(4)},
        "actions": [0, 1, 2],
        "rewards": [1.0, 2.0, 3.0],
    },
}


@pytest.mark.parametrize("inputs", CONSTRUCTOR_INPUTS.values(), ids=CONSTRUCTOR_INPUTS.keys())
def test_constructor_takes_sequences_and_ready_buffers(inputs: Any) -> None:  # "constructor-data"
    ours = OSAE(**inputs(OBuf))  # len_lookback_buffer="auto", the default
    ours.validate()
    assert ours.infos.len_incl_lookback() == ours.observations.len_incl_lookback()
    assert ours.infos.lookback == ours.observations.lookback
    with pytest.raises((ValueError, TypeError, AssertionError)):
        RSAE(**inputs(RBuf))


def test_constructor_takes_a_dict_as_a_batch() -> None:  # "constructor-data"
    pos = np.arange(8.0).reshape(4, 2)
    columns = {"actions": [0, 1, 2], "rewards": [1.0, 2.0, 3.0], "len_lookback_buffer": 0}
    ours = OSAE(observations={"pos": pos, "vel": np.ones(4)}, **columns)
    assert len(ours) == 3 and not ours.is_numpy
    assert [o["pos"].tolist() for o in ours.get_observations()] == pos.tolist()
    with pytest.raises(AssertionError):  # RLlib counts the dict's 2 keys as its items
        RSAE(observations={"pos": pos, "vel": np.ones(4)}, **columns)
    with pytest.raises(TypeError, match="batched struct"):  # leaves of different lengths
        OSAE(observations={"pos": pos, "vel": np.ones(3)}, actions=[0], rewards=[1.0])


def test_numpy_cut_and_slice_own_their_data() -> None:  # "numpy-chunks-share-data"
    twin = _stepped_twin(n=4)
    for ep in (twin.ours, twin.theirs):
        ep.to_numpy()
    rewards = twin.ours.get_rewards().tolist()
    for side in ("ours", "theirs"):
        ep = getattr(twin, side)
        part = ep[1:3]
        part.set_rewards(new_data=5.0, at_indices=0)
        successor = ep.cut(len_lookback_buffer=2)
        successor.set_rewards(new_data=7.0, at_indices=-1, neg_index_as_lookback=True)
    assert twin.ours.get_rewards().tolist() == rewards
    assert twin.theirs.get_rewards().tolist() == [rewards[0], 5.0, rewards[2], 7.0]
    # A successor whose first observation was rewritten no longer continues its predecessor.
    successor = twin.ours.cut()
    successor.set_observations(new_data=sample_obs(BOX_OBS, np.random.default_rng(1)), at_indices=0)
    before = copy.deepcopy(twin.ours)
    with pytest.raises(AssertionError, match="first observation"):
        twin.ours.concat_episode(successor)
    assert twin.ours == before


def test_spaces_without_a_fixed_layout_stay_in_list_mode() -> None:  # "numpy-no-fixed-layout"
    space = gym.spaces.Sequence(gym.spaces.Discrete(3))
    ours, theirs = OSAE(observation_space=space), RSAE(observation_space=space)
    for ep in (ours, theirs):
        ep.add_env_reset((0, 1))
        ep.add_env_step((1, 2), 0, 1.0)
    theirs.to_numpy()  # equal-length sequences happen to stack...
    assert np.asarray(theirs.get_observations()).shape == (2, 2)
    with pytest.raises(ValueError, match="no fixed layout"):
        ours.to_numpy()  # ...and the next, longer, valid one would not: refused whatever the items
    assert not ours.is_numpy and ours.get_observations() == [(0, 1), (1, 2)]


def test_numpy_column_takes_numbers_only() -> None:  # "numpy-step-misfit"
    def finalized(buffer: Any, items: list[Any]) -> Any:
        buf = buffer(items)
        buf.finalize()
        return buf

    floats, bools = [1.0, 2.0], [np.bool_(False), np.bool_(False)]
    narrow = [np.float32(1), np.float32(2)]
    ours, theirs = finalized(OBuf, floats), finalized(RBuf, floats)
    with pytest.raises(ValueError, match="numpy column"):
        ours.append(None)
    with pytest.raises(ValueError, match="numpy column"):
        ours.set("2.5", at_indices=0)
    assert ours.get().tolist() == floats
    theirs.append(None)  # concatenated: the column turns into objects
    assert theirs.get().dtype == object and theirs.get(-1) is None
    theirs = finalized(RBuf, floats)
    theirs.set("2.5", at_indices=0)  # numpy parses the string
    assert theirs.get().tolist() == [2.5, 2.0]
    ours, theirs = finalized(OBuf, bools), finalized(RBuf, bools)
    with pytest.raises(ValueError, match="numpy column"):
        ours.set("False", at_indices=0)
    theirs.set("False", at_indices=0)  # a non-empty string is True
    assert theirs.get().tolist() == [True, False]
    ours = finalized(OBuf, narrow)
    for write in (lambda b: b.append(1e40), lambda b: b.set(1e40, at_indices=0)):
        with pytest.raises(ValueError, match="float32"):
            write(ours)
        assert ours.get().tolist() == [1.0, 2.0] and ours.get().dtype == np.float32
    theirs = finalized(RBuf, narrow)
    theirs.append(1e40)  # concatenated: float32 widens to float64
    assert theirs.get().dtype == np.float64 and theirs.get(-1) == 1e40
    theirs = finalized(RBuf, narrow)
    with np.errstate(over="ignore"):
        theirs.set(1e40, at_indices=0)  # cast: inf
    assert np.isinf(theirs.get(0)) and theirs.get().dtype == np.float32


def test_negative_step_with_fill() -> None:  # "negative-step-fill"
    ours, theirs = OBuf([10, 11]), RBuf([10, 11])
    # Positions 2 then 0 (stop -4 is position -2, exclusive): a filler, then 10.
    assert ours.get(slice(2, -4, -2), fill=0) == [0, 10]
    assert theirs.get(slice(2, -4, -2), fill=0) == [0, 11, 0]
    ours, theirs = OBuf([10]), RBuf([10])
    assert ours.get(slice(-4, -1, -1), fill=0) == []  # start < stop: nothing to read backwards
    assert theirs.get(slice(-4, -1, -1), fill=0) == [0, 0, 0]


def test_episode_slice_with_a_step() -> None:  # "episode-slice-step"
    twin = _stepped_twin(n=6)
    with pytest.raises(ValueError, match="step"):
        twin.ours.slice(slice(0, 6, 2))
    stepped = twin.theirs.slice(slice(0, 6, 2))
    assert len(stepped.get_observations()) == 4 and len(stepped.get_actions()) == 3
    assert stepped.get_actions() == twin.theirs.get_actions()[0:6:2]


def _int_episodes() -> Twin:
    twin = Twin(OSAE("x"), RSAE("x"))
    twin.setup("add_env_reset", 0)
    for t in range(1, 7):
        twin.setup("add_env_step", t, t, float(t))
    return twin


def test_index_types() -> None:  # "index-types"
    twin = _int_episodes()
    ours, theirs = twin.ours, twin.theirs
    assert ours.get_observations(np.int64(2)) == 2
    assert ours.get_observations(np.array([0, 1])) == [0, 1]
    assert ours.get_observations((0, 1)) == [0, 1]
    with pytest.raises(TypeError, match="bool"):
        ours.get_observations(True)
    for index in (np.int64(2), np.array([0, 1]), (0, 1)):
        with pytest.raises(AssertionError):
            theirs.get_observations(index)
    assert theirs.get_observations(True) == 1  # a bool read as the int 1


def test_negative_constructor_lookback() -> None:  # "negative-lookback-arg"
    kw = dict(observations=[0, 1, 2], actions=[0, 0], rewards=[1.0, 1.0], len_lookback_buffer=-1)
    with pytest.raises(ValueError, match="len_lookback_buffer"):
        OSAE(**kw)
    theirs = RSAE(**kw)
    assert len(theirs) == 3  # more steps than the two actions given


def test_set_with_a_tuple_of_items() -> None:  # "set-tuple-new-data"
    twin = _int_episodes()
    with pytest.raises(TypeError, match="list of items"):
        twin.ours.set_rewards(new_data=(8.0, 9.0), at_indices=slice(0, 2))
    assert twin.ours.get_rewards(slice(0, 2)) == [1.0, 2.0]
    twin.theirs.set_rewards(new_data=(8.0, 9.0), at_indices=slice(0, 2))
    assert twin.theirs.get_rewards(slice(0, 2)) == [8.0, 9.0]


def test_concat_with_nan_in_the_boundary_observation() -> None:  # "concat-nan-boundary"
    for ep in (OSAE("x"), RSAE("x")):
        ep.add_env_reset(np.zeros(2))
        ep.add_env_step(np.array([np.nan, 1.0]), 0, 1.0)
        successor = ep.cut()
        successor.add_env_step(np.zeros(2), 0, 1.0)
        if isinstance(ep, OSAE):
            ep.concat_episode(successor)
            assert len(ep) == 2 and np.isnan(ep.get_observations(1)[0])
        else:
            with pytest.raises(AssertionError):
                ep.concat_episode(successor)  # NaN != NaN: its own successor is refused


def test_adding_a_number_adds_to_numpy_items() -> None:  # "add-numpy-number"
    items = [np.int64(1), np.float32(2.0), 3]
    ours, theirs = OBuf(list(items)) + 1, RBuf(list(items)) + 1
    assert ours.get() == [2, 3.0, 4]
    assert theirs.get() == [1, 2.0, 4]  # RLlib adds to Python numbers only
    assert (OBuf([1, 2]) + np.int64(1)).get() == [2, 3]
    assert not (OBuf([1, 2]) + np.int64(1)).finalized
    assert (RBuf([1, 2]) + np.int64(1)).finalized  # RLlib: finalized


def test_tuple_episode_id_column() -> None:  # "tuple-eps-id"
    kw = dict(observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 2.0], len_lookback_buffer=0)
    ours, theirs = OSAE(("run", 1), **kw), RSAE(("run", 1), **kw)
    # List mode: both a list of the tuple, one a row.
    assert ours.get_data_dict()["eps_id"] == theirs.get_data_dict()["eps_id"] == [("run", 1)] * 2
    ours.to_numpy()
    theirs.to_numpy()
    column = ours.get_data_dict()["eps_id"]
    assert column.dtype == object and column.shape == (2,)
    assert column.tolist() == [("run", 1)] * 2
    spread = theirs.get_data_dict()["eps_id"]  # a second axis of the parts, cast to strings
    assert spread.dtype.kind == "U" and spread.shape == (2, 2)
    assert spread.tolist() == [["run", "1"]] * 2


def test_state_key_names() -> None:  # "state-keys"
    kwargs = dict(observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0)
    ours, theirs = OSAE("x", **kwargs).get_state(), RSAE("x", **kwargs).get_state()
    # The same content under plain names: ours drop RLlib's leading underscores.
    assert {"observation_space", "start_time"} <= set(ours)
    assert {"_observation_space", "_start_time"} <= set(theirs)
    assert not {"_observation_space", "_start_time"} & set(ours)


def test_cut_and_slice_results_own_their_data() -> None:  # "slices-copy"
    obs = np.arange(6, dtype=np.float32).reshape(6, 1)
    kwargs = dict(observations=list(obs), actions=[0] * 5, rewards=[1.0] * 5)
    ours = OSAE("x", len_lookback_buffer=0, **kwargs)
    theirs = RSAE("x", len_lookback_buffer=0, **kwargs)
    ours.to_numpy()
    theirs.to_numpy()
    mine, rllibs = ours.slice(slice(1, 4)), theirs.slice(slice(1, 4))
    # Ours copies: the slice shares no memory with its parent.
    assert not np.shares_memory(mine.get_observations(), ours.get_observations())
    # RLlib's slice of a numpy'd episode views the parent's arrays (allowed there).
    assert np.shares_memory(rllibs.get_observations(), theirs.get_observations())
