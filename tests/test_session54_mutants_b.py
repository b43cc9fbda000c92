"""Pins found by mutation testing of ``sample_keywords``, ``evaluate`` and their neighbours.

Each test here fails on a hand-made change of the code that the other tests let through: a
refusal naming keywords the method does take, a round stepping past ``max_vector_steps``,
the unseeded sub-envs of a short last round being seeded, and bad seeds refused with the
wrong error.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer
from episodes.replay.table import EpisodeTable
from episodes.runner import EnvRunner, evaluate


class _Recording(gym.Env):
    """Never ends; records every seed given at reset and counts its steps."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, log):
        self.log = log

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.log.append(("reset", seed))
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.log.append(("step", None))
        return np.zeros(1, np.float32), 0.0, False, False, {}


def _recording_runner(num_envs, window="transitions"):
    logs = [[] for _ in range(num_envs)]
    env = gym.vector.SyncVectorEnv([lambda log=log: _Recording(log) for log in logs])
    runner = EnvRunner(env, lambda obs: (np.zeros(len(obs), np.int64), {}), window=window)
    return runner, logs


def test_refusal_names_only_the_keywords_not_taken():
    with pytest.raises(TypeError) as err:
        EpisodeReplayBuffer(10).sample(4, batch_size=32, batch_length_T=2)
    assert "'batch_size'" in str(err.value)
    assert "'batch_length_T'" not in str(err.value)


@pytest.mark.parametrize(
    ("window", "num_steps", "bound"),
    [
        pytest.param("transitions", 16, 5, id="num_steps-above-bound"),
        pytest.param("transitions", 5, 5, id="num_steps-equal-bound"),
        pytest.param("transitions", 2, 5, id="bound-not-a-multiple"),
    ],
)
def test_a_round_never_steps_past_max_vector_steps(window, num_steps, bound):
    runner, logs = _recording_runner(2, window)
    with pytest.raises(RuntimeError, match="max_vector_steps"):
        evaluate(runner, [3, 4], num_steps=num_steps, max_vector_steps=bound)
    for log in logs:
        assert [kind for kind, _ in log].count("step") == bound


def test_unseeded_sub_envs_of_a_short_round_get_no_seed():
    runner, logs = _recording_runner(3)
    with pytest.raises(RuntimeError):
        evaluate(runner, [11], num_steps=2, max_vector_steps=2)
    seeded = [[seed for kind, seed in log if kind == "reset"] for log in logs]
    assert seeded == [[11], [None], [None]]


@pytest.mark.parametrize(
    ("seeds", "error", "words"),
    [
        pytest.param([1, None], ValueError, r"seeds\[1\] .*needs its seed", id="none"),
        pytest.param(np.array(3), TypeError, r"1-D array .*shape \(\)", id="0-d-array"),
        pytest.param(np.zeros((1, 2), np.int64), TypeError, r"shape \(1, 2\)", id="2-d-array"),
    ],
)
def test_bad_seeds_refused_before_any_step(seeds, error, words):
    runner, logs = _recording_runner(2)
    before = [list(log) for log in logs]
    with pytest.raises(error, match=words):
        evaluate(runner, seeds)
    assert [list(log) for log in logs] == before


def _table(ids):
    table = EpisodeTable()
    for id_ in ids:
        table.open(id_, t_begin=0, final_obs=np.zeros((1, 1)), final_info={"id": id_})
    return table


def test_close_oldest_returns_rows_that_later_opens_leave_alone():
    table = _table("abcdefghijklmnop")
    rows = table.close_oldest(15)
    kept = rows.tolist()
    table.open("q", t_begin=0, final_obs=np.zeros((1, 1)), final_info={})
    assert rows.tolist() == kept == list(range(15))


def test_close_oldest_forgets_what_close_forgets():
    closed, one_by_one = _table("abc"), _table("abc")
    for table in (closed, one_by_one):
        for row in range(3):
            table.join_meta(row, _meta())
    rows = closed.close_oldest(2).tolist()
    assert rows == [one_by_one.close("a"), one_by_one.close("b")]
    for table in (closed, one_by_one):
        assert table.meta[rows].tolist() == table.final_info[rows].tolist() == [None, None]
        assert table.meta[2] is not None


