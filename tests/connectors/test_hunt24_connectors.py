"""Connector hunt, round 24: what a reader of the docs would not expect, each fixed here.

- ``concat_rows([])`` raised a bare ``IndexError``, and the docstring examples of
  ``Connector`` and ``EpisodeConnector`` failed ``check_connector`` on no episodes.
- A stepless end chunk whose NaN id is a copy of its episode's id (pickled, read from disk)
  was not matched by ``AddLearnerColumns`` and ``episodes_to_batch``, where ``concat_episode``
  joins them: ``id_key`` now gives NaN ids one key, as ``same_id`` takes them as one id.
- Ragged items read without padding were blamed on the fill, or raised numpy's bare
  "setting an array element with a sequence" naming no connector or column.
"""

from __future__ import annotations

import collections
import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import (
    AddLearnerColumns,
    EpisodeConnector,
    FlattenObservations,
    FrameStack,
    concat_rows,
)
from episodes.converter import episodes_to_batch
from episodes.structs import id_key
from episodes.testing import check_handles_empty_and_reset

NAN = float("nan")
Pair = collections.namedtuple("Pair", "name value")


def test_concat_rows_of_nothing_is_a_clear_value_error() -> None:
    with pytest.raises(ValueError, match="needs a part"):
        concat_rows([])


class ObservationRows(EpisodeConnector):
    """The ``EpisodeConnector`` docstring's example, as the docs now write it."""

    def __call__(self, episodes, batch):
        rows = [np.asarray(ep.get_observations(slice(*self.rows(ep)))) for ep in episodes]
        return {**batch, "obs": concat_rows(rows)} if rows else batch


def add_rewards(episodes, batch):
    """The ``Connector`` docstring's example, as the docs now write it."""
    rows = [np.asarray(ep.get_rewards(), np.float32) for ep in episodes]
    return {**batch, "rewards": concat_rows(rows)} if rows else batch


@pytest.mark.parametrize("connector", [ObservationRows(), add_rewards], ids=["class", "function"])
def test_the_documented_example_connectors_take_no_episodes(connector) -> None:
    # The examples are sketches (they read without a space), but no episodes is every
    # connector's case: the check failed them with concat_rows' IndexError.
    check_handles_empty_and_reset(connector, gym.spaces.Box(-1, 1, (2,), np.float32))
    assert connector([], {"n": 0}) == {"n": 0}


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (NAN, float("nan"), True),
        (NAN, np.float32("nan"), True),
        (("a", NAN), ("a", float("nan")), True),
        (("a", NAN), ("b", float("nan")), False),
        (("a", NAN), ["a", float("nan")], False),  # a tuple is not a list
        (["a", NAN], ["a", float("nan")], True),
        ((1, ("x", NAN)), (1, ("x", float("nan"))), True),
        (NAN, 1.0, False),
        (1, 1.0, True),
        (("a", 1), ("a", 1), True),
        (complex(1, NAN), NAN, True),  # same_id: every NaN is one, complex ones too
        (("a", complex(NAN, 0)), ("a", complex(NAN, 0)), True),
        (Pair("a", NAN), ("a", float("nan")), True),  # a namedtuple reads back as a tuple
        (Pair("a", 1), ("a", 1), True),
        ([Pair("a", [1])], [("a", [1])], True),
    ],
    ids=[
        "nan",
        "nan-float32",
        "tuple",
        "tuple-other",
        "tuple-list",
        "list",
        "nested",
        "nan-number",
        "int-float",
        "plain-tuple",
        "complex-nan",
        "tuple-complex-nan",
        "namedtuple-nan",
        "namedtuple",
        "namedtuple-in-list",
    ],
)
def test_id_keys_match_exactly_where_ids_are_the_same(a, b, same: bool) -> None:
    assert (id_key(a) == id_key(b)) is same
    assert ({id_key(a): 1}.get(id_key(b)) == 1) is same


def test_a_plain_tuple_id_is_its_own_key() -> None:
    ident = ("run", 3)
    assert id_key(ident) is ident


@pytest.mark.parametrize("ident", [NAN, ("run", NAN)], ids=["nan", "tuple-nan"])
def test_a_stepless_end_with_a_copied_nan_id_ends_its_episode(ident) -> None:
    steps = SingleAgentEpisode(
        ident,
        observations=[0.0, 1.0, 2.0],
        actions=[0, 0],
        rewards=[1.0, 1.0],
        len_lookback_buffer=0,
    )
    end = SingleAgentEpisode(
        ident, observations=[2.0], t_started=2, terminated=True, len_lookback_buffer=0
    )
    steps, end = pickle.loads(pickle.dumps(steps)), pickle.loads(pickle.dumps(end))
    joined = copy.deepcopy(steps)
    joined.concat_episode(end)
    expected = AddLearnerColumns()([joined], {})["terminateds"].tolist()
    assert expected == [False, True]
    assert AddLearnerColumns()([steps, end], {})["terminateds"].tolist() == expected
    assert episodes_to_batch([steps, end])["terminateds"].tolist() == expected


@pytest.mark.parametrize(
    "connector", [FrameStack(1), FlattenObservations(), AddLearnerColumns()], ids=type
)
def test_ragged_items_name_the_connector_and_do_not_blame_the_fill(connector) -> None:
    ragged = SingleAgentEpisode(
        "rag",
        observations=[np.zeros(2), np.zeros(3), np.zeros(2)],
        actions=[0, 0],
        rewards=[1.0, 1.0],
        len_lookback_buffer=0,
    )
    with pytest.raises(ValueError, match=type(connector).__name__) as err:
        connector([ragged], {})
    assert "items differ in shape" in str(err.value) and "fill=" not in str(err.value)
