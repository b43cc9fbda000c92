"""Bugs found in episodes.testing by a bug hunt (each case failed before its fix)."""

from __future__ import annotations

import copy
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.testing import (
    ConnectorContract,
    ConnectorContractError,
    check_connector,
    check_list_numpy_agree,
    check_lookback_across_cuts,
    outputs_equal,
)
from episodes.testing.strategies import chunked_episodes, episodes, replay_in_chunks, spaces

OBS = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def _box_episode() -> SingleAgentEpisode:
    return SingleAgentEpisode(
        observations=[np.full(2, i / 10, np.float32) for i in range(5)],
        observation_space=OBS,
        actions=[0] * 4,
        rewards=[0.0] * 4,
        len_lookback_buffer=0,
    )


def _float_episode(steps: int = 4) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        observations=[float(t) for t in range(steps + 1)],
        actions=[0] * steps,
        rewards=[0.0] * steps,
        len_lookback_buffer=0,
    )


def _object_array(*values):
    out = np.empty(len(values), object)
    for i, value in enumerate(values):
        out[i] = value
    return out


def _zero_d(value):
    out = np.empty((), object)
    out[()] = value
    return out


# --------------------------------------------------------------------------- outputs_equal
@pytest.mark.parametrize(
    ("a", "b", "equal", "equal_with_dtype"),
    [
        pytest.param("ab", np.str_("ab"), True, False, id="str-vs-np.str_"),
        pytest.param(b"ab", np.bytes_(b"ab"), True, False, id="bytes-vs-np.bytes_"),
        pytest.param({"t": ["a", "bb"]}, {"t": [np.str_("a"), np.str_("bb")]}, True, False,
                     id="nested-lists"),
        pytest.param("ab", np.str_("ac"), False, False, id="different-values"),
        pytest.param("ab", np.bytes_(b"ab"), False, False, id="str-vs-bytes"),
        pytest.param("ab", "ab", True, True, id="same-str"),
    ],
)  # fmt: skip
def test_str_and_numpy_str_compare_by_value_unless_check_dtype(a, b, equal, equal_with_dtype):
    assert outputs_equal(a, b) is equal
    assert outputs_equal(b, a) is equal
    assert outputs_equal(a, b, check_dtype=True) is equal_with_dtype


def test_a_pass_through_connector_agrees_on_numpy_text_columns():
    # A numpy'd Text column hands out np.str_, list mode str: a correct connector was refused.
    space = gym.spaces.Dict({"text": gym.spaces.Text(4)})
    ep = SingleAgentEpisode(
        observations=[{"text": "a"}, {"text": "bb"}],
        observation_space=space,
        actions=[0],
        action_space=gym.spaces.Discrete(2),
        rewards=[0.0],
        len_lookback_buffer=0,
    )

    def last_obs(eps, batch):
        return {**batch, "last_obs": [e.get_observations(-1) for e in eps]}

    check_list_numpy_agree(last_obs, [ep])


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        pytest.param(_object_array(np.array([1, 2]), np.array([3])),
                     [np.array([1, 2]), np.array([3])], True, id="object-array-vs-list"),
        pytest.param(_object_array(np.array([1, 2]), np.array([3])),
                     (np.array([1, 2]), np.array([3])), True, id="object-array-vs-tuple"),
        pytest.param([np.array([1, 2]), np.array([3])],
                     _object_array(np.array([1, 2]), np.array([3])), True, id="list-vs-object"),
        pytest.param(_object_array(np.array([1, 2]), np.array([3])),
                     [np.array([1, 2]), np.array([4])], False, id="object-array-vs-other-list"),
        pytest.param(_object_array(np.array([1, 2]), np.array([3])),
                     [np.array([1, 2])], False, id="object-array-vs-shorter-list"),
        pytest.param(_zero_d(np.array([1, 2])), _zero_d(np.array([1, 2])), True,
                     id="0d-object-arrays-holding-equal-arrays"),
        pytest.param(_zero_d(np.array([1, 2])), _zero_d(np.array([1, 3])), False,
                     id="0d-object-arrays-holding-other-arrays"),
        pytest.param(_zero_d(np.array([1, 2])), _zero_d(np.array([1, 2, 3])), False,
                     id="0d-object-arrays-holding-arrays-of-other-lengths"),
    ],
)  # fmt: skip
def test_object_arrays_compare_without_raising(a, b, equal):
    assert outputs_equal(a, b) is equal
    assert outputs_equal(a, b, check_dtype=True) is equal


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param([b"a\x00"], [b"a"], id="bytes"),
        pytest.param(["a\x00"], ["a"], id="str"),
        pytest.param({"k": [b"ab\x00\x00"]}, {"k": [b"ab"]}, id="in-a-dict"),
        pytest.param([["a\x00"]], [["a"]], id="nested"),
    ],
)
def test_strings_differing_by_trailing_nuls_differ_in_lists(a, b):
    # numpy's string arrays drop trailing NULs: the lists compared equal through them.
    assert not outputs_equal(a, b)
    assert not outputs_equal(a, b, check_dtype=True)
    assert outputs_equal(a, copy.deepcopy(a))


