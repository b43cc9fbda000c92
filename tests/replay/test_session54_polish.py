"""Two small replay polishes.

1. ``EpisodeTable.close_oldest`` and ``open_reserved``: what ``add_rollouts`` did by editing
   the table's private fields, now the table's own methods, equal to ``close`` / ``open`` one
   episode at a time.
2. ``sample`` keywords of other libraries (TorchRL's ``batch_size``, ``return_info``; RLlib's
   ``beta`` on a uniform buffer, ...): a ``TypeError`` naming the keyword and ours, from both
   buffers, raised before anything is drawn.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.replay.sample_keywords import SAMPLE_KEYWORDS, taken_by
from episodes.replay.table import EpisodeTable

_OBS = np.zeros((1, 2))


# ------------------------------------------------------------ 1: the table's own methods
def _table(ops: list[tuple[str, int]]) -> EpisodeTable:
    """A table after ``ops``: ("open", _) opens a new episode, ("close", k) its k-th stored one."""
    table, made = EpisodeTable(), 0
    for op, k in ops:
        if op == "open" or not len(table):
            table.open(f"e{made}", t_begin=made, final_obs=_OBS + made, final_info={"n": made})
            made += 1
        else:
            table.close(list(table.order)[k % len(table)])
    return table


def _seen(table: EpisodeTable) -> tuple[Any, ...]:
    stored = list(table.order.values())
    return (
        list(table.order.items()),
        table.rows_by_age().tolist(),
        list(table.free),
        table.size,
        table.ids.tolist(),
        table.meta.tolist(),
        [None if i is None else dict(i) for i in table.final_info.tolist()],
        table.t_begin[stored].tolist(),
        None if table.final_obs is None else table.final_obs.data[stored].tolist(),
    )


_OPS = st.lists(st.tuples(st.sampled_from(["open", "open", "close"]), st.integers(0, 99)))


@settings(max_examples=150, deadline=None)
@given(ops=_OPS, data=st.data())
def test_close_oldest_is_close_of_each_oldest(ops: list[tuple[str, int]], data: Any) -> None:
    one_by_one = _table(ops)
    at_once = copy.deepcopy(one_by_one)
    count = data.draw(st.integers(0, len(one_by_one)))
    expected = [one_by_one.order[id_] for id_ in list(one_by_one.order)[:count]]
    for id_ in list(one_by_one.order)[:count]:
        one_by_one.close(id_)
    assert at_once.close_oldest(count).tolist() == expected
    assert _seen(at_once) == _seen(one_by_one)
    # The freed rows are reused as close's would be.
    for table in (one_by_one, at_once):
        table.open("next", t_begin=0, final_obs=_OBS, final_info={})
    assert _seen(at_once) == _seen(one_by_one)


@settings(max_examples=150, deadline=None)
@given(ops=_OPS, k=st.integers(0, 40))
def test_open_reserved_takes_the_rows_open_would(ops: list[tuple[str, int]], k: int) -> None:
    one_by_one = _table(ops)
    one_by_one.reserve(k, _OBS)
    at_once = copy.deepcopy(one_by_one)
    names = [f"new{i}" for i in range(k)]
    rows = [one_by_one.open(id_, t_begin=0, final_obs=_OBS, final_info=None) for id_ in names]
    assert at_once.open_reserved(names).tolist() == rows
    assert list(at_once.order.items()) == list(one_by_one.order.items())
    assert at_once.rows_by_age().tolist() == one_by_one.rows_by_age().tolist()
    assert at_once.free == one_by_one.free and at_once.size == one_by_one.size
    assert at_once.ids.tolist() == one_by_one.ids.tolist()
    assert at_once.meta[rows].tolist() == [None] * k
    assert at_once.final_info[rows].tolist() == [None] * k


@pytest.mark.parametrize(
    ("name", "call", "words"),
    [
        ("close_oldest -1", lambda t: t.close_oldest(-1), r"count must be from 0 to 3 .*got -1"),
        ("close_oldest past the stored", lambda t: t.close_oldest(4), r"from 0 to 3.*got 4"),
        (
            "open_reserved without reserve",
            lambda t: t.open_reserved([f"x{i}" for i in range(14)]),
            r"no room reserved for 14 more episodes: call reserve\(14\) first",
        ),
    ],
)
def test_bad_counts_are_refused_and_leave_the_table(name: str, call: Any, words: str) -> None:
    table = _table([("open", 0)] * 3)
    before = _seen(table)
    with pytest.raises(ValueError, match=words):
        call(table)
    assert _seen(table) == before


# ------------------------------------------------------------ 2: sample keywords
def _episode(id_: str, n: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[float(t) for t in range(n + 1)],
        actions=[t % 2 for t in range(n)],
        rewards=[float(t) for t in range(n)],
        len_lookback_buffer=0,
    )


def _filled(cls: type[EpisodeReplayBuffer]) -> EpisodeReplayBuffer:
    buf = cls(100, seed=3)
    for i in range(3):
        buf.add(_episode(f"e{i}", 6 + i))
    return buf


# What a port writes -> the words the TypeError holds (after "takes no keyword argument").
KEYWORD_CASES: dict[str, tuple[dict[str, Any], str]] = {
    "TorchRL batch_size": ({"batch_size": 32}, r"'batch_size': .*num_items.*batch_size_B="),
    "TorchRL return_info": ({"return_info": True}, r"'return_info': .*batch\['indices'\]"),
    "num_samples": ({"num_samples": 8}, r"'num_samples': .*num_items.*batch_size_B="),
    "batch_size_T": ({"batch_size_T": 4}, r"'batch_size_T': .*batch_length_T="),
    "seq_len": ({"seq_len": 4}, r"'seq_len': .*batch_length_T="),
    "TorchRL n_steps": ({"n_steps": 3}, r"'n_steps': .*n_step="),
    "discount": ({"discount": 0.9}, r"'discount': .*gamma="),
    "RLlib to_numpy": ({"to_numpy": True}, r"'to_numpy': .*numpy already"),
    "RLlib min_batch_length_T": ({"min_batch_length_T": 1}, r"'min_batch_length_T': .*always"),
    "a misspelling": ({"include_info": True}, r"'include_info': did you mean 'include_infos'\?"),
    "unknown": ({"foo": 1}, r"'foo': it takes num_items, .*batch_size_B, .*device$"),
    "two at once": (
        {"batch_size": 4, "seq_len": 2},
        r"'batch_size': .*; .*takes no keyword argument 'seq_len'",
    ),
    "one good, one bad": ({"n_step": 2, "n_steps": 3}, r"'n_steps': .*n_step="),
}
UNIFORM_ONLY = {
    "RLlib beta on a uniform buffer": (
        {"beta": 0.4},
        r"'beta': .*PrioritizedEpisodeReplayBuffer\.sample's",
    ),
}
BUFFERS = {"uniform": EpisodeReplayBuffer, "prioritized": PrioritizedEpisodeReplayBuffer}


@pytest.mark.parametrize(
    ("kind", "case"),
    [(kind, case) for kind in BUFFERS for case in KEYWORD_CASES]
    + [("uniform", case) for case in UNIFORM_ONLY],
)
def test_foreign_keywords_say_ours_and_change_nothing(kind: str, case: str) -> None:
    cls = BUFFERS[kind]
    keywords, words = {**KEYWORD_CASES, **UNIFORM_ONLY}[case]
    buf, fresh = _filled(cls), _filled(cls)
    buf.sample(4)  # a batch to update: a refusal must not forget it
    fresh.sample(4)
    with pytest.raises(TypeError, match=rf"^{cls.__name__}\.sample\(\) takes no keyword "):
        buf.sample(4, **keywords)
    with pytest.raises(TypeError, match=words):
        buf.sample(4, **keywords)
    # Nothing drawn, nothing counted: the next sample is a fresh twin's.
    got, expected = buf.sample(5, n_step=2), fresh.sample(5, n_step=2)
    assert got.keys() == expected.keys()
    for key in got:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)
    assert buf.get_sampled_timesteps() == fresh.get_sampled_timesteps()
    if kind == "prioritized":  # the last sample's items, updated without indices, as the twin's
        buf.update_priorities(np.arange(1.0, 6.0))
        fresh.update_priorities(np.arange(1.0, 6.0))
        np.testing.assert_array_equal(
            buf.get_priorities(got["indices"]), fresh.get_priorities(expected["indices"])
        )


@pytest.mark.parametrize("kind", BUFFERS)
def test_a_refusal_on_an_empty_buffer_names_the_keyword_first(kind: str) -> None:
    # The keyword is the mistake to fix; the empty buffer is not the error to see.
    with pytest.raises(TypeError, match="'batch_size'"):
        BUFFERS[kind](10).sample(batch_size=2)


def test_every_documented_keyword_is_taken_as_before() -> None:
    # The hints never shadow a keyword sample takes (beta is the prioritized buffer's own).
    taken = taken_by(EpisodeReplayBuffer.sample)
    assert taken == [
        "num_items",
        "batch_size_B",
        "batch_length_T",
        "n_step",
        "gamma",
        "include_infos",
        "include_extra_model_outputs",
        "sample_episodes",
        "lookback",
        "pad",
        "device",
    ]
    assert not set(SAMPLE_KEYWORDS) & set(taken)
    assert str(inspect.signature(EpisodeReplayBuffer.sample)).startswith(
        "(self, num_items: 'int | None' = None, *, batch_size_B: 'int | None' = None,"
    )
    buf = _filled(PrioritizedEpisodeReplayBuffer)
    batch = buf.sample(num_items=3, batch_size_B=None, beta=0.5, n_step=2, gamma=0.5)
    assert len(batch["weights"]) == 3
    assert len(_filled(EpisodeReplayBuffer).sample(batch_size_B=2, batch_length_T=3)["obs"]) == 2
