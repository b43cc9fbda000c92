"""An adversarial review of ``add_rollouts`` and ``load_episodes`` against their plain paths.

Every claim is checked against its oracle: ``add`` of the ``SingleAgentEpisode`` a user would
build from each rollout (state, evicted ids, seeded samples, priorities), and a loop of
``load_episode`` over the ids. The xfail tests pin what the review found that the docs do not
promise or that a user would not understand.
"""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, EpisodeWriter, load_episode, load_episodes
from episodes.io.errors import CorruptDatasetError, EpisodeNotFoundError, NotADatasetError
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from tests.replay._nested import same_state
from tests.replay.test_session53_arrays import _episodes, _rollouts, _same_batches

CLASSES = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]
CLASS_IDS = ["uniform", "prioritized"]


# ------------------------------------------------------------------------------ add_rollouts
def _full(b: int, h: int, **arrays: Any) -> dict[str, Any]:
    """Rollout arrays with every optional argument spelled out (the oracle needs them)."""
    out = {
        "terminated": np.zeros((b, h), bool),
        "truncated": np.zeros((b, h), bool),
        "lengths": np.full(b, h),
        "extra_model_outputs": {},
    }
    out.update(arrays)
    return out


def _as_episodes(arrays: dict[str, Any], ids: list[Any]) -> list[SingleAgentEpisode]:
    keys = ["observations", "actions", "rewards", "terminated", "truncated", "lengths"]
    plain = [np.asarray(arrays[k]) if k != "observations" else arrays[k] for k in keys]
    return _episodes(*plain, arrays["extra_model_outputs"], ids)


def _both(cls: Any, capacity: int, arrays: dict[str, Any], ids: list[Any]) -> tuple[Any, Any]:
    """A buffer filled by ``add_rollouts`` and one by ``add`` of the episodes; checked alike."""
    by_arrays, by_episodes = cls(capacity, seed=0), cls(capacity, seed=0)
    assert by_arrays.add_rollouts(**arrays, ids=ids) == ids
    by_episodes.add(_as_episodes(arrays, ids))
    _same(by_arrays, by_episodes)
    return by_arrays, by_episodes


def _same(a: Any, b: Any) -> None:
    same_state(a.get_state(), b.get_state())
    assert a.get_evicted_ids() == b.get_evicted_ids()
    if len(b):
        _same_batches(a.sample(6, n_step=2), b.sample(6, n_step=2))
        _same_batches(
            a.sample(3, batch_length_T=4, pad=True), b.sample(3, batch_length_T=4, pad=True)
        )
        assert a.sample(2, sample_episodes=True) == b.sample(2, sample_episodes=True)


def _rng_obs(kind: str, b: int, h: int) -> Any:
    rng = np.random.default_rng(7)
    if kind == "bool":
        return rng.random((b, h + 1, 3)) < 0.5
    if kind == "int8":
        return rng.integers(-100, 100, (b, h + 1, 2)).astype(np.int8)
    if kind == "float16":
        return rng.normal(size=(b, h + 1, 2)).astype(np.float16)
    if kind == "uint8-image":
        return rng.integers(0, 256, (b, h + 1, 6, 5, 3)).astype(np.uint8)
    if kind == "tuple-of-dict":
        return (
            rng.integers(0, 4, (b, h + 1)),
            {
                "pos": rng.normal(size=(b, h + 1, 2)).astype(np.float32),
                "on": rng.random((b, h + 1)) < 0.5,
            },
        )
    return {
        "img": rng.integers(0, 256, (b, h + 1, 2, 2)).astype(np.uint8),
        "x": rng.normal(size=(b, h + 1)),
    }