# ------------------------------------------------------------------------ chunk strategies
TEXT = gym.spaces.Text(4)


@pytest.mark.parametrize(
    ("space", "observations"),
    [
        pytest.param(TEXT, ["a", "bb", "c"], id="text"),
        pytest.param(gym.spaces.Dict({"t": TEXT}), [{"t": "a"}, {"t": "bb"}, {"t": "c"}],
                     id="text-in-dict"),
        pytest.param(gym.spaces.Tuple((TEXT, gym.spaces.Discrete(2))),
                     [("a", 0), ("bb", 1), ("c", 0)], id="text-in-tuple"),
    ],
)  # fmt: skip
def test_replay_in_chunks_handles_numpy_text(space, observations):
    ep = SingleAgentEpisode(
        observations=observations,
        observation_space=space,
        actions=[0, 1],
        action_space=gym.spaces.Discrete(2),
        rewards=[0.0, 1.0],
        len_lookback_buffer=0,
    ).to_numpy()
    chunks = replay_in_chunks(ep, (1,), (1,))
    assert [len(c) for c in chunks] == [1, 1]
    assert all(c.is_numpy for c in chunks)
    joined = copy.deepcopy(chunks[0])
    joined.concat_episode(chunks[1])
    assert outputs_equal(joined.get_observations(), ep.get_observations())


def test_chunked_episodes_draw_numpy_text_episodes():
    ce = find(
        chunked_episodes(
            observation_space=TEXT, action_space=gym.spaces.Discrete(2), numpy=True, min_len=2
        ),
        lambda ce: len(ce.chunks) == 2,
        settings=settings(database=None, max_examples=200),
    )
    assert ce.episode.is_numpy and all(c.is_numpy for c in ce.chunks)


@pytest.mark.parametrize(
    ("cuts", "lookbacks"),
    [
        pytest.param((1.0,), (1,), id="float-cut"),
        pytest.param((1,), (1.5,), id="float-lookback"),
        pytest.param((True,), (1,), id="bool-cut"),
    ],
)
def test_replay_in_chunks_refuses_non_integer_cuts(cuts, lookbacks):
    with pytest.raises(ValueError, match="must be ints"):
        replay_in_chunks(_float_episode(), cuts, lookbacks)


def test_episodes_refuses_a_lookback_range_of_three_with_its_own_message():
    with pytest.raises(ValueError, match="range must be"):
        find(episodes(lookback=(0, 2, 5)), lambda ep: True)


def test_spaces_takes_kinds_from_a_generator():
    # The first test of kinds used the generator up: "needs at least one leaf kind".
    space = find(spaces(k for k in ("box", "dict")), lambda s: isinstance(s, gym.spaces.Dict))
    assert all(isinstance(sub, gym.spaces.Box) for sub in space.spaces.values())


# ----------------------------------------------------------------- check_lookback_across_cuts
def leaky(eps, batch):
    """One row per *stored* observation, lookback included (it reads the buffer's data)."""
    rows = [
        np.asarray(o)
        for ep in eps
        for o in ep.get_observations(
            slice(-ep.observations.lookback, len(ep) + 1), neg_index_as_lookback=True
        )
    ]
    return {**batch, "obs": np.stack(rows) if rows else np.zeros((0, 2), np.float32)}


def test_lookback_rows_leaking_into_the_output_are_caught_under_row_keys():
    with pytest.raises(ConnectorContractError, match="not one row per step or per observation"):
        check_lookback_across_cuts(leaky, _box_episode(), 2, 4, lookback=1, row_keys=["obs"])


