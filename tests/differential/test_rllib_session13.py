"""Differential pins of session 13: deviations from RLlib 2.60 found by a hunt, two agreements.

Each deviation test carries its docs/deviations.md tag and asserts both sides: OUR behaviour and
RLlib's, so it flags the day RLlib changes (then revisit the row). Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_session13.py
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray.rllib")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from tests.differential._rllib_ops import (  # noqa: E402
    AGENT_IDS,
    OSAE,
    RSAE,
    Mismatch,
    OBuf,
    RBuf,
    Twin,
    assert_episodes_match,
)

pytestmark = pytest.mark.differential

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------- every row pinned
def _rllib_rows() -> list[str]:
    """The tags of docs/deviations.md's RLlib episode table (its first table)."""
    text = (ROOT / "docs" / "deviations.md").read_text()
    table = text.split("# Deviations from rsl_rl")[0]
    tags = re.findall(r"^\| ([a-z0-9_-]+) \|", table, flags=re.MULTILINE)
    return [tag for tag in tags if tag != "tag"]  # the header


def test_every_rllib_deviation_row_is_pinned() -> None:
    rows = _rllib_rows()
    assert len(rows) > 40 and "missing-emo-key" in rows
    tests = "\n".join(p.read_text() for p in (ROOT / "tests" / "differential").glob("test_*.py"))
    unpinned = [tag for tag in rows if f'"{tag}"' not in tests]
    assert not unpinned, f"deviations.md rows no differential test names: {unpinned}"


# ------------------------------------------------------------------------- missing-emo-key
def _twin_with_emo(numpy: bool) -> Twin:
    twin = Twin(OSAE("x"), RSAE("x"))
    twin.setup("add_env_reset", 0)
    twin.setup("add_env_step", 1, 0, 1.0, extra_model_outputs={"vf": 0.5})
    if numpy:
        twin.setup("to_numpy")
    return twin


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("successor", [False, True], ids=["same_chunk", "cut_successor"])
def test_step_without_a_recorded_extra_model_output_key(
    successor: bool, numpy: bool
) -> None:  # "missing-emo-key"
    parent = _twin_with_emo(numpy)
    # A cut() successor inherits its parent's keys: its first step must give them too.
    twin = Twin(parent.ours.cut(), parent.theirs.cut()) if successor else parent
    before = copy.deepcopy(twin.ours)
    with pytest.raises(AssertionError, match=r"missing keys \['vf'\]"):
        twin.ours.add_env_step(2, 0, 1.0)
    assert twin.ours == before
    twin.ours.validate()
    twin.theirs.add_env_step(2, 0, 1.0)  # accepted ...
    with pytest.raises(AssertionError):
        twin.theirs.validate()  # ... and the episode is broken
    if successor:
        with pytest.raises(AssertionError):
            parent.theirs.concat_episode(twin.theirs)  # ... and cannot be put back


# ------------------------------------------------------------------- chunks-keep-agent-ids
def _twin_with_ids(numpy: bool) -> Twin:
    ids = {"agent_id": "a0", "module_id": "m0", "multi_agent_episode_id": "ma0"}
    twin = Twin(OSAE("x", **ids), RSAE("x", **ids))
    twin.setup("add_env_reset", 0)
    for i in range(4):
        twin.setup("add_env_step", i + 1, i % 2, float(i))
    if numpy:
        twin.setup("to_numpy")
    return twin


CHUNKS = {
    "cut": lambda ep: ep.cut(len_lookback_buffer=1),
    "getitem": lambda ep: ep[1:3],
    "slice": lambda ep: ep.slice(slice(0, 2), len_lookback_buffer=0),
}


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("make", CHUNKS.values(), ids=CHUNKS.keys())
def test_cut_and_slice_keep_the_agent_ids(
    make: Any, numpy: bool
) -> None:  # "chunks-keep-agent-ids"
    twin = _twin_with_ids(numpy)
    assert_episodes_match(twin.ours, twin.theirs)  # the parents agree, ids included
    ours, theirs = make(twin.ours), make(twin.theirs)
    assert [getattr(ours, a) for a in AGENT_IDS] == ["a0", "m0", "ma0"]
    assert [getattr(theirs, a) for a in AGENT_IDS] == [None, None, None]
    # The helper compares the ids unless told that this is the documented difference.
    with pytest.raises(Mismatch, match="agent_id"):
        assert_episodes_match(ours, theirs, reward_space=False, custom_data=False)
    assert_episodes_match(ours, theirs, reward_space=False, custom_data=False, agent_ids=False)