@pytest.mark.parametrize("cls", CLASSES, ids=CLASS_IDS)
@pytest.mark.parametrize(
    ("obs_kind", "actions"),
    [
        ("bool", "discrete"),
        ("int8", "multidiscrete"),
        ("float16", "box"),
        ("uint8-image", "discrete"),
        ("tuple-of-dict", "multidiscrete"),
        ("dict-image", "box"),
    ],
)
def test_odd_dtypes_and_nested_spaces_store_what_add_stores(
    cls: Any, obs_kind: str, actions: str
) -> None:
    b, h = 4, 3
    rng = np.random.default_rng(1)
    act = {
        "discrete": rng.integers(0, 5, (b, h)),
        "multidiscrete": rng.integers(0, 3, (b, h, 2)).astype(np.int8),
        "box": rng.normal(size=(b, h, 2)).astype(np.float32),
    }[actions]
    term = np.zeros((b, h), bool)
    term[0, 1] = term[1, 2] = True  # one cut early, one ended on its last step
    arrays = _full(
        b,
        h,
        observations=_rng_obs(obs_kind, b, h),
        actions=act,
        rewards=rng.integers(-3, 3, (b, h)),  # int rewards: float32 either way
        terminated=term,
        lengths=np.array([3, 3, 3, 2]),
        extra_model_outputs={"logp": rng.normal(size=(b, h)).astype(np.float16)},
    )
    by_arrays, _ = _both(cls, 9, arrays, [f"r{i}" for i in range(b)])  # 11 steps > 9: evicts
    assert by_arrays.get_evicted_ids() == ["r0"]


@pytest.mark.parametrize(
    "layout",
    ["negative-strides", "fortran", "broadcast", "torch-transposed", "torch-expanded"],
)
def test_strided_and_torch_inputs_store_what_add_stores(layout: str) -> None:
    b, h = 3, 4
    base = np.arange(b * (h + 1) * 2, dtype=np.float32).reshape(b, h + 1, 2)
    act: Any = np.arange(b * h).reshape(b, h)
    rew: Any = np.linspace(-1, 1, b * h).reshape(b, h)
    if layout == "negative-strides":
        obs: Any = base[::-1, ::-1, ::-1]
        act, rew = act[::-1], rew[:, ::-1]
    elif layout == "fortran":
        obs, act, rew = np.asfortranarray(base), np.asfortranarray(act), np.asfortranarray(rew)
    elif layout == "broadcast":
        obs = np.broadcast_to(base[:1], base.shape)  # read-only, zero strides
    else:
        torch = pytest.importorskip("torch")
        t = torch.arange(b * (h + 1) * 2, dtype=torch.float32)
        if layout == "torch-transposed":
            obs = t.reshape(2, h + 1, b).permute(2, 1, 0)
            rew = torch.as_tensor(np.ascontiguousarray(rew.T)).T
        else:
            obs = t[:2].reshape(1, 1, 2).expand(b, h + 1, 2)
        assert not obs.is_contiguous()
        act = torch.as_tensor(act)
    arrays = _full(b, h, observations=obs, actions=act, rewards=rew)
    _both(EpisodeReplayBuffer, 100, arrays, ["a", "b", "c"])


def test_the_buffer_keeps_no_view_of_the_callers_arrays() -> None:
    class Hooked(EpisodeReplayBuffer):  # add's own steps: the rollouts cut into chunks
        def _write(self, chunks: list[Any]) -> None:
            super()._write(chunks)

    for cls in (EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer, Hooked):
        obs = np.arange(2 * 4 * 2, dtype=np.float32).reshape(2, 4, 2)
        act, rew = np.zeros((2, 3), np.int64), np.ones((2, 3), np.float32)
        extra = {"v": np.ones((2, 3), np.float32)}
        buf, nested_buf = cls(100, seed=0), cls(100, seed=0)
        buf.add_rollouts(obs, act, rew, extra_model_outputs=extra, ids=["x", "y"])
        nested = {"a": obs.copy(), "b": (obs[..., 0].copy(),)}
        nested_buf.add_rollouts(nested, act, rew, extra_model_outputs=extra, ids=["x", "y"])
        states = [buf.get_state(), nested_buf.get_state()]
        for array in (obs, act, rew, extra["v"], nested["a"], nested["b"][0]):
            array[...] = 5
        same_state(buf.get_state(), states[0])
        same_state(nested_buf.get_state(), states[1])


