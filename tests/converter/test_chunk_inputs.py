"""What the converter's entry points and a connector pipeline take as "episodes".

A generator was read twice by ``group_by_env`` (all chunks dropped), by ``bootstrap_values``
and ``time_major``; a pipeline handed one generator to every connector (the second saw it
empty); one episode, None or a dict failed deep inside with words about slices or ints.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import ConnectorPipeline
from episodes.converter import ColumnKeys, bootstrap_values, group_by_env
from episodes.converter.columns import time_major


def _chunks() -> list[SingleAgentEpisode]:
    out = []
    for i, id_ in enumerate("abc"):
        ep = SingleAgentEpisode(
            id_,
            observations=[0.0, float(i)],
            actions=[0],
            rewards=[1.0],
            len_lookback_buffer=0,
            extra_model_outputs={"vf_preds": [0.0], "action_logp": [0.0]},
        )
        ep.custom_data["env_index"] = i
        out.append(ep)
    return out


FORMS = {
    "list": list,
    "tuple": tuple,
    "generator": lambda chunks: (c for c in chunks),
    "iterator": iter,
    "ndarray": lambda chunks: _object_array(chunks),
}


def _object_array(chunks: list[SingleAgentEpisode]) -> np.ndarray:
    out = np.empty(len(chunks), dtype=object)  # filled: np.array would read each as a sequence
    out[:] = chunks
    return out


@pytest.mark.parametrize("form", list(FORMS))
def test_group_by_env_and_bootstrap_values_take_any_iterable(form: str) -> None:
    ids = [[c.id_ for c in group] for group in group_by_env(FORMS[form](_chunks()))]
    assert ids == [["a"], ["b"], ["c"]]
    values = bootstrap_values(
        FORMS[form](_chunks()), value_fn=lambda obs: np.asarray(obs) * 2.0, keys=ColumnKeys()
    )
    assert values.tolist() == [0.0, 2.0, 4.0]


def test_time_major_takes_a_generator_of_groups() -> None:
    groups = ([c] for c in _chunks())
    assert time_major(groups, ColumnKeys()).rewards.shape == (1, 3)


REFUSED: dict[str, tuple[Any, str]] = {
    "one episode": (_chunks()[0], r"got one episode \('a'\); wrap it in a list"),
    "None": (None, "got NoneType"),
    "a dict": ({"a": _chunks()[0]}, "got dict"),
    "a string": ("abc", "got str"),
}


@pytest.mark.parametrize("case", list(REFUSED))
@pytest.mark.parametrize("who", ["group_by_env", "bootstrap_values"])
def test_what_is_no_chunks_is_refused(case: str, who: str) -> None:
    value, words = REFUSED[case]
    call = {
        "group_by_env": lambda: group_by_env(value),
        "bootstrap_values": lambda: bootstrap_values(value, value_fn=None, keys=ColumnKeys()),
    }[who]
    with pytest.raises(TypeError, match=f"{who} takes chunks .*{words}"):
        call()


def test_an_episode_is_not_iterable() -> None:
    ep = _chunks()[0]
    assert not isinstance(ep, Iterable)
    with pytest.raises(TypeError, match="'SingleAgentEpisode' object is not iterable"):
        list(ep)


def test_a_pipeline_refuses_what_its_connectors_would_read_twice() -> None:
    seen: list[int] = []

    def count(episodes: Any, batch: dict) -> dict:
        seen.append(len(list(episodes)))
        return batch

    pipe = ConnectorPipeline([count, count])
    pipe(_chunks())
    assert seen == [3, 3]
    with pytest.raises(TypeError, match="ConnectorPipeline: connectors take a list"):
        pipe(c for c in _chunks())
    assert seen == [3, 3]


def test_per_env_lists_and_flat_chunks_where_the_other_is_taken() -> None:
    with pytest.raises(
        TypeError, match=r"bootstrap_values takes chunks \(a flat list\), got a list of lists"
    ):
        bootstrap_values([[c] for c in _chunks()], value_fn=None, keys=ColumnKeys())
    with pytest.raises(TypeError, match="time_major takes per-env lists of chunks"):
        time_major(_chunks(), ColumnKeys())
