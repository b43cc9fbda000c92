"""save/load batch their columns (no episode per stored episode), and change nothing else.

``save`` writes plain stored episodes (no infos, no custom_data) as record batches gathered
from the buffer's columns, ``load`` reads a save whose pieces are all plain into one buffer
state (``episodes.replay.saved_shards``, ``episodes.replay.loaded_shards``). These tests pin
that the files are the writer's (episodes, index entries, manifest summaries, replay.json,
priorities) and that a load gives the buffer adding the read episodes gave (``get_state``,
samples, ids, counters, priorities), for random buffers of both kinds with evicted and
continuing episodes, NaNs, infos and metadata; that saves written episode by episode (as
every save before 2026-12-05) load alike; and that damage is refused with the same error.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
import zlib
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, read_episodes
from episodes.io.manifest_lines import seal_lines
from episodes.replay import (
    EpisodeReplayBuffer,
    PrioritizedEpisodeReplayBuffer,
    loaded_shards,
    persistence,
    saved_shards,
)
from episodes.replay.saved_files import seal

_OBS = [
    ((), np.float32),
    ((3,), np.float32),
    ((2, 2), np.uint8),
    ((2,), np.float64),
    ((), np.int16),
]


def build(
    seed: int, prioritized: bool, *, odd: float = 0.0, ids: bool = False
) -> EpisodeReplayBuffer:
    """A buffer grown by random adds: evictions, continuing chunks, restarts, NaNs.

    ``odd`` is the share of chunks with infos, custom_data, agent ids or clocks (episodes
    the batched save writes one by one); ``ids`` draws ids of other types too (None, a
    float, a tuple). Only API older than the batched save is used: the embedded old saves
    below were made by this function (``ids`` False) run on the code before it.
    """
    rng = np.random.default_rng(seed)
    shape, dtype = _OBS[int(rng.integers(len(_OBS)))]
    discrete = bool(rng.integers(2))
    extras = [k for k in ("logp", "vf") if rng.random() < 0.5]
    space = gym.spaces.Box(-10, 10, shape, np.float32) if rng.random() < 0.3 else None
    if prioritized:
        buf: EpisodeReplayBuffer = PrioritizedEpisodeReplayBuffer(
            int(rng.integers(6, 40)), seed=seed, alpha=float(rng.choice([0.6, 1.0]))
        )
    else:
        buf = EpisodeReplayBuffer(int(rng.integers(6, 40)), seed=seed)
    running: dict[Any, tuple[int, Any]] = {}  # id -> (next t, last observation)
    fresh = 0

    def obs() -> Any:
        value = (rng.normal(size=shape) * 4).astype(dtype)
        if dtype == np.float32 and rng.random() < 0.05:
            value = np.full(shape, np.nan, dtype)
        return value

    for _ in range(int(rng.integers(1, 10))):
        chunks = []
        for _ in range(int(rng.integers(1, 4))):
            if running and rng.random() < 0.4:
                id_ = list(running)[int(rng.integers(len(running)))]
                t0, first = running.pop(id_)
            else:
                id_ = f"e{fresh}" if rng.random() < 0.8 else fresh
                if ids:
                    id_ = [id_, None, fresh + 0.5, ("run", fresh)][int(rng.integers(4))]
                fresh += 1
                t0, first = int(rng.integers(0, 4)), obs()
            n = int(rng.integers(1, 6))
            observations = [first] + [obs() for _ in range(n)]
            scale = float(rng.choice([1.0, 1e-7, 3e5]))
            rewards = (rng.normal(size=n) * scale).astype(np.float32)
            if rng.random() < 0.05:
                rewards[0] = np.nan
            actions = (
                rng.integers(0, 4, n) if discrete else rng.normal(size=(n, 2)).astype(np.float32)
            )
            outputs = {
                "logp": rng.normal(size=n).astype(np.float32),
                "vf": rng.normal(size=(n, 2)),
            }
            terminated = bool(rng.random() < 0.3)
            truncated = not terminated and bool(rng.random() < 0.1)
            odd_one = rng.random() < odd
            ep = SingleAgentEpisode(
                id_,
                observations=observations,
                observation_space=space,
                actions=list(actions),
                rewards=list(rewards),
                infos=[{"k": int(rng.integers(9))}] * (n + 1) if odd_one else None,
                extra_model_outputs={k: list(outputs[k]) for k in extras},
                t_started=t0,
                terminated=terminated,
                truncated=truncated,
                len_lookback_buffer=0,
                agent_id="agent" if odd_one and rng.random() < 0.5 else None,
            )
            if rng.random() < odd:
                ep.custom_data["seed"] = int(rng.integers(100))
            if rng.random() < odd:
                fields = ep.field_values()
                fields["start_time"], fields["last_step_time"] = 5.25, 9.5
                ep = SingleAgentEpisode.from_fields(fields)
            if not (terminated or truncated):
                running[id_] = (t0 + n, observations[-1])
            chunks.append(ep.to_numpy() if rng.random() < 0.5 else ep)
        buf.add(chunks, on_evicted="restart")
        if prioritized and buf.get_num_timesteps():
            items = np.concatenate([buf.get_episode_indices(i) for i in buf.get_episode_ids()])
            buf.update_priorities(rng.uniform(0.01, 5.0, len(items)), items)
            if rng.random() < 0.5:
                buf.max_priority = float(rng.uniform(0.5, 6.0))
        if rng.random() < 0.3 and buf.get_num_timesteps():
            buf.sample(3)
    return buf


# --------------------------------------------------------------------------- comparisons
def same(a: Any, b: Any) -> bool:
    """Deep equality: arrays by dtype, shape and bytes (NaN equal), floats by repr."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype == object or b.dtype == object:
            return a.shape == b.shape and same(a.tolist(), b.tolist())
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return repr(a) == repr(b)
    return bool(a == b)