def test_state_and_concat_keep_the_agent_ids_in_both() -> None:
    twin = _twin_with_ids(numpy=False)
    restored = Twin(
        OSAE.from_state(twin.ours.get_state()), RSAE.from_state(twin.theirs.get_state())
    )
    assert_episodes_match(restored.ours, restored.theirs)
    nxt = Twin(twin.ours.cut(), twin.theirs.cut())
    nxt.setup("add_env_step", 9, 0, 1.0)
    twin.ours.concat_episode(nxt.ours)
    twin.theirs.concat_episode(nxt.theirs)
    assert_episodes_match(twin.ours, twin.theirs)  # concat keeps self's ids in both
    assert twin.ours.agent_id == "a0"


# ------------------------------------------------------------------- one-hot-multidiscrete-2d
MD2D = gym.spaces.MultiDiscrete(np.array([[2, 3], [4, 2]]))
MD2D_ITEMS = [np.array([[1, 0], [3, 1]]), np.array([[0, 2], [0, 0]])]


@pytest.mark.parametrize("finalize", [False, True], ids=["list", "numpy"])
def test_one_hot_of_a_2d_multidiscrete(finalize: bool) -> None:  # "one-hot-multidiscrete-2d"
    ours = OBuf([x.copy() for x in MD2D_ITEMS], 0, MD2D)
    theirs = RBuf([x.copy() for x in MD2D_ITEMS], 0, MD2D)
    if finalize:
        ours.finalize()
        theirs.finalize()
    # Row-major: [[1, 0], [3, 1]] -> 2 slots, 3, 4, 2, each a one-hot, laid end to end.
    want = [0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 1]
    got = ours.get(0, one_hot_discrete=True)
    assert got.dtype == np.float32 and got.tolist() == want
    # The same vector gymnasium's flatten gives the item.
    assert got.tolist() == gym.spaces.flatten(MD2D, MD2D_ITEMS[0]).tolist()
    batch = np.asarray(ours.get(slice(0, 2), one_hot_discrete=True))
    assert batch.shape == (2, 11) and batch[0].tolist() == want
    with pytest.raises(ValueError, match="ambiguous"):
        theirs.get(0, one_hot_discrete=True)


# ----------------------------------------------------------- text-column-width, text-fill
TEXT_OBS = {
    "flat": (gym.spaces.Text(5), "ab", "a"),
    "in_dict": (
        gym.spaces.Dict({"s": gym.spaces.Text(5), "d": gym.spaces.Discrete(3)}),
        {"s": "ab", "d": 0},
        {"s": "a", "d": 1},
    ),
}


def _text_twin(name: str, numpy: bool) -> Twin:
    space, first, second = TEXT_OBS[name]
    twin = Twin(
        OSAE("x", observation_space=space, action_space=gym.spaces.Discrete(2)),
        RSAE("x", observation_space=space, action_space=gym.spaces.Discrete(2)),
    )
    twin.setup("add_env_reset", first)
    twin.setup("add_env_step", second, 0, 1.0)
    if numpy:
        twin.setup("to_numpy")
    return twin


def _text_column(ep: Any) -> np.ndarray:
    data = ep.observations.data
    return data["s"] if isinstance(data, dict) else data


@pytest.mark.parametrize("name", TEXT_OBS)
def test_numpy_text_column_is_as_wide_as_max_length(name: str) -> None:  # "text-column-width"
    twin = _text_twin(name, numpy=True)
    assert _text_column(twin.ours).dtype == np.dtype("<U5")  # the space's max_length
    assert _text_column(twin.theirs).dtype == np.dtype("<U2")  # the longest string recorded
    # A longer valid string: ours fits it in place, RLlib's concatenation widens the column.
    longer = {"s": "abcde", "d": 1} if name == "in_dict" else "abcde"
    twin.setup("add_env_step", longer, 0, 1.0)
    assert _text_column(twin.ours).dtype == _text_column(twin.theirs).dtype == np.dtype("<U5")
    assert _text_column(twin.ours).tolist() == _text_column(twin.theirs).tolist()


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("name", TEXT_OBS)
def test_a_number_cannot_fill_a_text_leaf(name: str, numpy: bool) -> None:  # "text-fill-number"
    twin = _text_twin(name, numpy)
    before = copy.deepcopy(twin.ours)
    for index in (5, slice(0, 4)):
        with pytest.raises(ValueError, match="cannot fill a Text leaf"):
            twin.ours.get_observations(index, fill=0)
        with pytest.raises(TypeError):
            twin.theirs.get_observations(index, fill=0)
    assert twin.ours == before
    if name == "flat":
        # A string fill pads a Text leaf in ours; RLlib's filler has no Text case at all.
        assert twin.ours.get_observations(5, fill="") == ""
        with pytest.raises(TypeError):
            twin.theirs.get_observations(5, fill="")


