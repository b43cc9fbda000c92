"""Behaviour that hand-made mutants of ``episodes.runner.table`` and ``episodes.converter.columns``
showed no test pinned (session 42).

Each test fails with one mutant (named beside it) applied, and passes on the code as it is:
a compacted recording compacts to itself and a window of vector steps is cut at its last row;
a chunk with no final observation kept apart has ``final == -1``; ``rows`` of an extra output
needs its key, a missing output names the episode and ``ColumnKeys``; int actions no dtype
holds (across envs or within one env), distillation without privileged actions and columns
without steps are refused, each with its own message; an unfinished chunk followed by another
episode, or a padded column ending early, is closed at its own last step (the longest column
stays ongoing); a stepless end without a bootstrap value leaves the bootstrap to the chunk
that has one; equal ids held by two string objects are one episode, and a gap after an
unfinished chunk is not called an ending.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.converter.columns import (
    ColumnKeys,
    check_time_order,
    extra_keys_for,
    rows,
    time_major,
)
from episodes.runner import EnvRunner, RandomPolicy

# ---------------------------------------------------------------------- runner.table


def _cartpole_runner(**kwargs: Any) -> EnvRunner:
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    return EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0, **kwargs)


def test_a_compacted_recording_compacts_to_itself():
    # Mutants: ``first == 0`` read as ``!= 0``, ``== 1`` or ``== -1`` in Recording.compact (a
    # band already cut cut again, or a band starting after row 0 kept whole).
    runner = _cartpole_runner(window="vector_steps")
    runner.sample(8)
    compact = runner.sample(2).recording.compact()
    assert compact.compact() is compact


def test_a_vector_steps_band_ends_at_the_windows_last_row():
    # Mutant: the band of a window of vector steps stopping two rows after the window's last
    # row (one row no chunk reads kept).
    runner = _cartpole_runner(window="vector_steps")
    runner.sample(8)  # the next call's window lies inside the blocks, rows after it
    recording = runner.sample(2).recording
    assert recording.blocks.step_rows > int(recording.window.max()) + 1
    compact = recording.compact()
    first = int((compact.table.first - compact.table.lookback).min())
    assert (first, compact.blocks.step_rows) == (0, int(compact.window.max()) + 1)


def test_a_chunk_without_a_final_kept_apart_has_final_minus_one():
    # Mutant: the "no final observation kept apart" entry of the chunk table made -2 (the
    # table documents -1).
    recording = _cartpole_runner().sample(4).recording
    assert not (recording.table.terminated | recording.table.truncated).any()
    assert recording.table.final.tolist() == [-1, -1]


# ----------------------------------------------------------------- converter.columns


def _plain_chunk(**kwargs: Any) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "a",
        observations=[0.0, 1.0, 2.0],
        actions=[1, 0],
        rewards=[1.0, 0.0],
        len_lookback_buffer=0,
        **kwargs,
    )


def test_rows_of_an_extra_output_without_its_key_is_a_type_error():
    # Mutant: the guard for key=None deleted (a KeyError about the output None instead).
    with pytest.raises(TypeError, match="needs the output's key"):
        rows(_plain_chunk(), "extra")


def test_a_missing_extra_output_names_the_episode_and_the_configuration():
    # Mutant: the KeyError naming the episode and ColumnKeys deleted (the dict's bare
    # KeyError('vf_preds') instead).
    with pytest.raises(
        KeyError, match=r"episode a has no extra-model-output 'vf_preds'.*ColumnKeys"
    ):
        time_major([[_plain_chunk()]], ColumnKeys())


def _chunk_with_action(id_: str, action: Any) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[0.0, 1.0],
        actions=[action],
        rewards=[1.0],
        extra_model_outputs={"vf_preds": [0.0], "action_logp": [0.0]},
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize("big", [np.uint64(2**64 - 1), 2**64 - 1], ids=["uint64", "python-int"])
def test_envs_whose_int_actions_no_dtype_holds_are_refused_naming_the_field(big):
    # Mutant: the ValueError of _stack_envs deleted (the actions column silently None).
    groups = [[_chunk_with_action("a", big)], [_chunk_with_action("b", -1)]]
    with pytest.raises(ValueError, match="actions: the envs' rows do not join: uint64 values"):
        time_major(groups, ColumnKeys())


def test_distillation_without_privileged_actions_is_refused_by_extra_keys_for():
    # Mutant: the guard deleted (the key None listed, a TypeError at the first chunk read).
    with pytest.raises(ValueError, match=r"distillation needs ColumnKeys\(privileged_actions"):
        extra_keys_for(ColumnKeys(), "distillation")
    assert extra_keys_for(ColumnKeys(privileged_actions="teacher"), "distillation") == ["teacher"]


def _chunk_of(id_: str, steps: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[0.0] * (steps + 1),
        actions=[0] * steps,
        rewards=[1.0] * steps,
        extra_model_outputs={"vf_preds": [0.0] * steps, "action_logp": [0.0] * steps},
        len_lookback_buffer=0,
    )


# name: (steps per env column, pad, the whole message). Mutants: the first ``or`` of the
# refusal's condition read as ``and`` and ``min(lengths) == 0`` as ``== -1`` (columns of no
# steps at all let through), the "nothing to convert" and the pad refusals deleted (another
# message), the no-steps test before the per_chunk hint read as ``== -1`` (the hint given for
# a column per_chunk would refuse as well).
EMPTY_COLUMNS = {
    "one env, no step": ([0], False, "no chunk holds a step: there is nothing to convert; got [0]"),
    "two envs, no step": (
        [0, 0],
        False,
        "no chunk holds a step: there is nothing to convert; got [0, 0]",
    ),
    "padded, no step": (
        [0, 0],
        True,
        "no chunk holds a step: there is nothing to convert; got [0, 0]",
    ),
    "padded, one column without steps": (
        [1, 0],
        True,
        "every column needs at least one step; got [1, 0]",
    ),
    "one column without steps": (
        [1, 0],
        False,
        "every env needs the same, non-zero number of steps; got [1, 0]",
    ),
}


@pytest.mark.parametrize("name", list(EMPTY_COLUMNS))
def test_columns_without_steps_are_refused_with_their_own_message(name):
    steps, pad, message = EMPTY_COLUMNS[name]
    groups = [[_chunk_of(f"e{n}", k)] for n, k in enumerate(steps)]
    with pytest.raises(ValueError) as err:
        time_major(groups, ColumnKeys(), pad=pad)
    assert str(err.value) == message


def test_each_unfinished_chunk_followed_by_another_episode_ends_at_its_own_last_step():
    # Mutants: the done and the truncated of an unfinished chunk followed by another
    # episode set on the column's first piece (``parts[...][0]``), not the one just laid.
    column = [_chunk_of("a", 2), _chunk_of("b", 2), _chunk_of("c", 2)]
    cols = time_major([column], ColumnKeys())
    assert cols.dones[:, 0].tolist() == [False, True, False, True, False, False]
    assert cols.truncated[:, 0].tolist() == [False, True, False, True, False, False]
    assert [(t, chunk.id_) for t, _, chunk in cols.truncated_steps] == [(1, "a"), (3, "b")]


def test_a_stepless_end_without_a_bootstrap_value_bootstraps_from_the_chunk_that_has_one():
    # Mutant: ``not in`` read as ``in`` (the stepless end, which holds no bootstrap value,
    # taken to bootstrap the truncation in place of the chunk whose custom_data holds one).
    steps = _chunk_of("a", 2)
    steps.custom_data["bootstrap_value"] = 5.0
    end = SingleAgentEpisode(
        "a", observations=[0.0], t_started=2, truncated=True, len_lookback_buffer=0
    )
    cols = time_major([[steps, end]], ColumnKeys())
    assert cols.truncated[:, 0].tolist() == [False, True]
    assert len(cols.truncated_steps) == 1 and cols.truncated_steps[0][2] is steps


def test_a_padded_column_ending_early_closes_its_last_step_and_the_longest_stays_ongoing():
    # Mutants: ``offset < horizon`` read as ``<=`` (the longest column, still running, closed
    # too); the closing done and truncated set on the column's first piece or on the first
    # step of its last piece (``[0][-1]``, ``[-1][0]``).
    done = _chunk_of("a", 2)
    done.is_terminated = True
    running, longest = _chunk_of("b", 2), _chunk_of("c", 5)
    cols = time_major([[done, running], [longest]], ColumnKeys(), pad=True)
    assert cols.dones[:, 0].tolist() == [False, True, False, True, True]  # then one pad cell
    assert cols.truncated[:, 0].tolist() == [False, False, False, True, False]
    assert cols.dones[:, 1].tolist() == [False] * 5
    assert [(t, n, chunk.id_) for t, n, chunk in cols.truncated_steps] == [(3, 0, "b")]
    assert cols.ongoing[0] is None and cols.ongoing[1] is longest
    assert cols.mask is not None and cols.mask[:, 0].tolist() == [True] * 4 + [False]


def test_chunks_of_one_env_whose_int_actions_no_dtype_holds_are_refused_naming_the_env():
    # Mutant: the ValueError of the column's join deleted (an UnboundLocalError instead).
    column = [_chunk_with_action("a", np.uint64(2**64 - 1)), _chunk_with_action("b", -1)]
    with pytest.raises(ValueError, match="actions of env 0: uint64 values up to"):
        time_major([column], ColumnKeys())


def _chunk_at(id_: str, t0: int, steps: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[0.0] * (steps + 1),
        actions=[0] * steps,
        rewards=[1.0] * steps,
        extra_model_outputs={"vf_preds": [0.0] * steps, "action_logp": [0.0] * steps},
        t_started=t0,
        len_lookback_buffer=0,
    )


def test_a_gap_after_an_unfinished_chunk_is_not_called_an_ending():
    # Mutant: "(which ended there)" added when the earlier chunk's end time is non-zero,
    # not when it is done.
    with pytest.raises(ValueError) as err:
        check_time_order(0, [_chunk_at("a", 0, 1), _chunk_at("a", 5, 1)])
    assert "follows its chunk ending at t=1; " in str(err.value)
    assert "which ended there" not in str(err.value)


def test_chunks_whose_ids_are_equal_but_distinct_strings_are_one_episode():
    # Mutant: ``key_a is key_b or key_a == key_b`` read with ``and`` (equal ids held by two
    # string objects taken for two episodes: the first chunk closed as truncated).
    first_id, second_id = "".join(["ep", "-1"]), "".join(["ep-", "1"])
    assert first_id == second_id and first_id is not second_id
    cols = time_major([[_chunk_at(first_id, 0, 2), _chunk_at(second_id, 2, 2)]], ColumnKeys())
    assert cols.dones[:, 0].tolist() == [False] * 4
    assert cols.truncated_steps == []