def slow_save(monkeypatch: pytest.MonkeyPatch, buf: EpisodeReplayBuffer, path: Path) -> None:
    """``buf.save(path)`` episode by episode, as every save was written before."""

    def refuse(*args: Any) -> None:
        raise saved_shards.BatchMismatch("forced")

    with monkeypatch.context() as m:
        m.setattr(saved_shards, "write_stored", refuse)
        buf.save(path)


def slow_load(monkeypatch: pytest.MonkeyPatch, path: Path, cls: Any = EpisodeReplayBuffer) -> Any:
    """``cls.load(path)`` episode by episode: the episodes read and added, as before."""
    with monkeypatch.context() as m:
        m.setattr(loaded_shards, "read_stored", lambda path: None)
        return cls.load(path)


def index_entries(dataset: Path) -> list[Any]:
    """Every shard's index entries in manifest order, without rows and wall clocks."""
    out = []
    for line in (dataset / "manifest.jsonl").read_text().splitlines()[1:]:
        name = json.loads(line)["shard"]
        index = json.loads((dataset / "shards" / f"{name}.json").read_text())
        for entry in index["episodes"]:
            walls = [entry.pop("wall_start") is None, entry.pop("wall_end") is None]
            entry.pop("rows")
            out.append([walls, entry, index["spaces"]])
    return out


def summaries(dataset: Path) -> list[Any]:
    lines = (dataset / "manifest.jsonl").read_text().splitlines()[1:]
    return [row for line in lines for row in json.loads(line)["episodes"]]


def meta_of(path: Path) -> dict[str, Any]:
    meta = json.loads((path / "replay.json").read_text())
    for key in ("crc32", "episodes"):
        meta.pop(key)
    return meta


def check_loaded(back: Any, slow: Any) -> None:
    """A load equal to the one that read and added every episode."""
    assert type(back) is type(slow)
    assert same(back.get_state(), slow.get_state())
    assert same(back.rng.bit_generator.state, slow.rng.bit_generator.state)
    assert back._store.capacity == slow._store.capacity
    assert back._store.size == slow._store.size and back._table.size == slow._table.size
    if back.get_num_timesteps():
        assert same(back.sample(5, n_step=2, gamma=0.9), slow.sample(5, n_step=2, gamma=0.9))
    assert back.get_episodes() == slow.get_episodes()


# ------------------------------------------------------------------------------- property
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 10**6),
    prioritized=st.booleans(),
    odd=st.sampled_from([0.0, 0.3]),
    ids=st.booleans(),
)
def test_batched_save_writes_the_writer_files_and_loads_as_add(
    seed, prioritized, odd, ids, tmp_path_factory, monkeypatch
):
    buf = build(seed, prioritized, odd=odd, ids=ids)
    root = tmp_path_factory.mktemp("s")
    read: list[Any] = []
    writer = saved_shards.write_stored

    def batched(*args: Any) -> None:
        try:
            writer(*args)
        except saved_shards.BatchMismatch as err:  # pragma: no cover - the failure shown
            raise AssertionError(f"the batched save fell back: {err}") from err

    with monkeypatch.context() as m:
        m.setattr(saved_shards, "write_stored", batched)
        buf.save(root / "fast")
    slow_save(monkeypatch, buf, root / "slow")
    reader = loaded_shards.read_stored
    monkeypatch.setattr(loaded_shards, "read_stored", lambda p: read.append(reader(p)) or read[-1])
    fast_eps, slow_eps = root / "fast" / "episodes", root / "slow" / "episodes"
    assert list(read_episodes(fast_eps, verify=True)) == list(read_episodes(slow_eps))
    assert index_entries(fast_eps) == index_entries(slow_eps)
    assert summaries(fast_eps) == summaries(slow_eps)
    assert meta_of(root / "fast") == meta_of(root / "slow")
    if prioritized:
        prio = "priorities.npy"
        assert (root / "fast" / prio).read_bytes() == (root / "slow" / prio).read_bytes()
    for saved in ("fast", "slow"):  # each save loads as reading and adding its episodes
        back = type(buf).load(root / saved)
        assert back.get_episode_ids() == buf.get_episode_ids()
        assert back.get_episodes() == buf.get_episodes()
        assert back.get_counters() == buf.get_counters()
        assert back.get_evicted_ids() == buf.get_evicted_ids()
        if prioritized:
            items = [back.get_episode_indices(i) for i in back.get_episode_ids()]
            old = [buf.get_episode_indices(i) for i in buf.get_episode_ids()]
            assert same(
                [back.get_priorities(i) for i in items], [buf.get_priorities(i) for i in old]
            )
            assert back.max_priority == buf.max_priority
        check_loaded(back, slow_load(monkeypatch, root / saved, type(buf)))
    plain = all(
        not e.custom_data and not any(e.get_infos()) for e in buf.get_episodes()
    )  # fmt: skip
    if odd == 0.0 or plain:  # read as one state (an odd episode is read and added)
        assert len(read) == 2 and None not in read


