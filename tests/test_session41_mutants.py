"""Behaviour that hand-made mutants of ``episodes.spaces.batching`` and ``episodes.replay.state``
showed no test pinned (session 41).

Each test fails with one or more mutants applied (named beside it) and passes on the code as
it is:

- ``batch``: ints numpy rounds as floats are kept exactly from 2**53 up (an int64 just above
  it, or a 0-d int array, beside a uint64) and up to the largest uint64, while an int64
  column of big ints stays int64 and ints beside floats stay floats; int rows among tuples
  keep their int dtype; an empty list beside a falsy non-list, a masked array among tuple rows
  and rows of differing lengths (whose total fits a block) are refused; an array beside an
  array subclass batches as a plain array; a deep nesting that is no loop still raises the
  RecursionError dm-tree gave.
- ``set_state``: a state of another version, episode columns of more rows than ids (``final_obs``
  and ``final_info`` too), int ``terminated`` flags, final observations of another dtype,
  steps without observations, a step column of more rows than rewards, 2-d ``ep``/``t``
  columns, episode rows beyond +-2**62 and steps that do not run their episodes are refused,
  each naming its own reason (the episode it names the one at fault), and leave the buffer as
  it was; ``get_state`` writes version 1.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer
from episodes.replay.state import buffer_state, parsed_state
from episodes.spaces import batch, map_leaves_with_space, unbatch
from episodes.spaces.batching import batch_one_class, rounded_ints

# ------------------------------------------------------------------ spaces.batching


@pytest.mark.parametrize(
    ("items", "want"),
    [
        # Mutant: _EXACT_FLOAT_INTS = 2**54 (2**53 + 1 read as 2**53 beside a uint64).
        pytest.param([np.int64(2**53 + 1), np.uint64(1)], [2**53 + 1, 1], id="just-above-2**53"),
        # Mutant: _big_int's ">=" as ">" (2**53 itself, exact in float64 beside a uint64, is
        # kept as numpy would not: as a uint64, as every int from 2**53 up).
        pytest.param([np.int64(2**53), np.uint64(1)], [2**53, 1], id="2**53"),
        # Mutant: _big_int's ">=" as ">" for a 0-d array.
        pytest.param([np.array(2**53), np.uint64(2)], [2**53, 2], id="0-d-2**53"),
        # Mutant: _UINT64_MAX = 2**64 - 2 (the largest uint64 put in an object column).
        pytest.param([np.uint64(2**64 - 1), np.int64(1)], [2**64 - 1, 1], id="largest-uint64"),
    ],
)
def test_ints_numpy_rounds_as_floats_batch_exactly_as_uint64(items: list[Any], want: list[int]):
    out = batch(items)
    assert out.dtype == np.uint64
    assert out.tolist() == want


@pytest.mark.parametrize(
    ("items", "dtype", "want"),
    [
        # Mutants: _int_like taking no 0-d array for an int (False, "!=" 0 dims, "not in" "iu").
        pytest.param([np.array(2**53 + 1), np.uint64(1)], np.uint64, [2**53 + 1, 1], id="0-d"),
        # Mutant: _int_like taking everything for an int (0.5 read as int(0.5) == 0).
        pytest.param([np.int64(2**60), 0.5], np.float64, [2.0**60, 0.5], id="int-and-float"),
        # Mutant: _exact_ints' "not floats or not an int first" as "and" (an int64 column of
        # big ints of both signs turned into an object column).
        pytest.param([2**62, -1], np.int64, [2**62, -1], id="int64-kept"),
        # Mutant: _big_int taking every 0-d int array for a big one (small ints made uint64).
        pytest.param([np.array(1), np.uint64(2)], np.float64, [1.0, 2.0], id="0-d-small"),
    ],
)
def test_ints_keep_exact_values_and_numpys_dtype_where_it_holds_them(items, dtype, want):
    out = batch(items)
    assert out.dtype == dtype
    assert out.tolist() == want


@pytest.mark.parametrize(
    ("values", "want"),
    [
        # Mutant: a signed array's least value not looked at ("!=" for "== 'u'").
        pytest.param([np.array([-(2**60), 0])], True, id="big-negative"),
        # Mutant: an array's ">= 2**53" as "> 2**53".
        pytest.param([np.array([2**53, 0])], True, id="2**53"),
        pytest.param([np.array([2**53 - 1, -(2**53) + 1])], False, id="below-2**53"),
        # Mutant: every int array taken for one holding a big int.
        pytest.param([np.array([1, 2])], False, id="small"),
        pytest.param([np.array([2**53 + 1], np.uint64)], True, id="uint64"),
    ],
)
def test_rounded_ints_looks_at_both_ends_of_an_int_array(values: list[Any], want: bool):
    assert rounded_ints(values) is want


def test_an_empty_list_beside_a_falsy_scalar_is_differing_structure():
    # Mutant: _empty_list_items taking any falsy item for an empty list ("or" for "and").
    with pytest.raises(ValueError, match="differing structure"):
        batch([[], 0])


def test_a_deep_nesting_that_is_no_loop_raises_the_recursion_error():
    # Mutant: the bare re-raise after _holds_itself dropped (batch returned None).
    deep: Any = 0
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(RecursionError):
        batch([deep, deep])


def test_a_masked_array_among_tuple_rows_is_refused_not_stacked_without_its_mask():
    # Mutant: _as_rows' guard on item classes dropped (np.asarray dropped the mask).
    rows = [(1.0, 2.0), np.zeros(2), np.ma.masked_array([0.0, 0.0], mask=[True, False])]
    with pytest.raises(ValueError, match="differing structure"):
        batch(rows)


def test_int_rows_among_tuples_keep_their_int_dtype():
    # Mutants: _typed_empty_lists' "stacked.size or ..." as "and", or its guard dropped (the
    # rows, not empty, turned float64 for a tuple among them).
    out = batch([(1, 2), np.array([3, 4])])
    assert out.dtype == np.int64
    assert out.tolist() == [[1, 2], [3, 4]]


def test_an_array_beside_an_array_subclass_batches_as_a_plain_array():
    # Mutant: _join_rows' "!=" as "==" (the subclass joined by np.concatenate, the
    # concatenation of an ndarray and a MaskedArray a MaskedArray).
    items = [np.zeros(2), np.ma.masked_array([1.0, 2.0], mask=[True, False])]
    out = batch(items)
    assert type(out) is np.ndarray
    assert out.tolist() == np.asarray(items).tolist()


@pytest.mark.parametrize(
    "batcher",
    [
        pytest.param(batch, id="batch"),
        pytest.param(lambda a: batch_one_class(a, np.ndarray), id="one"),
    ],
)
def test_rows_of_differing_lengths_whose_total_fits_a_block_are_refused(batcher: Any):
    # Mutants: _join_arrays' equal-length guard dropped or inverted (lengths 2, 1, 3 hold the
    # 6 values a [3, 2] block holds, reshaped silently).
    with pytest.raises(ValueError, match=r"differing shapes: \(2,\), \(1,\), \(3,\)"):
        batcher([np.arange(2.0), np.arange(1.0), np.arange(3.0)])


@pytest.mark.parametrize("empty", [{}, (), []], ids=["dict", "tuple", "list"])
def test_a_structure_without_leaves_unbatches_to_no_items(empty: Any):
    # Mutants: unbatch's no-leaves guard dropped (a ValueError naming lengths []), or its
    # return as None.
    assert unbatch(empty) == []


def test_a_key_the_dict_space_lacks_is_named_with_the_known_keys():
    # Mutant: the unknown-key guard of map_leaves_with_space dropped (a bare KeyError: 'z').
    space = gym.spaces.Dict({"a": gym.spaces.Discrete(2)})
    with pytest.raises(KeyError, match=r"key 'z' not in Dict space; known keys \['a'\]"):
        map_leaves_with_space(lambda value, _: value, {"z": 1}, space)


def test_a_dict_value_lacking_a_key_names_the_missing_key():
    # Mutant: the missing keys listed as those given ("in" for "not in").
    space = gym.spaces.Dict({"a": gym.spaces.Discrete(2), "b": gym.spaces.Discrete(2)})
    with pytest.raises(ValueError, match=r"Dict value lacks the space's keys \['b'\]"):
        map_leaves_with_space(lambda value, _: value, {"a": 1}, space)


# ------------------------------------------------------------------ replay.state


def _episode(id_: str, n: int = 3) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[np.float32(t) for t in range(n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        terminated=True,
        len_lookback_buffer=0,
    )


def _state() -> dict[str, Any]:
    buf = EpisodeReplayBuffer(20)
    buf.add([_episode("a"), _episode("b")])
    return buf.get_state()


def test_get_state_writes_version_1():
    # Mutants: _VERSION = 0 / 2.
    assert _state()["version"] == 1


def _set_version_2(state: dict[str, Any]) -> None:
    state["version"] = 2


def _extra_final_info(state: dict[str, Any]) -> None:
    state["episodes"]["final_info"] = [*state["episodes"]["final_info"], {}]


def _extra_final_obs(state: dict[str, Any]) -> None:
    finals = state["episodes"]["final_obs"]
    state["episodes"]["final_obs"] = np.concatenate([finals, finals[:1]])


def _int_terminated(state: dict[str, Any]) -> None:
    state["episodes"]["terminated"] = np.array([1, 1])


def _float64_finals(state: dict[str, Any]) -> None:
    state["episodes"]["final_obs"] = state["episodes"]["final_obs"].astype(np.float64)


def _no_observations(state: dict[str, Any]) -> None:
    state["steps"]["obs"] = None


def _extra_info(state: dict[str, Any]) -> None:
    state["steps"]["infos"] = [*state["steps"]["infos"], None]


def _column_ep(state: dict[str, Any]) -> None:
    state["steps"]["ep"] = np.asarray(state["steps"]["ep"]).reshape(-1, 1)


def _column_t(state: dict[str, Any]) -> None:
    state["steps"]["t"] = np.asarray(state["steps"]["t"]).reshape(-1, 1)


def _one_space(state: dict[str, Any]) -> None:
    state["spaces"] = [None]


def _spaces_by_name(state: dict[str, Any]) -> None:
    state["spaces"] = {"obs": None, "act": None}


def _infos_2d(state: dict[str, Any]) -> None:
    state["steps"]["infos"] = np.empty((6, 1), object)


def _layout_uid_longer(state: dict[str, Any]) -> None:
    uid = np.asarray(state["layout"]["uid"])
    state["layout"]["uid"] = np.append(uid, uid[-1] + 1)


def _slot(value: int) -> Any:
    def change(state: dict[str, Any]) -> None:
        slots = np.array(state["layout"]["slots"])
        slots[-1] = value
        state["layout"]["slots"] = slots

    return change


def _capacity_5(state: dict[str, Any]) -> None:
    state["capacity"] = 5


@pytest.mark.parametrize(
    ("change", "match"),
    [
        # Mutants: the version guard's "or" as "and", the guard or its raise dropped.
        pytest.param(_set_version_2, "not a replay buffer state of version 1", id="version"),
        # Mutants: the per-episode row count guard or its raise dropped.
        pytest.param(_extra_final_info, r"episodes\['final_info'\] holds 3 rows for 2", id="info"),
        # Mutant: "final_obs" exempted from the row count whenever it is given ("or").
        pytest.param(_extra_final_obs, r"episodes\['final_obs'\] holds 3 rows for 2", id="obs"),
        # Mutants: the bool-flags guard or its raise dropped (1 cast to True silently).
        pytest.param(_int_terminated, "'terminated'] must hold bools", id="int-flags"),
        # Mutants: the final-observation guard's "or" as "and", the guard or its raise dropped.
        pytest.param(_float64_finals, "final observations of shape", id="finals-dtype"),
        # Mutants: the guard on steps without observations or its raise dropped.
        pytest.param(_no_observations, r"6 steps without observations", id="no-obs"),
        # Mutants: the step-column row count guard or its raise dropped.
        pytest.param(_extra_info, r"steps\[infos\] holds 7 rows for 6 rewards", id="infos-rows"),
        # Mutant: _indices' shape guard dropped (a column of rows of one).
        pytest.param(
            _column_ep, r"steps\['ep'\] must be 6 integers, got shape \(6, 1\)", id="ep-2d"
        ),
        # Mutants: _times' shape guard or its raise dropped.
        pytest.param(_column_t, r"steps\['t'\] must be 6 integers, got shape \(6, 1\)", id="t-2d"),
        # Mutants: _spaces' pair guard dropped (an IndexError), its "or" as "and" (a dict of two).
        pytest.param(_one_space, r"spaces must be an \[observation, action\] pair", id="1-space"),
        pytest.param(_spaces_by_name, r"must be an \[observation, action\] pair", id="space-dict"),
        # Mutant: _check_infos' "ndim != 1" as "== 1" (a 2-d object array taken).
        pytest.param(_infos_2d, r"steps\['infos'\] must be a list of infos", id="infos-2d"),
        # Mutants: the layout's uid-length guard or its raise dropped.
        pytest.param(_layout_uid_longer, r"layout\['uid'\] holds 7", id="layout-uid"),
        # Mutants: the layout slots' ">= end" as "> end", "<=" (a repeated slot) as "<".
        pytest.param(_slot(6), r"layout\['slots'\] must rise .* within 0 \.\. 5", id="slot=end"),
        pytest.param(_slot(4), r"layout\['slots'\] must rise .* within 0 \.\. 5", id="slot-twice"),
        # Mutant: over the capacity only three episodes or more refused ("n > 2").
        pytest.param(_capacity_5, "6 steps of 2 episodes exceed the capacity 5", id="capacity"),
    ],
)
def test_set_state_refuses_a_broken_state_and_keeps_the_buffer(change: Any, match: str):
    state = _state()
    change(state)
    buf = EpisodeReplayBuffer(5)
    buf.add(_episode("z", 2))
    before = buf.get_state()
    with pytest.raises(ValueError, match=match):
        buf.set_state(state)
    after = buf.get_state()
    assert after["episodes"]["ids"] == before["episodes"]["ids"] == ["z"]
    assert after["capacity"] == 5


def test_infos_given_as_a_1d_object_array_restore():
    # Mutant: _check_infos' "ndim != 1" as "== 1" (a 1-d object array refused).
    state = _state()
    state["steps"]["infos"] = np.array([{"k": i} for i in range(6)], dtype=object)
    buf = EpisodeReplayBuffer(5)
    buf.set_state(state)
    assert buf.get_num_timesteps() == 6
    assert buf.get_state()["steps"]["infos"] == [{"k": i} for i in range(6)]


def _at(part: str, key: str, index: int, value: int) -> Any:
    def change(state: dict[str, Any]) -> None:
        column = np.array(state[part][key])
        column[index] = value
        state[part][key] = column

    return change


def _both(*changes: Any) -> Any:
    def change(state: dict[str, Any]) -> None:
        for one in changes:
            one(state)

    return change


def _swap_first_times(state: dict[str, Any]) -> None:
    t = np.array(state["steps"]["t"])
    t[0], t[1] = t[1], t[0]
    state["steps"]["t"] = t


# Each reason of _check_threads named (the existing tests match "a broken replay buffer state"
# only, which a later check or numpy's own error also gives where a guard is dropped).
THREADS = [
    # Mutant: the rows guard's ">= n" as "> n" (row 2 of 2 ids counted as an episode's).
    ("ep=2", _at("steps", "ep", 0, 2), r"steps of episode rows \[0, 1, 2\] for 2 ids"),
    # Mutants: the rows guard dropped, its "or" as "and" (bincount's own error), raise dropped.
    ("ep=-1", _at("steps", "ep", 0, -1), r"steps of episode rows \[-1, 0, 1\] for 2 ids"),
    # Mutants: the counts guard's "or" as "and", its raise dropped.
    ("t_end", _at("episodes", "t_end", 0, 2), r"episode 'a' runs from t_begin=0 to t_end=2"),
    # Mutants: _spans' guard dropped, its "or" as "and", its raise dropped (a wrapped length).
    (
        "span-up",
        _both(_at("episodes", "t_begin", 0, -(2**62)), _at("episodes", "t_end", 0, 2**62)),
        "an episode spans more than 2",
    ),
    (
        "span-down",
        _both(_at("episodes", "t_begin", 0, 2**62), _at("episodes", "t_end", 0, -(2**62))),
        "an episode spans more than 2",
    ),
    # Mutants: _spans' bounds refused themselves ("<=" for "<", ">=" for ">").
    ("span=2**62", _at("episodes", "t_end", 0, 2**62), r"\(4611686018427387904 steps\)"),
    (
        "span=-2**62",
        _both(_at("episodes", "t_begin", 0, 2**62), _at("episodes", "t_end", 0, 0)),
        r"\(-4611686018427387904 steps\)",
    ),
    # Mutant: the position guard's ">=" as ">" (a t equal to t_end taken as in the episode).
    ("t=t_end", _at("steps", "t", 2, 3), "step 2 at t=3 lies outside its episode's"),
    ("t<t_begin", _at("steps", "t", 0, -1), "step 0 at t=-1 lies outside its episode's"),
    ("repeated-t", _at("steps", "t", 1, 0), "an episode holds two steps of the same t"),
    ("swapped-t", _swap_first_times, "an episode's steps are not in time order"),
    ("nxt", _at("steps", "nxt", 0, 4), r"steps\['nxt'\] links steps other than"),
    ("prv", _at("steps", "prv", 1, -1), r"steps\['prv'\] links steps other than"),
    ("first", _at("episodes", "first_slot", 1, 4), r"\['first_slot'\] links steps other than"),
    ("last", _at("episodes", "last_slot", 0, 5), r"\['last_slot'\] links steps other than"),
]


@pytest.mark.parametrize(("change", "match"), [pytest.param(c, m, id=i) for i, c, m in THREADS])
def test_steps_that_do_not_run_their_episodes_are_refused_naming_the_reason(change, match):
    state = _state()
    change(state)
    with pytest.raises(ValueError, match=match):
        EpisodeReplayBuffer(5).set_state(state)


def test_the_episode_whose_steps_disagree_is_the_one_named():
    # Mutants: the index of the episode named taken where counts agree ("==" for "!="), or
    # where an episode has one step ("<= 1" for "< 1"): 'a' (1 step, sound) named for 'b'.
    buf = EpisodeReplayBuffer(20)
    buf.add([_episode("a", 1), _episode("b", 3)])
    state = buf.get_state()
    _at("episodes", "t_end", 1, 2)(state)
    with pytest.raises(ValueError, match=r"episode 'b' runs from t_begin=0 to t_end=2 \(2 steps\)"):
        EpisodeReplayBuffer(5).set_state(state)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        # Mutants: _indices' range guard dropped, its "or" as "and", its raise dropped.
        pytest.param(2**62 + 1, r"steps\['ep'\] holds values beyond \+-2\*\*62", id="above"),
        pytest.param(-(2**62) - 1, r"steps\['ep'\] holds values beyond \+-2\*\*62", id="below"),
        # Mutants: the bounds themselves refused ("<=" for "<", ">=" for ">").
        pytest.param(2**62, r"steps of episode rows \[0, 1, 4611686018427387904\]", id="2**62"),
        pytest.param(
            -(2**62), r"steps of episode rows \[-4611686018427387904, 0, 1\]", id="-2**62"
        ),
    ],
)
def test_step_episode_rows_are_range_checked_up_to_2_to_the_62(value: int, match: str):
    state = _state()
    owners = np.array(state["steps"]["ep"])
    owners[0] = value
    state["steps"]["ep"] = owners
    with pytest.raises(ValueError, match=match):
        EpisodeReplayBuffer(5).set_state(state)


def test_parsed_state_numbers_new_steps_from_the_states_next_uid_by_default():
    # Mutant: parsed_state's ``issued`` defaulting to 1 (an empty buffer's ids from 1).
    assert parsed_state(buffer_state(EpisodeReplayBuffer(10)))["_store"].next_uid == 0
