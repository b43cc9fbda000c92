"""Behaviour that hand-made mutants of ``episodes.replay.sequences`` and
``episodes.replay.nested`` showed no test pinned (session 44).

Each test fails with one mutant (named beside it) applied, and passes on the code as it is.
Everything goes through the public replay buffers (``add``, ``sample``, ``get_state`` /
``set_state``).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EmptyBufferError, EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from tests.replay._episodes import episode

BUFFERS = {"uniform": EpisodeReplayBuffer, "prioritized": PrioritizedEpisodeReplayBuffer}


def _buffer(kind: str = "uniform", capacity: int = 100, seed: int = 0) -> Any:
    return BUFFERS[kind](capacity, seed=seed)


# ------------------------------------------------------------------ replay.sequences


@pytest.mark.parametrize(
    ("kwargs", "said", "unsaid"),
    [
        pytest.param(
            {"batch_length_T": 5},
            ["no sequence of batch_length_T=5", "pass pad=True"],
            ["never padded"],
            id="sequences",
        ),
        pytest.param(
            {"batch_length_T": 5, "sample_episodes": True},
            ["episode chunk (chunks are never padded)", "add longer episodes"],
            ["pad=True"],
            id="chunks",
        ),
    ],
)
def test_too_short_episodes_name_the_unit_and_its_remedy(kwargs, said, unsaid):
    # Mutants: draw_starts' hint or unit chosen with ``not paddable`` (a chunk's error telling
    # to pass pad=True, which sample refuses with sample_episodes; a sequence's none).
    buf = _buffer()
    buf.add(episode("a", 0, 3))
    with pytest.raises(EmptyBufferError) as info:
        buf.sample(2, **kwargs)
    for words in said:
        assert words in str(info.value)
    for words in unsaid:
        assert words not in str(info.value)


def _nested_episode(id_: str, length: int, img: int, end: str = "terminated") -> Any:
    # A Dict observation whose leaves hold 1 + the step everywhere (never 0), and a Tuple action.
    # ``img`` is the side of a uint8 image leaf: 32 makes records big enough (over 256 bytes a
    # leaf) that sampling gathers them leaf by leaf; 1 keeps them small.
    obs = [
        {"img": np.full((img, img), t + 1, np.uint8), "pos": np.full(2, t + 1.5, np.float32)}
        for t in range(length + 1)
    ]
    return SingleAgentEpisode(
        id_,
        observations=obs,
        actions=[(t + 1, np.full(2, t + 1.0)) for t in range(length)],
        rewards=[float(t + 1) for t in range(length)],
        infos=[{"t": t} for t in range(length + 1)],
        terminated=end == "terminated",
        truncated=end == "truncated",
        len_lookback_buffer=0,
    )


def _leaves(column: Any) -> list[np.ndarray]:
    if isinstance(column, dict):
        return [leaf for key in column for leaf in _leaves(column[key])]
    if isinstance(column, tuple):
        return [leaf for part in column for leaf in _leaves(part)]
    return [np.asarray(column)]


RECORD_SIZES = [pytest.param(32, id="big-records"), pytest.param(1, id="small-records")]


@pytest.mark.parametrize("img", RECORD_SIZES)
@pytest.mark.parametrize("kind", list(BUFFERS))
def test_padded_steps_of_nested_sequences_are_zero_in_every_column(img, kind):
    # Mutants: the big-records path's padding dropped (obs, next_obs or both left holding
    # the row of slot 0), obs and next_obs swapped there.
    buf = _buffer(kind)
    buf.add(_nested_episode("a", 3, img))
    batch = buf.sample(20, batch_length_T=3, lookback=2, pad=True)
    mask = batch["mask"]
    assert (~mask).any() and mask.any()
    for key in ("obs", "next_obs", "actions"):
        for leaf in _leaves(batch[key]):
            assert not leaf[~mask].any(), key
            assert leaf[mask].all(), key  # real steps hold 1 + t: never 0
    # obs holds 1 + t, next_obs 2 + t: not swapped.
    obs_img = _leaves(batch["obs"])[0][..., 0, 0].astype(int)
    nxt_img = _leaves(batch["next_obs"])[0][..., 0, 0].astype(int)
    assert np.array_equal(nxt_img[mask], obs_img[mask] + 1)


def _with_extras(nested_obs: bool, nested_extra: bool) -> Any:
    length = 4
    obs = [
        {"pos": np.full(2, t, np.float32)} if nested_obs else np.full(2, t, np.float32)
        for t in range(length + 1)
    ]
    state = [
        {"h": np.full(3, t + 0.5), "c": (t,)} if nested_extra else np.full(3, t + 0.5)
        for t in range(length)
    ]
    return SingleAgentEpisode(
        "a",
        observations=obs,
        actions=list(range(length)),
        rewards=[1.0] * length,
        extra_model_outputs={"state": state},
        terminated=True,
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize(
    ("nested_obs", "nested_extra"),
    [
        pytest.param(True, False, id="nested-obs-flat-extra"),
        pytest.param(False, True, id="flat-obs-nested-extra"),
        pytest.param(True, True, id="both-nested"),
    ],
)
@pytest.mark.parametrize("kind", list(BUFFERS))
def test_sequences_with_extras_give_every_nested_column_back_nested(nested_obs, nested_extra, kind):
    # Mutant: sequence_batch's "anything nested" flag and-ed with the extras' (a nested
    # observation beside flat extras, or flat ones beside a nested extra, left as records).
    buf = _buffer(kind)
    buf.add(_with_extras(nested_obs, nested_extra))
    batch = buf.sample(3, batch_length_T=2, include_extra_model_outputs=True)
    t = batch["indices"]  # the step of each item: one episode added from t=0
    obs, state = batch["obs"], batch["state"]
    if nested_obs:
        assert isinstance(obs, dict) and np.array_equal(obs["pos"][..., 0], t)
    else:
        assert obs.dtype.names is None and np.array_equal(obs[..., 0], t)
    if nested_extra:
        assert isinstance(state, dict) and isinstance(state["c"], tuple)
        assert np.array_equal(state["h"][..., 0], t + 0.5)
        assert np.array_equal(state["c"][0], t)
    else:
        assert state.dtype.names is None and np.array_equal(state[..., 0], t + 0.5)


@pytest.mark.parametrize("img", RECORD_SIZES)
@pytest.mark.parametrize("kind", list(BUFFERS))
@pytest.mark.parametrize("length", [pytest.param(None, id="whole"), pytest.param(2, id="chunks")])
def test_sampled_nested_episodes_end_on_their_latest_observation(img, kind, length):
    # Mutants: build_episode's big-records path skipping the episode's final observation at its
    # end (the last observation then slot 0's), or writing it over the first one.
    buf = _buffer(kind)
    buf.add(_nested_episode("x", 2, img, end="ongoing"))  # slot 0: another episode's
    buf.add(_nested_episode("a", 3, img))
    for ep in buf.sample(30, batch_length_T=length, sample_episodes=True):
        if ep.id_ != "a":
            continue
        obs = ep.get_observations(slice(None))  # lookback none: every observation
        steps = np.arange(ep.t_started, ep.t_started + len(ep) + 1)
        assert obs["img"][:, 0, 0].tolist() == (steps + 1).tolist()
        assert obs["pos"][:, 0].tolist() == (steps + 1.5).tolist()


# ------------------------------------------------------------------ replay.nested


def _list_item_episode(items: list[Any], numpy: bool) -> Any:
    ep = SingleAgentEpisode(
        "a",
        observations=items,
        actions=[0] * (len(items) - 1),
        rewards=[1.0] * (len(items) - 1),
        terminated=True,
        len_lookback_buffer=0,
    )
    return ep.to_numpy() if numpy else ep


@pytest.mark.parametrize("numpy", [pytest.param(False, id="list"), pytest.param(True, id="numpy")])
def test_list_items_holding_a_tuple_are_rows_numpyd_or_not(numpy):
    # Mutant: list_rows taking a tuple inside a numpy'd list item as one array (its parts'
    # columns stacked the other way round) rather than as the columns of the item's parts.
    items = [[(t, t + 0.5), [t + 1.0, t + 2.0]] for t in range(4)]
    buf = _buffer()
    buf.add(_list_item_episode(items, numpy))
    batch = buf.sample(8, batch_length_T=2)
    t = batch["indices"]
    assert batch["obs"].shape == (8, 2, 2, 2)
    want = np.stack([np.stack([t, t + 0.5], -1), np.stack([t + 1.0, t + 2.0], -1)], -2)
    assert np.array_equal(batch["obs"], want)


@pytest.mark.parametrize(
    "item",
    [
        pytest.param([[], 1.0], id="empty-list-part"),
        pytest.param([(), 1.0], id="empty-tuple-part"),
        pytest.param([1.0, {"a": 1.0}], id="dict-part"),
    ],
)
def test_numpyd_list_items_with_a_part_of_no_numbers_are_refused_as_such(item):
    # Mutant: list_rows without its "no columns" case (an empty part reported as rows that
    # do not stack, "need at least one array to stack").
    buf = _buffer()
    with pytest.raises(TypeError) as info:
        buf.add(_list_item_episode([item] * 3, numpy=True))
    assert "no row of numbers; nested observations are Dict or Tuple items" in str(info.value)
    assert "stack" not in str(info.value)
    assert buf.get_num_timesteps() == 0


class _Key(str):
    """A str subclass whose repr is not a str literal (as an enum's str keys)."""

    def __repr__(self) -> str:
        return f"_Key({str(self)!r})"


def _dict_obs_episode(keys: list[Any], numpy: bool) -> Any:
    obs = [{key: np.full(2, t + i, np.float32) for i, key in enumerate(keys)} for t in range(4)]
    ep = SingleAgentEpisode(
        "a",
        observations=obs,
        actions=[0, 1, 0],
        rewards=[1.0, 2.0, 3.0],
        terminated=True,
        len_lookback_buffer=0,
    )
    return ep.to_numpy() if numpy else ep


MODES = [pytest.param(False, id="list"), pytest.param(True, id="numpy")]


@pytest.mark.parametrize("numpy", MODES)
@pytest.mark.parametrize("kind", list(BUFFERS))
def test_str_subclass_dict_keys_come_back_as_their_str(numpy, kind):
    # Mutant: a str subclass key named by its own repr (not a str literal): the sampled
    # observation then a tuple, or keyed by something else than the key's str.
    buf = _buffer(kind)
    buf.add(_dict_obs_episode([_Key("pos"), _Key("vel")], numpy))
    obs = buf.sample(4, batch_length_T=2)["obs"]
    assert isinstance(obs, dict) and list(obs) == ["pos", "vel"]
    assert all(type(key) is str for key in obs)
    assert np.array_equal(obs["vel"][..., 0], obs["pos"][..., 0] + 1)


@pytest.mark.parametrize(
    "keys", [pytest.param(["a", 1], id="str-then-int"), pytest.param([1, "a"], id="int-then-str")]
)
def test_dict_observations_with_a_non_str_key_among_str_keys_are_refused(keys):
    # Mutant: the "every key a str" check passing when any key is one (an int key then
    # stored under its repr, "1", and sampled back as a Tuple place or a str key). List mode
    # only: to_numpy refuses such dicts itself (their keys do not sort).
    buf = _buffer()
    with pytest.raises(TypeError, match="Dict key 1 must be a str"):
        buf.add(_dict_obs_episode(keys, numpy=False))
    assert buf.get_num_timesteps() == 0


def _items_episode(items: list[Any], space: Any = None, numpy: bool = True) -> Any:
    ep = SingleAgentEpisode(
        "a",
        observations=items,
        observation_space=space,
        actions=[0] * (len(items) - 1),
        rewards=[1.0] * (len(items) - 1),
        terminated=True,
        len_lookback_buffer=0,
    )
    return ep.to_numpy() if numpy else ep


@pytest.mark.parametrize("kind", list(BUFFERS))
def test_numpyd_ordered_dict_observations_are_dict_observations(kind):
    # Mutant: a numpy'd Dict column taken as one only when it is a plain dict (to_numpy keeps
    # the items' OrderedDict): refused as "nested unlike the Dict space".
    from collections import OrderedDict

    items = [OrderedDict(pos=np.full(2, t, np.float32), id=t) for t in range(4)]
    buf = _buffer(kind)
    buf.add(_items_episode(items))
    obs = buf.sample(3, batch_length_T=2)["obs"]
    assert list(obs) == ["pos", "id"]
    assert np.array_equal(obs["pos"][..., 0], obs["id"])


TUPLE_SPACE = gym.spaces.Tuple((gym.spaces.Box(-9, 9, (), np.float32),) * 2)


@pytest.mark.parametrize("numpy", MODES)
@pytest.mark.parametrize("size", [pytest.param(1, id="fewer"), pytest.param(3, id="more")])
def test_tuple_observations_of_another_size_than_their_space_are_refused(size, numpy):
    # Mutants: the size checks of the numpy'd / list-mode Tuple walks dropped or loosened
    # (len >= size): a part more than the space silently dropped by the zip, one fewer
    # stored short.
    buf = _buffer()
    items = [(np.float32(t),) * size for t in range(4)]
    with pytest.raises(TypeError, match="Tuple"):
        buf.add(_items_episode(items, TUPLE_SPACE, numpy))
    assert buf.get_num_timesteps() == 0


UNLIKE_ITEMS = {
    "tuple-grows": ([(1.0, 2.0), (1.0, 2.0, 3.0), (1.0, 2.0)], "(Tuple size)"),
    "tuple-shrinks": ([(1.0, 2.0, 3.0), (1.0, 2.0), (1.0, 2.0, 3.0)], "(Tuple size)"),
    "dict-gains-a-key": ([{"a": 1.0}, {"a": 1.0, "b": 2.0}, {"a": 1.0}], "(Dict keys)"),
    "dict-loses-a-key": ([{"a": 1.0, "b": 2.0}, {"a": 1.0}, {"a": 1.0, "b": 2.0}], "(Dict keys)"),
    "tuples-then-a-dict": ([(1.0, 2.0), (1.0, 2.0), {"a": 1.0}], "(Tuple size)"),
    "dicts-then-a-tuple": ([{"a": 1.0}, {"a": 1.0}, (1.0, 2.0)], "(Dict keys)"),
}


@pytest.mark.parametrize("name", list(UNLIKE_ITEMS))
def test_list_mode_items_unlike_the_first_without_a_space_are_refused(name):
    # Mutants: _tuple_parts taking a longer tuple (len >= size), _has_keys a dict holding more
    # keys (keys >= wanted): the extra parts silently dropped; the structure read from the
    # last item, not the first (an AttributeError on a tuple's "keys", another message).
    items, words = UNLIKE_ITEMS[name]
    buf = _buffer()
    with pytest.raises(TypeError, match="differ in structure") as info:
        buf.add(_items_episode(items, numpy=False))
    assert words in str(info.value), name
    assert buf.get_num_timesteps() == 0


def _crafted_state(obs: Any, final_obs: Any = None) -> dict[str, Any]:
    src = _buffer()
    src.add(_dict_obs_episode(["a"], numpy=False))
    state = src.get_state()
    state["steps"]["obs"] = obs(state["steps"]["obs"])
    if final_obs is not None:
        state["episodes"]["final_obs"] = final_obs(state["episodes"]["final_obs"])
    return state


def _text_leaf(rows: np.ndarray) -> np.ndarray:
    return np.zeros(len(rows), [("'a'", "U1", (2,))])


@pytest.mark.parametrize("kind", list(BUFFERS))
def test_set_state_refuses_records_with_a_text_leaf(kind):
    # Mutant: check_records taking a text leaf ("U") as numeric.
    state = _crafted_state(_text_leaf, _text_leaf)
    target = _buffer(kind)
    with pytest.raises(ValueError, match="a leaf of dtype <U1 is not numeric"):
        target.set_state(state)
    assert target.get_num_timesteps() == 0


def _renamed(names: list[str]) -> Any:
    def rename(rows: np.ndarray) -> np.ndarray:
        leaf = rows.dtype.fields["'a'"][0]  # float32 (2,)
        out = np.zeros(len(rows), [(name, leaf) for name in names])
        for name in names:
            out[name] = rows["'a'"]
        return out

    return rename


@pytest.mark.parametrize(
    "names",
    [
        pytest.param(["'a'", "x"], id="a-key-then-a-bare-name"),
        pytest.param(["'a'", "0"], id="a-key-then-a-place"),
        pytest.param(['"a"'], id="a-double-quoted-key"),
        pytest.param(["'a' "], id="a-key-with-a-space-after"),
    ],
)
@pytest.mark.parametrize("kind", list(BUFFERS))
def test_set_state_refuses_record_fields_no_dict_or_tuple_is_stored_as(names, kind):
    # Mutants: _check_level taking fields of which any (not every) names a Dict key, and
    # _is_key taking any quoted literal of a str (not only the key's own repr, as adding
    # names it): an episode of Dict observations added later would not fit the column.
    state = _crafted_state(_renamed(names), _renamed(names))
    target = _buffer(kind)
    with pytest.raises(ValueError, match="are no Dict keys or Tuple places"):
        target.set_state(state)
    assert target.get_num_timesteps() == 0


@pytest.mark.parametrize(
    "item",
    [
        pytest.param([1.0, np.zeros(2)], id="a-scalar-beside-a-vector"),
        pytest.param([np.zeros(3), np.zeros(2)], id="vectors-of-two-sizes"),
    ],
)
def test_numpyd_list_items_whose_parts_do_not_stack_are_type_errors(item):
    # Mutant: list_rows letting numpy's ValueError through instead of its TypeError.
    buf = _buffer()
    with pytest.raises(TypeError, match="list-structured items do not stack into rows"):
        buf.add(_list_item_episode([item] * 3, numpy=True))
    assert buf.get_num_timesteps() == 0


_BOX2 = gym.spaces.Box(-9, 9, (2,), np.float32)
_PAIR = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Discrete(4)))
SPACE_SAYS = {
    # name: (space, item at step t, leaf checks: (path, leaf shape after [B, T]))
    "box-given-as-a-tuple-in-a-tuple": (
        gym.spaces.Tuple((_BOX2, gym.spaces.Discrete(3))),
        lambda t: ((t, t + 0.5), t % 3),
        [((0,), (2,)), ((1,), ())],
    ),
    "box-given-as-a-tuple-in-a-dict": (
        gym.spaces.Dict({"pos": _BOX2, "id": gym.spaces.Discrete(5)}),
        lambda t: {"pos": (t, t + 0.5), "id": t},
        [(("pos",), (2,)), (("id",), ())],
    ),
    "tuple-given-as-a-list-in-a-tuple": (
        gym.spaces.Tuple((_PAIR, _BOX2)),
        lambda t: ([t % 3, t % 4], np.full(2, t, np.float32)),
        [((0, 0), ()), ((0, 1), ()), ((1,), (2,))],
    ),
    "tuple-given-as-a-list-in-a-dict": (
        gym.spaces.Dict({"pair": _PAIR}),
        lambda t: {"pair": [t % 3, t % 4]},
        [(("pair", 0), ()), (("pair", 1), ())],
    ),
}


@pytest.mark.parametrize("numpy", MODES)
@pytest.mark.parametrize("name", list(SPACE_SAYS))
def test_a_declared_space_decides_the_structure_of_nested_parts(name, numpy):
    # Mutants: _sub_spaces giving a Tuple's (or a Dict's) parts no space, so the structure of
    # a part is read from its type: a Box part given as a tuple taken for a Tuple, a Tuple
    # part given as a list for rows.
    space, item, checks = SPACE_SAYS[name]
    buf = _buffer()
    buf.add(_items_episode([item(t) for t in range(5)], space, numpy))
    obs = buf.sample(4, batch_length_T=2)["obs"]
    for path, shape in checks:
        leaf = obs
        for key in path:
            assert isinstance(leaf, tuple if isinstance(key, int) else dict), (name, path)
            leaf = leaf[key]
        assert isinstance(leaf, np.ndarray) and leaf.shape == (4, 2, *shape), (name, path)