# ------------------------------------------------------------------------ fast paths taken
@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_plain_buffers_save_and_load_without_an_episode_each(cls, tmp_path, monkeypatch):
    buf = cls(10_000, seed=3)
    buf.add(
        [
            SingleAgentEpisode(
                f"e{i}", observations=np.arange(6, dtype=np.float32) + i, actions=[0] * 5,
                rewards=[1.0] * 5, terminated=True, len_lookback_buffer=0,
            )
            for i in range(300)
        ]
    )  # fmt: skip

    def no_episode(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("an episode written or read one by one")

    with monkeypatch.context() as m:
        m.setattr(DatasetWriter, "write", no_episode)
        m.setattr(persistence, "read_episodes", no_episode)
        buf.save(tmp_path / "buf")
        back = cls.load(tmp_path / "buf")
    check_loaded(back, slow_load(monkeypatch, tmp_path / "buf", cls))
    assert back.get_episodes() == buf.get_episodes()
    # One record batch for the 300 episodes (the writer makes one per episode).
    from episodes.io import Dataset

    shard, _ = Dataset(tmp_path / "buf" / "episodes").locate(0)
    assert len(shard.parts) == 1


# --------------------------------------------------------------------------- other paths
@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_empty_buffers_round_trip(cls, tmp_path, monkeypatch):
    buf = cls(3, seed=1)
    buf.save(tmp_path / "b")
    slow_save(monkeypatch, buf, tmp_path / "slow")
    assert summaries(tmp_path / "b" / "episodes") == []
    assert meta_of(tmp_path / "b") == meta_of(tmp_path / "slow")
    back = cls.load(tmp_path / "b")
    assert back.get_episode_ids() == [] and back._store.capacity == 3
    check_loaded(back, slow_load(monkeypatch, tmp_path / "b", cls))


@pytest.mark.parametrize(
    ("obs", "actions", "batched"),
    [
        (np.zeros((4, 3), bool), np.array([True, False, True]), True),
        (np.arange(8, dtype=np.float16).reshape(4, 2), np.arange(3, dtype=np.int8), True),
        (np.arange(4, dtype=np.uint64) * 2**62, np.arange(3, dtype=np.uint32), True),
        (np.arange(4, dtype=">f4"), np.zeros((3, 1, 2), np.float64), True),
        (np.ones((4, 2), np.complex64), np.arange(3), False),  # raw bytes: written one by one
    ],
)
def test_odd_dtypes_round_trip(obs, actions, batched, tmp_path, monkeypatch):
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add(
        [
            SingleAgentEpisode(
                i, observations=obs, actions=actions, rewards=[0.5, 1e-30, 3e38],
                extra_model_outputs={"h": np.ones((3, 2), np.float16)}, terminated=True,
                len_lookback_buffer=0,
            )
            for i in "abc"
        ]
    )  # fmt: skip
    mismatch = []
    writer = saved_shards.write_stored

    def spied(*args: Any) -> None:
        try:
            writer(*args)
        except saved_shards.BatchMismatch:
            mismatch.append(True)
            raise

    with monkeypatch.context() as m:
        m.setattr(saved_shards, "write_stored", spied)
        buf.save(tmp_path / "b")
    assert mismatch == ([] if batched else [True])
    slow_save(monkeypatch, buf, tmp_path / "slow")
    assert index_entries(tmp_path / "b" / "episodes") == index_entries(
        tmp_path / "slow" / "episodes"
    )
    assert summaries(tmp_path / "b" / "episodes") == summaries(tmp_path / "slow" / "episodes")
    back = PrioritizedEpisodeReplayBuffer.load(tmp_path / "b")
    assert back.get_episodes() == buf.get_episodes()
    check_loaded(back, slow_load(monkeypatch, tmp_path / "b", PrioritizedEpisodeReplayBuffer))


def test_many_shards_and_a_mismatch_fall_back_alike(tmp_path, monkeypatch):
    buf = build(11, True)
    with monkeypatch.context() as m:
        m.setattr(saved_shards, "DEFAULT_SHARD_BYTES", 1)  # a shard per episode or run
        buf.save(tmp_path / "many")
    assert len(summaries(tmp_path / "many" / "episodes")) == len(buf.get_episode_ids())
    assert (tmp_path / "many" / "episodes" / "manifest.jsonl").read_text().count("\n") > 2
    with monkeypatch.context() as m:  # the writer's encoding differs: written one by one
        m.setattr(saved_shards, "_same", lambda *args: False)
        m.setattr(DatasetWriter, "write", DatasetWriter.write)
        buf.save(tmp_path / "fallback")
    slow_save(monkeypatch, buf, tmp_path / "slow")
    for path in ("many", "fallback"):
        back = type(buf).load(tmp_path / path)
        check_loaded(back, slow_load(monkeypatch, tmp_path / "slow", type(buf)))
    assert index_entries(tmp_path / "fallback" / "episodes") == index_entries(
        tmp_path / "slow" / "episodes"
    )


def test_a_subclass_with_its_own_add_loads_through_it(tmp_path):
    calls = []

    class Counting(EpisodeReplayBuffer):
        def add(self, episodes: Any, **kwargs: Any) -> None:
            calls.append(len(list(episodes)))
            super().add(episodes, **kwargs)

    buf = build(5, False)
    buf.save(tmp_path / "b")
    back = Counting.load(tmp_path / "b")
    assert calls == [len(buf.get_episode_ids())]
    assert back.get_episodes() == buf.get_episodes()


def test_the_seed_generator_given_to_load_is_the_buffers(tmp_path):
    buf = build(7, True)
    buf.save(tmp_path / "b")
    rng = np.random.default_rng(5)
    back = PrioritizedEpisodeReplayBuffer.load(tmp_path / "b", seed=rng)
    assert back.rng is rng
    with pytest.raises(ValueError, match="nothing sampled yet"):
        back.update_priorities([1.0])


@pytest.mark.parametrize("where", ["data", "index"])
def test_damage_is_refused_as_before(where, tmp_path, monkeypatch):
    buf = build(3, False)
    buf.save(tmp_path / "b")
    shards = tmp_path / "b" / "episodes" / "shards"
    target = next(shards.glob("*.arrow" if where == "data" else "*.json"))
    raw = bytearray(target.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    target.write_bytes(bytes(raw))
    errors = []
    for load in (EpisodeReplayBuffer.load, lambda p: slow_load(monkeypatch, p)):
        with pytest.raises(Exception) as info:
            load(tmp_path / "b")
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]


def forge_last_entry(path: Path, change: Any) -> None:
    """Edits the last index entry of a save, every checksum recomputed as a forger would."""
    dataset = path / "episodes"
    lines = [json.loads(line) for line in (dataset / "manifest.jsonl").read_bytes().splitlines()]
    for line in lines:
        line.pop("crc32")
    index_path = dataset / "shards" / f"{lines[-1]['shard']}.json"
    index = json.loads(index_path.read_text())
    change(index["episodes"][-1])
    raw = json.dumps(index).encode()
    index_path.write_bytes(raw)
    lines[-1].update(index_sha256=hashlib.sha256(raw).hexdigest(), index_size=len(raw))
    (dataset / "manifest.jsonl").write_bytes(seal_lines(lines))
    meta = json.loads((path / "replay.json").read_text())
    manifest = (dataset / "manifest.jsonl").read_bytes()
    meta["episodes"]["manifest_crc32"] = zlib.crc32(manifest)
    (path / "replay.json").write_text(
        json.dumps(seal({k: v for k, v in meta.items() if k != "crc32"}))
    )


def _set(*keys: Any, value: Any) -> Any:
    def change(entry: dict[str, Any]) -> None:
        for key in keys[:-1]:
            entry = entry[key]
        entry[keys[-1]] = value(entry[keys[-1]])

    return change


@pytest.mark.parametrize(
    "change",
    [
        _set("meta", "t", value=lambda t: t + 1),  # disagrees with the manifest
        _set("leaves", "act.0.npy", "count", value=lambda c: c + 1),
        _set("meta", "columns", "actions", "size", value=lambda c: c - 1),
        _set("leaves", "obs.0.npy", "dtype", value=lambda d: "<f8"),
        _set("meta", "custom_data", value=lambda d: {"x": 1}),  # loads, episode by episode
        _set("meta", "start_time", value=lambda d: 7),  # an int clock: read by the decoder
        _set("meta", "agent_id", value=lambda d: ["a"]),
        _set("meta", "id", value=lambda d: "e0"),  # an id twice: the add joins or refuses
        _set("rows", value=lambda r: [r[0], r[1] + 1]),
    ],
)
def test_forged_entries_load_or_are_refused_as_before(change, tmp_path, monkeypatch):
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(
        [
            SingleAgentEpisode(
                f"e{i}", observations=np.arange(4, dtype=np.float32) + i, actions=[1, 2, 3],
                rewards=[1.0] * 3, terminated=True, len_lookback_buffer=0,
            )
            for i in range(3)
        ]
    )  # fmt: skip
    buf.save(tmp_path / "b")
    forge_last_entry(tmp_path / "b", change)
    outcomes = []
    for load in (EpisodeReplayBuffer.load, lambda p: slow_load(monkeypatch, p)):
        try:
            back = load(tmp_path / "b")
            outcomes.append(("loaded", back.get_episodes(), back.get_state()))
        except Exception as err:  # noqa: BLE001 - the refusal itself is compared
            outcomes.append((type(err), str(err)))
    if outcomes[0][0] == "loaded":
        assert outcomes[1][0] == "loaded" and outcomes[0][1] == outcomes[1][1]
        assert same(outcomes[0][2], outcomes[1][2])
    else:
        assert outcomes[0] == outcomes[1]


# ------------------------------------------------------------------------------ old saves
def test_saves_written_before_load_as_they_did(tmp_path, monkeypatch):
    """Saves the code before this change wrote (embedded below) load as adding them did."""
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode("".join(_OLD_SAVES)))) as tar:
        tar.extractall(tmp_path, filter="data")
    for name, seed, prioritized, odd in _OLD:
        path = tmp_path / name
        cls = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
        back = cls.load(path)
        buf = build(seed, prioritized, odd=odd)  # what was saved
        assert back.get_episodes() == buf.get_episodes()
        assert back.get_counters() == buf.get_counters()
        assert back.get_evicted_ids() == buf.get_evicted_ids()
        buf.save(tmp_path / f"{name}-again")  # saved now, it loads into the same buffer
        again = cls.load(tmp_path / f"{name}-again")
        now, then = again.get_state(), back.get_state()
        for state in (now, then):  # item ids: kept where a save records them, else renumbered
            state.pop("next_uid"), state["steps"].pop("uid"), state["layout"].pop("uid")
        assert same(now, then)
        assert same(again.rng.bit_generator.state, back.rng.bit_generator.state)
        if prioritized:
            assert again.max_priority == back.max_priority
        check_loaded(back, slow_load(monkeypatch, path, cls))