# ------------------------------------------------------------------------- buffer-eq-values
EQUAL_IN_OURS = {
    "nan": ([np.float32("nan")], [np.float32("nan")], (False, True)),
    "nested_nan": ([{"a": np.float64("nan")}], [{"a": np.float64("nan")}], (False, True)),
    "int_vs_float": ([1], [1.0], (False,)),
    "numpy_vs_python": ([np.int64(1)], [1], (False,)),
}


@pytest.mark.parametrize("name", EQUAL_IN_OURS)
def test_buffer_equality_by_value(name: str) -> None:  # "buffer-eq-values"
    a, b, modes = EQUAL_IN_OURS[name]
    for finalize in modes:
        pair = []
        for cls in (OBuf, RBuf):
            x, y = cls(copy.deepcopy(a)), cls(copy.deepcopy(b))
            if finalize:
                x.finalize()
                y.finalize()
            pair.append(x == y)
        assert pair == [True, False], (name, finalize)


@pytest.mark.parametrize("finalize", [False, True], ids=["list", "numpy"])
def test_buffer_equality_keeps_numpy_dtypes_in_both(finalize: bool) -> None:
    pair = []
    for cls in (OBuf, RBuf):
        x, y = cls([np.float32(1)]), cls([np.float64(1)])
        if finalize:
            x.finalize()
            y.finalize()
        pair.append(x == y)
    assert pair == [False, False]


# ------------------------------------------------------- agreement: reversed reads are views
@pytest.mark.parametrize(
    "index,neg",
    [(slice(3, 0, -1), False), (slice(3, -2, -2), True), (slice(0, 3), False)],
    ids=["reversed", "into_the_lookback", "forward"],
)
def test_slice_reads_of_numpy_buffers_are_views_in_both(index: slice, neg: bool) -> None:
    ours = OBuf([np.float32(i) for i in range(6)], 2)
    theirs = RBuf([np.float32(i) for i in range(6)], 2)
    ours.finalize()
    theirs.finalize()
    got, want = (
        ours.get(index, neg_index_as_lookback=neg),
        theirs.get(index, neg_index_as_lookback=neg),
    )
    assert got.tolist() == want.tolist() and len(got)
    assert np.shares_memory(got, ours.data) and np.shares_memory(want, theirs.data)


def test_get_return_is_a_python_float() -> None:  # "return-float"
    def stepped(cls: Any, rewards: list[Any]) -> Any:
        ep = cls("x")
        ep.add_env_reset(0)
        for t, reward in enumerate(rewards, 1):
            ep.add_env_step(t, 0, reward)
        return ep

    ours, theirs = stepped(OSAE, [1, 2]), stepped(RSAE, [1, 2])
    assert ours.get_return() == theirs.get_return() == 3
    assert type(ours.get_return()) is float and type(theirs.get_return()) is int
    # Int rewards whose sum no float holds: RLlib's sum is exact, ours +-inf (no OverflowError).
    ours, theirs = stepped(OSAE, [2**1100, 1]), stepped(RSAE, [2**1100, 1])
    assert theirs.get_return() == 2**1100 + 1
    assert ours.get_return() == float("inf")
    assert stepped(OSAE, [-(2**1100), 1]).get_return() == float("-inf")


def test_get_return_of_numpy_int_rewards_does_not_wrap() -> None:  # "return-float"
    def numpyd(cls: Any) -> Any:
        ep = cls(
            "x",
            observations=[0, 1, 2],
            actions=[0, 0],
            rewards=[2**62, 2**62],
            len_lookback_buffer=0,
        )
        ep.to_numpy()
        return ep

    assert numpyd(RSAE).get_return() == -(2**63)  # numpy's int64 sum wraps round
    assert numpyd(OSAE).get_return() == 2.0**63


def test_from_state_leaves_the_snapshot_as_it_was() -> None:  # "from-state-copies"
    def restored_and_written(cls: Any) -> tuple[Any, Any]:
        ep = cls(
            "x",
            observations=[0.0, 1.0, 2.0],
            actions=[0, 0],
            rewards=[1.0, 1.0],
            len_lookback_buffer=0,
        )
        ep.to_numpy()
        state = ep.get_state()
        again = cls.from_state(state)
        again.rewards.set(-7.0, at_indices=0)
        return state, again

    theirs, _ = restored_and_written(RSAE)
    ours, _ = restored_and_written(OSAE)
    assert theirs["rewards"]["data"][0] == -7.0  # RLlib's restored episode wrote into it
    assert ours["rewards"]["data"][0] == 1.0