@pytest.mark.parametrize("cls", CLASSES, ids=CLASS_IDS)
def test_both_flags_on_one_step_and_flags_past_the_cut(cls: Any) -> None:
    """Both flags at once end an episode with both; a flag after ``lengths`` is dropped."""
    b, h = 3, 3
    term = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 1]], bool)
    trunc = np.array([[0, 1, 0], [1, 0, 1], [0, 0, 0]], bool)
    arrays = _full(
        b,
        h,
        observations=np.arange(b * (h + 1), dtype=np.float32).reshape(b, h + 1),
        actions=np.zeros((b, h), np.int64),
        rewards=np.ones((b, h)),
        terminated=term,
        truncated=trunc,
        lengths=np.array([3, 3, 2]),
    )
    by_arrays, _ = _both(cls, 50, arrays, ["both", "trunc-first", "cut"])
    eps = {e.id_: e for e in by_arrays.get_episodes()}
    assert (len(eps["both"]), eps["both"].is_terminated, eps["both"].is_truncated) == (
        2,
        True,
        True,
    )
    assert (len(eps["trunc-first"]), eps["trunc-first"].is_terminated) == (1, False)
    assert eps["trunc-first"].is_truncated
    assert (len(eps["cut"]), eps["cut"].is_done) == (2, False)


def _plain_chunks(rng: np.random.Generator, running: dict[str, Any], counter: Any) -> list[Any]:
    """Running episodes of the runner's kind, started or continued (ids told apart)."""
    chunks = []
    for key in dict.fromkeys(f"p{int(x)}" for x in rng.integers(0, 5, int(rng.integers(1, 4)))):
        ep = running.get(key)
        if ep is None or ep.is_done:
            obs = [rng.normal(size=3).astype(np.float32)]
            ep = SingleAgentEpisode(
                f"{key}-{next(counter)}", observations=obs, len_lookback_buffer=0
            )
        else:
            ep = ep.cut()
        for _ in range(int(rng.integers(0, 4))):
            if ep.is_done:
                break
            ep.add_env_step(
                rng.normal(size=3).astype(np.float32),
                rng.normal(size=1).astype(np.float32),
                float(rng.normal()),
                extra_model_outputs={"logp": np.float32(rng.normal())},
                terminated=bool(rng.random() < 0.2),
            )
        running[key] = ep
        chunks.append(ep)
    return chunks


@pytest.mark.parametrize("cls", CLASSES, ids=CLASS_IDS)
@pytest.mark.parametrize("seed", range(6))
def test_interleaved_with_running_episodes_and_priority_updates(cls: Any, seed: int) -> None:
    """Rollouts between ``add`` of running episodes (continued, evicted, restarted), zero-step
    episodes, priority updates and batches of 40 rollouts (dozens evicted in one call)."""
    rng = np.random.default_rng(seed)
    capacity = int(rng.integers(3, 60))
    by_arrays, by_episodes = cls(capacity, seed=seed), cls(capacity, seed=seed)
    counter, running = itertools.count(), {}
    for _ in range(18):
        op = int(rng.integers(0, 4))
        if op <= 1:
            b = int(rng.integers(0, 40 if rng.random() < 0.25 else 6))
            arrays = _rollouts(rng, b, int(rng.integers(1, 5)), "flat")
            ids = [f"r{next(counter)}" for _ in range(b)]
            assert by_arrays.add_rollouts(**arrays, ids=ids) == ids
            by_episodes.add(_as_episodes(arrays, ids))
        elif op == 2:
            chunks = _plain_chunks(rng, running, counter)
            by_arrays.add(copy.deepcopy(chunks), on_evicted="restart")
            by_episodes.add(copy.deepcopy(chunks), on_evicted="restart")
        elif len(by_episodes) and cls is PrioritizedEpisodeReplayBuffer:
            batch = by_arrays.sample(4, beta=0.4)
            _same_batches(batch, by_episodes.sample(4, beta=0.4))
            new = rng.uniform(0.01, 5.0, 4)
            by_arrays.update_priorities(new, batch["indices"])
            by_episodes.update_priorities(new, batch["indices"])
        _same(by_arrays, by_episodes)
    assert by_arrays.get_episodes() == by_episodes.get_episodes()