#: (directory, seed, prioritized, odd) of the embedded saves (a tar.xz, base64), made by
#: ``build(seed, prioritized, odd=odd).save(directory)`` with the code of git commit c995127
#: (episodes written one by one, one record batch each).
_OLD = [
    ("uniform", 101, False, 0.0),
    ("prioritized", 202, True, 0.0),
    ("mixed", 303, True, 0.3),
    ("plain", 404, False, 0.0),
]
_OLD_SAVES = [
    "/Td6WFoAAATm1rRGAgAhARYAAAB0L+Wj4d//HOFdABcL3ASAUDIm7h19G/PyyzPs7Pg38OrWeznBvBtWH3VunhnX8ZVi",
    "1dutW8VtrRSGQpkg6gBUZhYzjFPmRgpt8Wwnr+zS+oaiNvfJHV6/tjV1HsVbmsdIxdcKjetKQRmS2AKO4DxQxbxgq6oS",
    "5M62YGRCyU4IZSc32Tv6GccIqnfEaf4M784dwyxEsnFGW9mhFTUzDnmNAlOEfl4S7bYU/DoHrWuHEW5GI4fm/eIkMKuJ",
    "vQm6FIAixav+rhOT+vhzJuiiTmD6HHDwPsRZ0pwn3ilUOnZ0WJORABfADCnIxYeTKZGhPWwdDyrDcZwoQ80bXNJSYZye",
    "rXP0W9nzkiB2U93IhS6xmS6ggRLNpfiFF9h4CA7kyD99q1iUfBgAEAjlbm26DF4r5Qt2RXr+rb5HQAW9MM5Z1zkIkvg3",
    "4bmUiIIdXHJ1nybg4kdHj83YzLypeNyT+8dPudRkjRh32nscXQQCEFAs65GBlyqv2EW76RpGBM5LeYyKiu7m6AJLueWT",
    "H4Y6R79snhLf93Drxk7TI5OvT8LUhK1Kcek6XMFgrFEmA8BBD30hXNbbmTn8hYX6NlrMFiUsFAm04SFm7B3/OMF40Ckr",
    "/QhtH3AXGGtSIkc+eechoIneS1VbQ2c19dG3KsphIkcXPiakwXZyYMPofpNyAl449TOwvTXUXyEBMYgZJP1fEuog05Ow",
    "tcKDBHk2MGBak7ggi3MBBroc3L3T1F2bH98+Dt5lcNuq8qRgfDPrbNxV9DBtf5EYkIEItCO/YVhBL3pIe1zLezVKfw4r",
    "NkMohPKkZXUWc0fnno+MRbzWpyymo7zI/8d0PxyidYDZXux35GHMj+XWnCAouVrTlzafW2+55lWUTB1nDD19DBnvGW+c",
    "sk8Qw3RAE6D3c3v+Wt4U3C5eqwNTg/C1Ce96Qqqv1MebSO25YkYBQyEzDn9TCL7EM620OfRD7q0CDJnWH0KDQFs+antf",
    "eunJ6LhwK9yz2ZlZ+8oVYIAFJctGKX+rlbVB6c9mdO7aJXmp70y4PqoHQ0PwAr8v+d4LiH9SwSxEezB6eGYCbXiKQNnJ",
    "CWxIur2EKTkpuOVLnO7UKS07FAt8Scxs/tepxwDp95WOt8TA32bU2S5PbpBeMQMDd6Mi0p0ZfOMC9wGy1dxTn2EBS3a+",
    "kCQdfO6b0Urax8FVfHAZKrg6ebnxs5pXgX6hxKXsjMV/tS8J/e2NI51AmB3WFnAGBhrSS1ILCBFO8EcYB1lD9oeu8dTP",
    "6xC5Aa3PhXxBn5LXTw+AUTH3t7O+YC+tUJt7DFuFDZcDC0OPCbX7gvQzc3uOAgEygwnqW6VNHiA/O7/KdNFLDoYQ75d0",
    "oiOnQwUUbTR+a+5vqzxQbfpDGbkJyvsYMb4nxEew4U3ul+CUoRKNcnt/jUkk4XADXBCIvqM6M6Ur2Sz/GIe1n7ueQEGX",
    "gvF3BymgNoVMLH6A7lGQB6gPL+YsVq3ad8wvw9WLAVlg1iUtfmOijLx9ZHUpDLMc6NxeZGOt/TDPQMRJdXsAFNQjeia7",
    "qwnYdFsxpHCQPi9g128pS2NEwFSpJq8NP5P9NZMODvhAyLh93YZ3m6uSU6a9giHGzx2SS9nZgbmeqAiA1tYAE2orhbFA",
    "/lxEE3lgiRRw2zf3Qy4daSN+g9ucoDoIaXo5HodR69IfMfO9Evxm+RkVJ3IciVicb2PvllVN1Ejgo2yAiY5SsNN27VUX",
    "WJtVUJPMyeEpGz3O2SR/yzWsILKoNl0bUmMbrWmPMEUUrEyE4lMovflGbixnxYHMubbudjMw/oT24/B9EvEw9mkj9hxA",
    "puvNmRAEYuhT0uILyGA1jOBVMrpoS0s6lPgaodZj9zxyxwPlqnmoa5MmagTXovfyhMPyAjfKBN1St5V7jQjAEaveey6z",
    "8mo4cm/CpFCKbzMGy8rexW8MlfLBwUbKVYs04J9gtp28N54z26eaUewTOCw1KTjQECL68DZWiPDfTCgahxTgLXvZHSN+",
    "Dfslh1WbyVXF7GcNdZy3Li3ZWY2VybC2HG43901JEjBYyVBEJElZmbwj1QAz1xzDzImh0p9tLKKWIduUCxGIlwO2W3gE",
    "yzBIqldywQHr1cmdUCJ0Ad6S6b/cGbdR7XxsTmRmwmpomUzD0swB5hCDWujMTfUhyWvBzl1nyxOb7hsGFQ725xgwgUO3",
    "7tIy3i38O3XNmTR5d23jmWNbPnRbdh06ikAWusMa7IocEW0V83RveG77XePpxFSPE5dJEhsVEvU8MYRLiQDKmbQht+WF",
    "TSt1OiFWCuDX0KMZbcY5qOBRyQakDSP9x0/xt8bn3u8/Fk1aGK2TLh44zReg8f6P9uXx2JgyE3B3gOKMVUXUddMKtyjw",
    "CMkUZAB5S7NYgd/Lv54gpdxQmmvvUlvzqMTXOEYlfMn4nL9KPb0p/T8Qo7iMPtxfyu513YCgn8lTjgzlJlNf+64KX/Kb",
    "v0rL6VTYGhzW05uWDhxenf0PDX5hhCg+Ny82AkHbLpzlNg+M6xJmArcrUD6oATFAxHGnMNtZIdjFxX8tvKvRsba0MO9A",
    "Tfx3tTQuhCaSS3Vp17prqPddzyMZ1FRRLzLpvg1rP8E7TxA8gzY9Z+TNaQF5RBUN58r9j0zyYze0hgWed3KMd5bxDqON",
    "2g2j6UcCNj4HNwF5LLzIA/jb0fwaQg2yHYdOM/77/RrdFHgDIv852v0gZSQfvK7TOa4mQWFtifGS4C3qWgfhuaVv4bMg",
    "jYTG9+h6EdTeBun9et6wa8vuaY/yiP8FY8FQKdSjPm0tBhR+8/rd1gcEz8q7yXYJhNMR0HLWvoKBhKBoaTNOb/xwWNhH",
    "fKdUk9jbcpfavq2XZV1wafxVHpfp6+Z5fht8YbiE/uAEZtUG/iHVBnT3zTAlMU5vUCySVebVK/q69jfYlWNc25M+hEYD",
    "jjhsH5wlVYwVoth3c8cOvIXP4+jWh7KWrhK0xo9/sksLLx2eyGWgWaNSKALXG7/+VmjzwnGFQQcLVIM9f8zKcj+yKx8b",
    "bqeoFrzGUW9/REWtNMd7Ea35aXo/1dNFSA7/d+xJehTRjEeZtJ1OMHMjcRf5vfv9ApR09uuFFrTdsfhDkBVLXT81/KLd",
    "i+8mTcozyaeE5fd9LQrqXguPnxM8SwalWswZTzRVLa5+3GclA14KfX8I6q5zsWKXsLqWk3DQvNMps251vZAorLFI/64Y",
    "xXKnu1nLzBjgNaAUYSQl+Mw7+p2jakSjClMmD9KoyPIZxg/8nHs0EK6s8MVsTBjH2Vr7vfrl78BzSwZtqsOVfCW12+tW",
    "/DpRafKgzFHOmqUF1x35zHF9NzCxHxwZYu164WdcqlkEjLhzCvTKDKlZeHcWSjP5bB7dTQ4aO5zq3uc8Doq+IadBzkdX",
    "2eY61fPjQ/NU+GOiIvGCg4dtJrLv3pm+kUpFt/KKkNBOrMD8N4LKV9LcGoCQi3JmuWsM1bUnNTiRs5ylGFoehqaUTvyU",
    "0WWiFFp2/DZJumR6kMsM4NS4NXlrJa9ahX82tIBaXTcuB7DWTXHiL+PnEe1LV3OboaWRUPHYOKX+zTI7pozXFu3ny8Cd",
    "rcHc5jXc/4iBrOuQg0EzWyZGX7TN1bP1JX6XC+3Pl0uNV1sMFJ6FWZtuNCh6PaFkWg5mDU5xp+GmMXLGtuZiS2dfuOdT",
    "/JcOwl86OLTGqsmvum2BSzNXcDT0Dhz0r12yDPY0Rl76q9Z++xc0LJzZZ5gOOPxzoaETqaxl1YOi9VimNweZkI7a2fIh",
    "YoQwMxG3yek9Ih9UBxKZyHnpaiuI0GKIQjZso2P/XYffZFIr01r5UEhvM6vJ4sTAT8jCrpuFZmqMUl0/gO2IoTmPbLRL",
    "tv0oR+lmdRa/0v2AgJmWX9uWbEb1ifAIqempC5Mi87GqQlvAEKnNtoRIeH5b3zCqdF9n0MAzbuAQ6oodyqghOW0gLj2m",
    "aBfvgxnGANjTJg7PEtz7wFdAbOUMnnD/nla5+H25pIK0Bt8jfXVOWmu7n496kQzp3zipozlmHWhQdzt7CW1vtrx5odTT",
    "JljpvAWVXDOSICDWRGvqyVJdCVbp1vSW9kUIXgcb4Or43iRv/noWGbjluab66sR5HDJ/yX3S1I1si4MMiMJ1YY3CsSzo",
    "uebaArSOE4vvBKuVZZ4+3AxKrbeNVsF7VnOji0br8/VpOcuCphXT+o5591NY6s70jPxbf1zuTPSo+A1fE8PbnXZfvMKE",
    "tnY4+w8dGWaDii1Vbnat/2dF3wSRSDuiIbp3Ti8yW3Dsm6ZYzj1vWmOSZ8DC292hXsW6yh/dxk1wEYwP0OgImeiOJplN",
    "+aqkBrPJWyXnDQOQvD/UoXofaY6BxlG1U77uOnfJVFgKhUq6kHMO3xv1tZ98KsE13obLFUUSCPAwG+Ets4SfSVPyBGNR",
    "/7/WpYpbLku7qnjqHKSRadyiFYp5kOdOQcXNwHkrnHLrBdAZ7EPxvk8yTJfHWA5Hoasb1vyhl+fHYLFDCg/O00XbD0pO",
    "z1jiRCojMDrUD9eNJ1XEYM2nwfWauTGkrpgC3QVmt/mGmwwTOEXBLmig+hjGcSmHWveCyGmyG0YTbkmI7nzukKJ0y3OL",
    "9S9Pg69tJJ7C/4w6yXNzA9ckSlQ3+zriOshCM8l8NQ3KgR3HdtIdtUI/NXQCc6+kLF5Ug7AWmrC0apm/EN/fIC4TAyfw",
    "wMJAc02hqKummKciWjppc1Fw1XLL+YlkR6KLQByRV+IDnejJfgCg1+1KUivwnAueO1Nbw5QSLeELzwkZ8d9tfW9Dp74p",
    "eBF1e9JnSMq3452VHsZvjftcPYmaDWzm2hCCD1fBIGqeYjMyq3TkQmhJQdPh1Ki22bVJvyEButHbFyjbnZZoD5juSYNz",
    "TjdKoXEM/2Bj8yNVuagsR42Ox4uSrgaNoLgrDiX6OY9bWIgvrzdPzvrt6/ZoAtzcwguTdQ4MGBc07gLZSPwKKnvRA39w",
    "vOiACZjjQRSZd7bODwfn1kKUelQMrCLlF2/DHk9VQ3D2+rej1kj5YXk8WCL4hJ4/tRQXP7AKHC2gvLLJd8YcdDSG44hX",
    "lTr0HVeBJOYj1M6CeEoRzkGY4WuOv8oZtCCtVaGYV0zJykva+fGLMv2k8EuvhH5AcZomX1d68Ppd7psx9OWGERvHBWsV",
    "1+kSc0ypGyVABmu0JzZl+uZFF8KwfEPgwKT7AwZQkN9zO5Ka4d0BG/oHQB8xrz4cZrryP0AMyy7QoROIVR27n1MrCbnz",
    "giFq7WMlo76qaBObRIUvSIPIYwXsDZTyEbrWJUmQkURKfYzGRhZzfdpC1o8IqjpaqpwgFsjinqh60lKKB4k76Aq0rzdp",
    "W6pyoFsT4aYaepEQLIIQNaKBH/GzloEl4hkvJLuzHEur4QFW+sMeoZXT/8/G7dIo6IzeSS8H4K4ouzyTbk54bzNUzKPB",
    "SEXS6gj2gCZIoM2ourEI1CTiIJmfS9QAl1qiEw+T9gD3u4Z65fLM8FxRnx3Zv4OT5mm6nm4fRk02CC7Og6vlRcT4eLPq",
    "yVHSntmtCNcTxHF/RmJGG6kQYRHmlNmSFHKPX3NUMTFLKQhHPH5nruNW3Hhid4yoiJsD4xcOrQcVIo58Mtw9tO6lEwcA",
    "mSYT/uVPvjpXuf05q0sG0sVF8BPEERCy9+U1HeNxqBR96oX7qXQ5wfuOligmMtdLOCMUe9Fg6s6rAHejVwZOKgFVmudZ",
    "djC/KTRs2SNv5r4YWNehlFvYzcsmfrjaoqhmaM71HY6mEf/2BXAbhkxdpLwACymLqAxidXm0wTLXCnbsm5m0EfUK9+o3",
    "VQRZ2bdimjbDbcZPSfEhq9/95f+r4HFnohKXhhfLLV1+eBqdE3bNmbsZ/epytGWI7F9chEnCdXVt/WxxeeOH1mKlNtUa",
    "1B7gf+b9FMc/rDWqIEzk0HH+gxaecL2E+J2hmXXE/f1bzf+fh/LGp1aNAs/tQqSCV/MhCZhubL/waI5WCZBsdiKoqmF5",
    "oM09V2vupyy9poTksTXCeiTN0WHlMwbmQOVcYVjZ0udGv65ylzHCDlnlBFXyuGiqZWNcSk9abuTXOfsxXLhNUoK1l/Yi",
    "vFlLhHHbx9eXBBGegGpEP1r+RreQYk8aGplj357mpUXbRlYbWKCZT+HFJ/s7t8BmAr5CE5m0Gp1UlDEI9wQIAeqKeirW",
    "AaQQBoZQevTz/gfHhNQ3FMLPxZg4R0D2R9tT16bMsYPbYRUXbyQbREQACu+Fj4qsQXQaVXkYOqOvdaQa7xOjbYzBbtqx",
    "AsKGZ9MO6pSBk850524aMu9gOwlMtKK6HGRZKH47HPxDA3lECFCbkG/KtdW+uqBkUx0v4cGPaDhiHS21l8Mlyj/K//W4",
    "aPNcN/c96lt4Q54Z5R07brBu7xNQd7/+TFs1R+eRMXkFFdAjExJrCAqg5FK8oASHKcXcteLIgagOSP9MNiJUBkM5hJaX",
    "/dKtwFxAiMlbMva+TBye1tyNrpZ7lMAX0AZqbkRyG7KDlzqu56ZgyoGKbj3dk2z0CCLrlsa4nzZ3Xh+sxnAzsTeHfbD2",
    "kcHxYEQkxlkGbXahPVpHdxG3Xq2Bnp/hRqvT/HqiqACU4KHKUQ/Hzq/DXuQYjiuEXlDK35SbJz4HV8exJZ9uANZ1+Bb3",
    "/yXSz8akDLNFYwtWbHk6zeIbV2PsZ2+YVV68XkEH6FSYIwCw1/2GrLlYErNgGUErSEmcj37/JBgy7U8cBnoKr1f5nNVA",
    "5QE9uIirvcd9+j16T/620T/01aSGnSHvLeXBnkD7B+OCpyS/pNNI8dCXeQv5FYeUvTwqpCXZ9pS69ELxuMUGwrzv5eJv",
    "bvBFdjsU1ogm5HhKNOm9CAqGPTtO1J75uO2qZL2ikm8o+W0XjewIfmRfN0L9IPvw/fooziNV8LtejWoCMRnz+laIrCmm",
    "+yO/FGh8VgRYESz4cbWILzaFBn5rgTNNCvTcjZ6vnsSGSPKjdib3JFLjZB4ZKJvKxgQPyWOJgzgx8zYErEwetJ9hq2Yy",
    "S4nnS0gXUQysVMHqP1ADmstLe9XhZ8Z4VjUbFAu4fjj9o/k0/hwCTjR4g5U6vFTyVIFWBt7B1mcxVXWYXEy0SMdkpP+s",
    "t21FDP5McclNo3u2nj9+x5gWctXT819QkoMMqADV2oNNEfd5z8LI+HZ23M+iEcf3MhZl6rmD34EfXcGH4UJBadXxjSh4",
    "LxJLcxbQGMOxAD9RT3GdWYutQtqYSGlRo9snz2+vfDZvMcY5DBpHVy0MVPyzQhU3gSbWvWvc3H6RTVvUU0mpB7wARyut",
    "iKAvm+rSZdVmpNAmyr9qMbZ2UbDc8DGumNLoSiS1yZ7qU55S9jiiIzhov5UNLP5ApWRBbzIh1MgVABIOlS887sjbt9Hg",
    "RBd1/etWVxGj7O+6Ew66VHUCLZYU9m9Jp6wf95rjoZ3f2EXBGEDwcPypi6bfQ5VqjMB7qx3qayuNoXs4cGroIVi4KXaL",
    "tX4QJezhwfQ1iC1VurwxSnVu5+1B8gmqV0bfhp/GaIpQZdht0bQVI7ZYPahzdoe8OyXi1wQ60hDmvqIKriH4RioRPvPQ",
    "hDkAwXacUfQ1CPqhCRiwFLFXD9pTOtpaVS2Dac+yVzdCcZGJfeqFZY/pscqZtx0roYWt56237xiTOFGCg/DxG+CiZr2U",
    "AUS3vE5fdQj8BdE1ihoI71dm/XdIYakkbBlHDNmlvfR+ITytb9vPjWVUmgwwX4+0fYzSd9zIbtCE78HNIJrxJa0a2Gn7",
    "Pv/utDZd47IY+UnH3XWk1VaP4EellNwNtx7NM1eMO6V72nwVOXNHQJ0ulo+8z0IufLEKE47KyENxCKZqPOcJZgOTqcoB",
    "E8NBE881MwcdqXnykUK4Sqsq/bhnaf/GcL6gWnPKvUUfaRo1jb5cb2NdRwxJ0+DxkAO592sIdrhn4fc/i7Ssl4KzXIni",
    "2KIq+3jOkm6ETCgKg+zMy7GY5gJTWhnlcWMR6BWkW+TLBTdcLAiJqTL82/XEnpK21hTHYzkdGPm2dGNOrB7ZO9HCYzMm",
    "zpLU0lYeTdikme6xbGSxTZWPCGMOFLzKtd+3tsD7kFsea4R/fCDaNd4l1ACFMhZwYILn7gC2h3rQ5CVMd/FWdsGs854b",
    "zm99ivby/l3nZU7NCJaCBCdQ2ICSKMgqHJdf77rXlG6f6v+E7FaFqzMCvx0ba2a0UTdRfkLrh/rtIGsxJaMubQblGpUP",
    "yDm37n4oaGn7wb/Ve0wgpYsEBnynaeEGTCfybSvY2n9VGYNUmWUczMj6bzm+tJ2AMZMMgzzuxN+r1v4LS5mQA/K/VpLf",
    "4IZglj3nHf1/dQIaMaRCaK7sKCX5/igMaG/3GDaFnRYsgebEkbZG8TTCeZHQ/bQRvqvUjZM2dQRY9gizRUP+u0E6ije/",
    "ETwf/II08yZHUjHVedOZ6g+SUg7g/axQcpHY3OZ3xHU8ArUFEv08klfmZEzibTL/7POIenulYWwzq5gQoy+zSW0sQqVr",
    "1cb1qB823nxYtMwoR6M+l0DfzrgOe2aaF7++heZJW6hAiARmfNhgIN/OMzjS4PoTZGx341jcelsgPZS7gVR5vzur/EcH",
    "uKn0wVYhk81mPdz+4mB/f+wo+4z3DjuD9TpYe/XQQnRYT+1OCV+CvEqfmp9ZOe0MrjhzTeKfK/7pbgM3S3MQyfoc6w/2",
    "KrvBrq9WaBVPXhQLgUIpsqZkkDLmKZv9sey6UygVZ7/m13Q0qGoDipONIq6HFEA+h7XtMJ+afsTfcEpv/p1CwsMGbrBl",
    "Ke+lvA/DOCOMm8P87IVSiIYnyfKty/HHD+7Ja/IGx7SEuAiedEBU9Q+SwcalFDQy1hEUF2sgUF5JJdxeMsKJpAgJEKfk",
    "2loncXbL0ObRgR6PSrGs+07BYQbIl0qov8q2l1izCrX0qCKwRf9GaqMY46vnU4chrGvJVGcbRm4mUfMgbqQw5+yKywZU",
    "J2RNhmZb5EYsDomvBDEcgril1TcdWMN2FWcb8+vCE0J2PXaYNM4CfpVYySmtuDJhRhzRW2WKybdbKPfXwetKtC1Gm+x3",
    "wy6gskCdC1iA3WtodkHpMj8wmBVs6jSzNS2Rc3Y2vYX5AEVTDeOkWjCUQUsS0smExrIG345gneGdg1J4U/7EJ0NLPOFh",
    "6PVoDNmzUR+tk2oXQOScnf2Sm/7kwBnwBqbm854/JzFWfslqEIXAMuuqpcPD1yuzuJ93E3887X5wHlFLHWtobrfzWesD",
    "STZaOrFDw6LigULjUOTTCUSPR+hd36YQhy6GikqikE/4MPrQ7A67dN2sQaZhR7+thxsmnxvxAwtYvrwfLS92rWFtqcr7",
    "1n4LqVP63mmCpEsc2/wCj3EjgbfknNQ/kx5TWSiWHLn/HKPaoD0ku207fh29RJH5AO+p2RBWERPrVHY20bMvK+TLJjEm",
    "2Hx6Vr6UVLll+UQgDaw10ILuZKKKqAiRocUHfWf7dCt4YM/s86FVrN2L1ZSpexltaCBxBiZ6cOgGTB0bwgzgsZjz4doN",
    "DAa1Ay46RDZ8NgL0WX5tnHx1hvPqQsWm4jO+hmG+ms7t1Bxw9aydeHn90O601WkU/dYJTaSYo0M5LXi80idoz7Ve1cOS",
    "gsVo29vd2ztL0CI+Q8uuoQt7Do3hMJO6Xfx4gt3WfAByPQHSbEJAKHpYxx0pAXSVemS4vxWeg9Mpvk8MjpETsxz5rSJ9",
    "z00cywblSnkpR5Y4RXreLMDgZlnHzOLGkJHKtQz5iIFkyCXAbRJ/kOMriivfqy9L2npNyXrBxLsKLWDaq7mYLKQoAurB",
    "7rOeq71Iu7L5/eV6Wg0JQ8WprQJGNw/PwbwdmvqlDLnG6iGSsmV5IshDA33/EmVcbzB96fP3EBH6tWT6TTrQ3YWVQa/p",
    "5H6uFPJqABN3BzGnY1APgzQrkdK65Hyru0y1v90AynBbuN/0LxcAIr0AAAAAiUUZljDEDVcAAf05gMAHAFGy3/WxxGf7",
    "AgAAAAAEWVo=",
]