def _padded_to_three(eps, batch):
    """Rows zero-padded to a multiple of 3 (a recurrent batch's layout), one episode."""
    obs = np.asarray(eps[0].get_observations(slice(0, len(eps[0]))))
    pad = -len(obs) % 3
    return {"obs_padded": np.concatenate([obs, np.zeros((pad, *obs.shape[1:]), obs.dtype)])}


def test_a_padded_layout_that_lines_up_by_chance_is_not_called_rows():
    # Six steps pad to six rows (as long as the episode); a chunk of two pads to three.
    episode = _float_episode(6)
    check_lookback_across_cuts(_padded_to_three, episode, 2, 4, lookback=1)


class _Leaky(ConnectorContract):
    observation_space = OBS
    lookback = 1
    row_keys = ("obs",)

    def make_connector(self):
        return leaky


def test_lookback_rows_leaking_are_caught_by_the_drawn_cuts():
    # No shrinking: only whether a drawn cut catches it matters here.
    run = settings(max_examples=100, database=None, phases=[Phase.generate])
    check = run(_Leaky.test_lookback_across_cuts)
    with pytest.raises(ConnectorContractError, match="not one row"):
        check(_Leaky())


def test_a_per_episode_value_as_long_as_the_episode_is_still_skipped():
    # Four ids for an episode of four steps, whatever the chunk: not rows, left alone.
    def fixed(eps, batch):
        return {"ids": np.arange(4), "prev": _prev_rows(eps[0])}

    check_lookback_across_cuts(fixed, _float_episode(), 1, 3, lookback=1)


def _prev_rows(ep):
    return np.array(
        [ep.get_observations(t - 1, neg_index_as_lookback=True, fill=-1.0) for t in range(len(ep))]
    )


def _buggy_tuple(eps, batch):
    # Reads one step into the past but ignores the lookback: wrong on chunks.
    ep = eps[0]
    wrong = np.array([ep.get_observations(max(t - 1, 0)) for t in range(len(ep))])
    return {"dist": (wrong, wrong + 1.0)}


def _correct_tuple(eps, batch):
    rows = _prev_rows(eps[0])
    return {"dist": (rows, rows + 1.0)}


@pytest.mark.parametrize("row_keys", [None, ["dist"]])
def test_rows_inside_tuples_are_compared(row_keys):
    with pytest.raises(ConnectorContractError, match=r"\['dist'\]\[0\]"):
        check_lookback_across_cuts(_buggy_tuple, _float_episode(), 2, 4, 1, row_keys=row_keys)
    check_lookback_across_cuts(_correct_tuple, _float_episode(), 2, 4, 1, row_keys=row_keys)


def test_a_tuple_that_changes_length_on_a_chunk_is_reported():
    def shrinking(eps, batch):
        rows = _prev_rows(eps[0])
        return {"dist": (rows, rows) if len(eps[0]) == 4 else (rows,)}

    with pytest.raises(ConnectorContractError, match="tuple of 2"):
        check_lookback_across_cuts(shrinking, _float_episode(), 1, 3, lookback=1)


@pytest.mark.parametrize("row_keys", ["obs", b"obs"])
def test_a_single_string_of_row_keys_is_refused(row_keys):
    def obs_rows(eps, batch):
        return {"obs": [e.get_observations(t) for e in eps for t in range(len(e))]}

    with pytest.raises(TypeError, match="row_keys"):
        check_lookback_across_cuts(obs_rows, _float_episode(), 1, 3, 0, row_keys=row_keys)
    with pytest.raises(TypeError, match="row_keys"):
        check_connector(obs_rows, observation_space=OBS, row_keys=row_keys, max_examples=1)
    with pytest.raises(TypeError, match="row_keys"):

        class TestAtTheClass(ConnectorContract):
            row_keys = "obs"

            def make_connector(self):
                return obs_rows


# ------------------------------------------------------------------------------------ docs
def test_docs_say_an_override_taking_data_needs_its_own_given():
    text = " ".join(DOC.read_text().split())
    assert "@given(data=st.data())" in text


def test_an_override_taking_data_runs_with_its_own_given():
    seen = []

    class TestMine(ConnectorContract):
        observation_space = gym.spaces.Discrete(3)

        def make_connector(self):
            return lambda eps, batch: dict(batch)

        @settings(max_examples=2, database=None)
        @given(data=st.data())
        def test_deterministic(self, data):
            seen.append(data.draw(st.integers(0, 1)))

    TestMine().test_deterministic()
    assert seen