def _meta():
    from episodes.replay.metadata import EpisodeMeta

    return EpisodeMeta(None, None, None, None, None, None)


@pytest.mark.parametrize(
    ("setup", "more"),
    [
        pytest.param("fresh", 16, id="one-more-than-the-free-rows"),
        pytest.param("head-moved", 16, id="free-rows-but-no-room-in-age-order"),
        # 32 free rows, room for 40 in the age order: the rows run out first.
        pytest.param("reserved", 33, id="room-in-age-order-but-no-free-rows"),
    ],
)
def test_open_reserved_without_room_refuses_and_changes_nothing(setup, more):
    table = _table("a")
    if setup == "head-moved":
        table.close_oldest(1)
    if setup == "reserved":
        table = EpisodeTable()
        table.reserve(20, np.zeros((1, 1)))
        table.reserve(29, np.zeros((1, 1)))
    free, order = list(table.free), list(table.order)
    with pytest.raises(ValueError, match=rf"call reserve\({more}\) first"):
        table.open_reserved([f"n{i}" for i in range(more)])
    assert (table.free, list(table.order)) == (free, order)


torch = pytest.importorskip("torch")


def _roundtrip(episode):
    from episodes.io.encoding import decode_episode, encode_episode

    meta, arrays = encode_episode(episode)
    return decode_episode(meta, arrays.__getitem__, where="test")


def test_array_likes_are_written_with_their_lookback_and_space():
    space = gym.spaces.Box(-5.0, 5.0, (1,), np.float32)
    episode = SingleAgentEpisode(
        "a",
        observations=[torch.tensor([float(i)]) for i in range(3)],
        observation_space=space,
        actions=[0, 1],
        rewards=[1.0, 2.0],
        len_lookback_buffer=1,
    )
    back = _roundtrip(episode)
    assert (len(back), back.observations.lookback) == (1, 1)
    assert np.array_equal(np.stack(back.observations.data), [[0.0], [1.0], [2.0]])
    assert back.observation_space == back.observations.space == space


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        pytest.param(
            {"observations": [torch.zeros(1), torch.zeros(1), torch.zeros(1, requires_grad=True)]},
            r"^observations\[2\]: numpy cannot read this array-like: RuntimeError",
            id="tensor-requiring-grad",
        ),
        pytest.param(
            {"observations": [{1: torch.tensor(0.0), "a": torch.tensor(1.0)}] * 3},
            r"^observations\[0\]",
            id="unsortable-keys",
        ),
        pytest.param(
            {"infos": [{"t": torch.tensor(1.0)}] * 3},
            r"^infos\[0\]\['t'\]: a value of type torch.Tensor cannot be stored",
            id="tensor-in-infos-kept-as-given",
        ),
    ],
)
def test_unstorable_array_likes_are_refused_by_name(changes, words):
    from episodes.io.errors import UnstorableValueError

    fields = {"observations": [0, 1, 2], "actions": [0, 1], "rewards": [0.0, 0.0]}
    episode = SingleAgentEpisode("a", **{**fields, **changes})
    with pytest.raises(UnstorableValueError, match=words):
        _roundtrip(episode)


def test_only_the_array_like_leaves_are_read_as_arrays():
    obs = [{"t": torch.tensor([float(i)]), "i": i, "s": "x", "g": np.float32(i)} for i in range(3)]
    back = _roundtrip(SingleAgentEpisode("a", observations=obs, actions=[0, 1], rewards=[1, 2]))
    for i, item in enumerate(back.observations.data):
        assert {key: type(value) for key, value in item.items()} == {
            "t": np.ndarray,
            "i": int,
            "s": str,
            "g": np.float32,
        }
        assert (item["t"].tolist(), item["i"], item["g"]) == ([float(i)], i, i)


class _ArrayLike:
    """Neither numpy nor torch, read through ``__array__`` (as a JAX array is)."""

    def __array__(self, dtype=None, copy=None):
        return np.zeros(2, dtype)