@pytest.mark.parametrize("cls", CLASSES, ids=CLASS_IDS)
def test_after_set_state_and_a_saved_load_it_still_equals_add(cls: Any, tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    source = cls(120, seed=0)
    counter = itertools.count()
    for b in (50, 70):
        source.add_rollouts(**_rollouts(rng, b, 3, "dict"), ids=[next(counter) for _ in range(b)])
    source.save(tmp_path / "saved")
    restored = []
    for _ in range(2):
        buf = cls(120, seed=0)
        buf.set_state(copy.deepcopy(source.get_state()))
        restored.append(buf)
    loaded = [cls.load(tmp_path / "saved", seed=3) for _ in range(2)]
    arrays = _rollouts(rng, 90, 3, "dict")  # evicts more than 32 stored episodes at once
    ids = [f"n{i}" for i in range(90)]
    for by_arrays, by_episodes in (restored, loaded):
        by_arrays.add_rollouts(**arrays, ids=ids)
        by_episodes.add(_as_episodes(arrays, ids))
        _same(by_arrays, by_episodes)
    assert restored[0].get_num_episodes_evicted() > 32


@pytest.mark.parametrize("cls", CLASSES, ids=CLASS_IDS)
@pytest.mark.parametrize("stored", [31, 32, 33, 34])
def test_evicting_about_32_stored_episodes_whose_slots_are_not_contiguous(
    cls: Any, stored: int
) -> None:
    """Around the count where evictions are found in one pass over the slots: stored episodes
    continued by a later chunk (their slots apart), and zero-step ones (not stored)."""
    rng = np.random.default_rng(stored)
    by_arrays, by_episodes = cls(2 * stored + 10, seed=0), cls(2 * stored + 10, seed=0)
    eps = []
    for k in range(stored):
        n = k % 3
        eps.append(
            SingleAgentEpisode(
                f"o{k}",
                observations=list(rng.normal(size=(n + 1, 3)).astype(np.float32)),
                actions=list(rng.normal(size=(n, 1)).astype(np.float32)),
                rewards=[1.0] * n,
                extra_model_outputs={"logp": [np.float32(0)] * n},
                len_lookback_buffer=0,
            )
        )
    continued = []
    for ep in eps[1::3]:
        nxt = ep.cut()
        nxt.add_env_step(np.zeros(3, np.float32), np.zeros(1, np.float32), 0.5,
                         extra_model_outputs={"logp": np.float32(1)})  # fmt: skip
        continued.append(nxt)
    for buf in (by_arrays, by_episodes):
        buf.add(copy.deepcopy(eps))
        buf.add(copy.deepcopy(continued))
    arrays = _rollouts(rng, 3 * stored, 1, "flat")
    ids = [f"n{i}" for i in range(3 * stored)]
    by_arrays.add_rollouts(**arrays, ids=ids)
    by_episodes.add(_as_episodes(arrays, ids))
    _same(by_arrays, by_episodes)
    assert not any(i.startswith("o") for i in by_arrays.get_episode_ids())


@pytest.mark.parametrize("cls", CLASSES, ids=CLASS_IDS)
@pytest.mark.parametrize(
    ("first", "then"),
    [
        ([4, 4, 4], [20]),  # at capacity, then one rollout longer than the buffer: kept alone
        ([4, 4, 4], [1]),  # at capacity, one step more: the oldest goes
        ([], [5, 5, 5, 5]),  # one call of more steps than the buffer holds, into an empty one
        ([12], [12, 1]),  # a rollout of exactly capacity, then one evicting it
    ],
)
def test_at_and_past_capacity(cls: Any, first: list[int], then: list[int]) -> None:
    by_arrays, by_episodes = cls(12, seed=0), cls(12, seed=0)
    rng, counter = np.random.default_rng(len(then)), itertools.count()
    for lengths in (first, then):
        if not lengths:
            continue
        h = max(lengths)
        arrays = _rollouts(rng, len(lengths), h, "tuple")
        arrays["terminated"][:] = arrays["truncated"][:] = False
        arrays["lengths"] = np.array(lengths)
        ids = [next(counter) for _ in lengths]
        by_arrays.add_rollouts(**arrays, ids=ids)
        by_episodes.add(_as_episodes(arrays, ids))
        _same(by_arrays, by_episodes)
    assert by_arrays.get_num_timesteps() <= 12 or by_arrays.get_num_episodes() == 1


@pytest.mark.parametrize("cls", CLASSES, ids=CLASS_IDS)
def test_a_capacity_past_int64_is_not_refused_by_arrays(cls: Any) -> None:
    """The constructor takes any int >= 1, and ``add`` stores into a buffer of 10**20 steps."""
    rng = np.random.default_rng(0)
    arrays = _rollouts(rng, 3, 2, "flat")
    by_episodes = cls(10**20, seed=0)
    by_episodes.add(_as_episodes(arrays, ["a", "b", "c"]))
    assert by_episodes.get_num_episodes() == 3


@pytest.mark.parametrize("cls", CLASSES, ids=CLASS_IDS)
def test_add_rollouts_into_a_buffer_of_capacity_past_int64(cls: Any) -> None:
    rng = np.random.default_rng(0)
    arrays = _rollouts(rng, 3, 2, "flat")
    _both(cls, 10**20, arrays, ["a", "b", "c"])


def _torch_grad() -> Any:
    torch = pytest.importorskip("torch")
    return torch.zeros((2, 4, 2), requires_grad=True)


BAD = [
    ("obs-none", {"observations": None}, TypeError, "^observations: "),
    ("obs-1d", {"observations": np.zeros(4)}, ValueError, r"^observations: expected shape"),
    ("obs-empty-dict", {"observations": {}}, ValueError, "^observations: "),
    ("obs-int-key", {"observations": {0: np.zeros((2, 4))}}, TypeError, "^observations: "),
    ("obs-ragged", {"observations": [[0.0] * 4, [0.0] * 3]}, ValueError, "^observations: "),
    ("obs-grad", {"observations": _torch_grad}, TypeError, "^observations: .*detach"),
    ("actions-none", {"actions": None}, TypeError, "^actions: "),
    (
        "extras-none",
        {"extra_model_outputs": {"v": None}},
        TypeError,
        r"^extra_model_outputs\['v'\]",
    ),
    (
        "extras-B",
        {"extra_model_outputs": {"v": np.zeros((3, 3))}},
        ValueError,
        r"\['v'\]: expected",
    ),
    ("extras-list", {"extra_model_outputs": [np.zeros((2, 3))]}, TypeError, "^extra_model_outputs"),
    ("terminated-B", {"terminated": np.zeros((3, 3), bool)}, ValueError, "^terminated: "),
    ("truncated-float", {"truncated": np.zeros((2, 3))}, TypeError, "^truncated: "),
    ("lengths-huge", {"lengths": [2**70, 1]}, TypeError, "^lengths: "),
    ("lengths-scalar", {"lengths": 3}, ValueError, r"^lengths: expected shape \[B\]"),
    ("ids-generator", {"ids": (i for i in "ab")}, TypeError, "^ids: "),
    ("ids-int", {"ids": 5}, TypeError, "^ids: "),
    ("ids-2d-array", {"ids": np.array([[1], [2]])}, TypeError, r"^ids\[0\]: "),
    ("ids-equal-across-types", {"ids": [1, 1.0]}, ValueError, "^ids: .*id of its own"),
]


@pytest.mark.parametrize("cls", CLASSES, ids=CLASS_IDS)
@pytest.mark.parametrize(
    ("change", "error", "words"), [c[1:] for c in BAD], ids=[c[0] for c in BAD]
)
def test_more_bad_input_is_refused_by_name_and_changes_nothing(
    cls: Any, change: dict[str, Any], error: Any, words: str
) -> None:
    buf = cls(8, seed=0)
    buf.add_rollouts(np.zeros((1, 9, 2)), np.zeros((1, 8), np.int64), np.ones((1, 8)), ids=["gone"])
    buf.add_rollouts(
        np.zeros((2, 3, 2)), np.zeros((2, 2), np.int64), np.ones((2, 2)), ids=["s0", "s1"]
    )
    before = buf.get_state()
    args = {
        "observations": np.zeros((2, 4, 2)),
        "actions": np.zeros((2, 3), np.int64),
        "rewards": np.ones((2, 3)),
    }
    args.update({k: v() if callable(v) else v for k, v in change.items()})
    with pytest.raises(error, match=words):
        buf.add_rollouts(**args)
    same_state(buf.get_state(), before)
    assert buf.get_evicted_ids() == ["gone"]


def test_ids_given_as_a_set_are_refused() -> None:
    buf = EpisodeReplayBuffer(10, seed=0)
    with pytest.raises(TypeError, match="^ids: "):
        buf.add_rollouts(np.zeros((2, 3)), np.zeros((2, 2)), np.ones((2, 2)), ids={"zz", "aa"})
    assert len(buf) == 0


def test_a_scalar_observation_is_refused_for_its_shape() -> None:
    buf = EpisodeReplayBuffer(10, seed=0)
    with pytest.raises(ValueError, match=r"observations: expected shape \[B, H \+ 1"):
        buf.add_rollouts(np.float32(1.0), np.zeros((2, 2)), np.ones((2, 2)))


# ----------------------------------------------------------------------------- load_episodes
def _pieces(rng: np.random.Generator, count: int, nested: bool) -> list[SingleAgentEpisode]:
    """``count`` episodes of mixed id types, each cut into pieces, the pieces interleaved."""

    def obs() -> Any:
        if nested:
            return {"p": rng.normal(size=2).astype(np.float32), "c": np.int64(rng.integers(5))}
        return rng.normal(size=3)

    live: list[Any] = []
    for k in range(count):
        id_ = [f"e{k}", k, (k, "t"), k + 0.5][k % 4]
        live.append(
            SingleAgentEpisode(id_, observations=[obs()], infos=[{"i": 0}], len_lookback_buffer=0)
        )
    out = []
    for r in range(5):
        for k in rng.permutation(count):
            ep = live[k]
            if ep is None:
                continue
            for _ in range(int(rng.integers(0, 3))):
                if ep.is_done:
                    break
                ep.add_env_step(
                    obs(),
                    int(rng.integers(3)),
                    float(rng.normal()),
                    infos={"i": 1},
                    extra_model_outputs={"v": float(rng.normal())},
                    terminated=r == 4 and rng.random() < 0.5,
                )
            out.append(ep.to_numpy() if rng.random() < 0.5 else ep)
            live[k] = None if ep.is_done else ep.cut()
    return out


WRITERS = {  # sync=False: no fsync per piece (nothing here outlives a crash)
    "v1": (EpisodeWriter, {"sync": False}),
    "v2-tiny-shards": (DatasetWriter, {"shard_bytes": 1, "sync": False}),
    "v2-parquet": (DatasetWriter, {"data_format": "parquet", "shard_bytes": 2000, "sync": False}),
    "v2-zstd": (DatasetWriter, {"compression": "zstd", "sync": False}),
}


def _write(path: Path, fmt: str, pieces: list[Any], per_call: int = 3) -> None:
    writer, kwargs = WRITERS[fmt]
    if writer is DatasetWriter:
        pytest.importorskip("pyarrow")
    with writer(path, **kwargs) as w:
        for at in range(0, len(pieces), per_call):
            w.write_many(pieces[at : at + per_call])


@pytest.mark.parametrize("fmt", list(WRITERS))
@pytest.mark.parametrize("seed", range(2))
def test_load_episodes_equals_the_load_episode_loop(fmt: str, seed: int, tmp_path: Path) -> None:
    """Pieces across shards, ids of four types, repeats, every numpy mode, verify on and off."""
    rng = np.random.default_rng(seed)
    pieces = _pieces(rng, 7, nested=seed == 0)
    _write(tmp_path / "d", fmt, pieces)
    known = list(dict.fromkeys(p.id_ for p in pieces))
    for trial, numpy in enumerate([None, True, False, None]):
        ids = [known[i] for i in rng.integers(0, len(known), int(rng.integers(1, 9)))]
        ids.append(ids[0])  # a repeat
        got = load_episodes(tmp_path / "d", ids, numpy=numpy, verify=bool(trial % 2))
        want = [load_episode(tmp_path / "d", i, numpy=numpy) for i in ids]
        assert got == want
        assert [type(e.get_observations()) for e in got] == [
            type(e.get_observations()) for e in want
        ]
        assert got[0] is not got[-1]


@pytest.mark.parametrize("fmt", ["v1", "v2-tiny-shards"])
def test_repeated_ids_share_no_memory(fmt: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    ep = SingleAgentEpisode("a", observations=list(rng.normal(size=(4, 2))), actions=[0, 1, 2],
                            rewards=[1.0] * 3, len_lookback_buffer=0).to_numpy()  # fmt: skip
    nxt = ep.cut()
    nxt.add_env_step(np.zeros(2), 0, 1.0)
    _write(tmp_path / "d", fmt, [ep, nxt.to_numpy(), SingleAgentEpisode("s", observations=[1.0])])
    for id_ in ("a", "s"):
        for numpy in (None, True, False):
            first, second = load_episodes(tmp_path / "d", [id_, id_], numpy=numpy)
            one, two = np.asarray(first.get_observations()), np.asarray(second.get_observations())
            if numpy is not True:
                one = np.asarray(first.get_observations()[0])
                two = np.asarray(second.get_observations()[0])
            assert not np.shares_memory(one, two)


@pytest.mark.parametrize("fmt", ["v1", "v2-tiny-shards"])
def test_ids_of_equal_value_and_other_type_stay_apart(fmt: str, tmp_path: Path) -> None:
    ids: list[Any] = ["1", 1, 1.0, True, ("a", 1), float("nan"), -0.0, 2**70]
    eps = [SingleAgentEpisode(i, observations=[float(k)]) for k, i in enumerate(ids)]
    _write(tmp_path / "d", fmt, eps, per_call=1)
    asked = [
        *ids,
        np.int64(1),
        np.float64(1.0),
        np.bool_(True),
        np.str_("1"),
        ("a", np.int64(1)),
        0.0,
    ]
    got = load_episodes(tmp_path / "d", asked)
    assert [e.get_observations()[0] for e in got] == [0, 1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 0, 4, 6]
    assert got == [load_episode(tmp_path / "d", i) for i in asked]


@pytest.mark.parametrize("fmt", ["v1", "v2-tiny-shards"])
def test_collections_of_ids(fmt: str, tmp_path: Path) -> None:
    _write(tmp_path / "d", fmt, [SingleAgentEpisode(x, observations=[0]) for x in "abc"])
    path = tmp_path / "d"
    assert load_episodes(path, []) == []
    assert [e.id_ for e in load_episodes(path, (x for x in "cab"))] == ["c", "a", "b"]
    assert [e.id_ for e in load_episodes(path, np.array(["b", "b"]))] == ["b", "b"]
    assert [e.id_ for e in load_episodes(path, {"a": 0, "c": 1})] == ["a", "c"]
    for single in ("a", b"a", 3):
        with pytest.raises(TypeError, match="ids must be a collection of ids"):
            load_episodes(path, single)
    with pytest.raises(TypeError, match="numpy"):
        load_episodes(path, [], numpy=2)


def test_an_empty_list_still_needs_a_dataset(tmp_path: Path) -> None:
    with pytest.raises(NotADatasetError, match="does not exist"):
        load_episodes(tmp_path / "nothing", [])


def _damaged(path: Path) -> None:
    """Flips bytes in the middle of the largest data file of the dataset at ``path``."""
    files = [f for f in path.rglob("*") if f.is_file() and f.suffix in (".arrow", ".npy")]
    largest = max(files, key=lambda f: f.stat().st_size)
    raw = bytearray(largest.read_bytes())
    for k in range(len(raw) // 2, len(raw) // 2 + 8):
        raw[k] ^= 0xFF
    largest.chmod(0o644)
    largest.write_bytes(bytes(raw))


@pytest.mark.parametrize("fmt", ["v1", "v2-tiny-shards"])
def test_a_damaged_piece_and_lookups_before_reads(fmt: str, tmp_path: Path) -> None:
    def episode(id_: str, n: int) -> SingleAgentEpisode:
        return SingleAgentEpisode(id_, observations=list(range(n + 1)), actions=[0] * n,
                                  rewards=[1.0] * n, len_lookback_buffer=0).to_numpy()  # fmt: skip

    _write(tmp_path / "d", fmt, [episode("good", 3), episode("bad", 400)], per_call=1)
    _damaged(tmp_path / "d")
    path = tmp_path / "d"
    with pytest.raises(CorruptDatasetError, match="CRC-32"):
        load_episode(path, "bad", verify=True)
    with pytest.raises(CorruptDatasetError, match="CRC-32"):
        load_episodes(path, ["good", "bad"], verify=True)
    # Every id looked up first: the unknown one, named, before the damaged piece is read.
    with pytest.raises(EpisodeNotFoundError, match="'zz'"):
        load_episodes(path, ["bad", "zz"], verify=True)
    assert load_episodes(path, ["good"], verify=True) == [load_episode(path, "good")]


@pytest.mark.parametrize("fmt", ["v1", "v2-tiny-shards"])
def test_a_dataset_being_appended_to(fmt: str, tmp_path: Path) -> None:
    writer, kwargs = WRITERS[fmt]
    if writer is DatasetWriter:
        pytest.importorskip("pyarrow")
    path = tmp_path / "d"
    ep = SingleAgentEpisode("run", observations=[0.0], len_lookback_buffer=0)
    ep.add_env_step(1.0, 0, 1.0)
    with writer(path, **kwargs) as w:
        w.write_many([ep, SingleAgentEpisode("other", observations=[5.0])])
        for k in range(3):
            if hasattr(w, "flush"):
                w.flush()
            got = load_episodes(path, ["run", "other", "run"])
            assert got == [load_episode(path, i) for i in ("run", "other", "run")]
            assert len(got[0]) == k + 1
            ep = ep.cut()
            ep.add_env_step(2.0 + k, 1, 1.0)
            w.write_many([ep])


def test_a_zero_d_array_of_ids_is_refused_by_name(tmp_path: Path) -> None:
    _write(tmp_path / "d", "v1", [SingleAgentEpisode("a", observations=[0])])
    with pytest.raises(TypeError, match="ids must be a collection of ids"):
        load_episodes(tmp_path / "d", np.array("a"))