@pytest.mark.parametrize(
    ("given", "host_goes"),
    [
        pytest.param(np.zeros(2), False, id="numpy-array"),
        pytest.param(np.int64(1), False, id="numpy-scalar"),
        pytest.param([], False, id="empty-list"),
        pytest.param([0, 1], False, id="list-of-ints"),
        pytest.param({"a": 1, "b": np.zeros(1)}, False, id="dict-of-numpy"),
        pytest.param(_ArrayLike(), True, id="array-like"),
        pytest.param(torch.zeros(2), True, id="tensor"),
        pytest.param([torch.zeros(1), 1], True, id="list-judged-by-its-first-item"),
        pytest.param((1, torch.zeros(1)), True, id="tuple-any-item"),
        pytest.param({"a": 1, "b": torch.zeros(1)}, True, id="dict-any-value"),
        pytest.param({"a": {"b": _ArrayLike()}}, True, id="nested-dict"),
    ],
)
def test_env_actions_hands_the_env_host_arrays_only_for_array_likes(given, host_goes):
    from episodes.runner.host_values import env_actions

    host = object()
    assert env_actions(given, host) is (host if host_goes else given)


@pytest.mark.parametrize(
    ("rows", "words"),
    [
        pytest.param(np.zeros((3, 2), bool), None, id="bools"),
        pytest.param(torch.zeros((3, 2), dtype=torch.bfloat16), None, id="torch-floats"),
        pytest.param([[1, 2], [3, 4]], None, id="list-of-ints"),
        pytest.param((np.zeros(3),), r"holds a tuple of 1 part per step", id="one-part-tuple"),
        pytest.param((np.zeros(3),) * 2, r"holds a tuple of 2 parts per step", id="tuple"),
        pytest.param(np.zeros(3, complex), r"holds complex numbers \(complex128\)", id="complex"),
        pytest.param(
            torch.zeros(3, dtype=torch.complex64), r"holds complex numbers", id="torch-complex"
        ),
        pytest.param(["a", "b"], r"holds strings \(<U1\)", id="list-of-strings"),
    ],
)
def test_check_storable_extra_takes_real_numbers_only(rows, words):
    from episodes.converter.column_refusals import check_storable_extra

    if words is None:
        check_storable_extra("out", rows)
    else:
        with pytest.raises(ValueError, match=rf"^extra output 'out' {words}"):
            check_storable_extra("out", rows)


def test_storable_extra_names_the_entry_shapes_per_step():
    from episodes.converter.column_refusals import storable_extra

    with pytest.raises(ValueError, match=r"different shapes \(\(1,\), \(2,\) per step\)"):
        storable_extra("out", [np.zeros((3, 1)), np.zeros((3, 2))])


def _torch_import_raises(monkeypatch, make_error):
    """``import torch`` raises ``make_error(name)`` until the test ends (sys.modules restored)."""
    import sys

    class NoTorch:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name.split(".")[0] == "torch":
                raise make_error(name)

    for name in [name for name in sys.modules if name.split(".")[0] == "torch"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [NoTorch(), *sys.meta_path])


def test_needed_torch_without_torch_is_an_import_error_named_torch(monkeypatch):
    from episodes.io.torch_needed import needed_torch

    _torch_import_raises(monkeypatch, lambda name: ModuleNotFoundError(name, name=name))
    with pytest.raises(ImportError) as err:
        needed_torch("the path", "do the other thing")
    assert str(err.value).startswith("the path needs torch, which is not installed here")
    assert str(err.value).endswith("or do the other thing")
    assert err.value.name == "torch"
    assert isinstance(err.value.__cause__, ModuleNotFoundError)


def test_needed_torch_leaves_an_installed_torch_import_error_as_it_is(monkeypatch):
    from episodes.io.torch_needed import needed_torch

    broken = ImportError("cannot import name 'x' from 'torch'", name="torch")
    _torch_import_raises(monkeypatch, lambda name: broken)
    with pytest.raises(ImportError) as err:
        needed_torch("the path", "do the other thing")
    assert err.value is broken
