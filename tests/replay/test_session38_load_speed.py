"""``load`` reads a save holding episodes with infos batched but for them.

Before, one such episode made ``read_stored`` give up after opening and verifying the whole
dataset, and ``load`` read it again, every episode one by one (about 0.4 ms each, against
about 33 us batched). Simple ``custom_data`` (a runner's ``{"env_index": i}``) is batched
too since 2026-12-06: such pieces are read with the plain ones. Now the plain pieces are
gathered from the shard's columns and only the others are read as episodes and prepared as
``add`` prepares them, in their place. These tests
pin that the loaded buffer is the one the episode by episode path gives (``get_state``:
columns, infos, ids, order, counters, priorities, generator state), for random buffers of
both kinds with odd episodes anywhere, in one or many shards, saved batched or (as before
2026-12-05) one by one; that such a load reads no more than the odd pieces one by one; and
that damage is refused with the error the episode by episode path raises.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.io import read_episodes
from episodes.replay import (
    EpisodeReplayBuffer,
    PrioritizedEpisodeReplayBuffer,
    loaded_shards,
    persistence,
    saved_shards,
)
from tests.replay.test_session36_save_review import forge
from tests.replay.test_session36_save_speed import same, slow_load, slow_save

_INFOS = [{"k": 1}, {"a": [1, 2], "b": None}, 0, "", [3, 4], {"nested": {"x": 1.5}}]


def build(seed: int, prioritized: bool, odd: float) -> EpisodeReplayBuffer:
    """A buffer grown by random adds (evictions, continuing chunks): ``odd`` of its chunks
    carry infos (some only on their last observation), ``custom_data`` or an agent id."""
    rng = np.random.default_rng(seed)
    extras = [k for k in ("logp", "vf") if rng.random() < 0.5]
    capacity = int(rng.integers(8, 60))
    space = gym.spaces.Box(-9, 9, (3,), np.float32) if rng.random() < 0.3 else None
    kind = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    buf = kind(capacity, seed=seed)
    running: dict[Any, tuple[int, Any]] = {}
    fresh = 0
    for _ in range(int(rng.integers(1, 12))):
        chunks = []
        for _ in range(int(rng.integers(1, 5))):
            if running and rng.random() < 0.3:
                id_ = list(running)[int(rng.integers(len(running)))]
                t0, first = running.pop(id_)
            else:
                id_, fresh = f"e{fresh}", fresh + 1
                t0, first = int(rng.integers(0, 3)), rng.uniform(-5, 5, 3).astype(np.float32)
            n = int(rng.integers(1, 5))
            observations = [first] + [rng.uniform(-5, 5, 3).astype(np.float32) for _ in range(n)]
            infos = None
            if rng.random() < odd:
                infos = [{} for _ in range(n + 1)]
                for ts in rng.choice(n + 1, int(rng.integers(1, n + 2)), replace=False):
                    infos[int(ts)] = _INFOS[int(rng.integers(len(_INFOS)))]
            terminated = bool(rng.random() < 0.3)
            ep = SingleAgentEpisode(
                id_,
                observations=observations,
                observation_space=space,
                actions=list(rng.integers(0, 3, n)),
                rewards=list(rng.normal(size=n).astype(np.float32)),
                infos=infos,
                extra_model_outputs={k: list(rng.normal(size=n)) for k in extras},
                t_started=t0,
                terminated=terminated,
                len_lookback_buffer=0,
                agent_id="ag" if rng.random() < odd / 3 else None,
            )
            if rng.random() < odd / 2:
                ep.custom_data["seed"] = int(rng.integers(100))
            if not terminated:
                running[id_] = (t0 + n, observations[-1])
            chunks.append(ep.to_numpy() if rng.random() < 0.5 else ep)
        buf.add(chunks, on_evicted="restart")
        if prioritized and buf.get_num_timesteps():
            items = np.concatenate([buf.get_episode_indices(i) for i in buf.get_episode_ids()])
            buf.update_priorities(rng.uniform(0.01, 5.0, len(items)), items)
    return buf


def per_episode(path: Path, kind: type) -> Any:
    """The buffer ``_load_episodes`` made of the save's episodes read and added one by one."""
    meta = json.loads((path / "replay.json").read_text())
    settings = {"alpha": meta["alpha"]} if "alpha" in meta else {}
    buf = kind(meta["capacity"], batch_size_B=meta["batch_size_B"], **settings)
    buf.add(list(read_episodes(path / "episodes", numpy=True, verify=True)))
    return buf


def compare_states(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Two states equal: arrays with numpy (dtype, shape, bits), infos and the rest by value."""
    assert same(a, b), "states differ"
    for key in ("obs", "actions", "rewards"):
        np.testing.assert_array_equal(a["steps"][key], b["steps"][key])
    assert list(a["steps"]["infos"]) == list(b["steps"]["infos"])
    assert a["episodes"]["final_info"] == b["episodes"]["final_info"]


def saved(buf: Any, path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    if how == "one by one":  # as every save before 2026-12-05
        slow_save(monkeypatch, buf, path)
        return
    with monkeypatch.context() as m:
        if how != "one shard":  # a shard per episode or run, or a few episodes each
            m.setattr(saved_shards, "DEFAULT_SHARD_BYTES", 1 if how == "tiny shards" else 2500)
        buf.save(path)


# ------------------------------------------------------------------------------- property
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 10**6),
    prioritized=st.booleans(),
    odd=st.sampled_from([0.0, 0.1, 0.4, 1.0]),
    how=st.sampled_from(["one shard", "tiny shards", "small shards", "one by one"]),
)
def test_mixed_saves_load_as_the_episodes_added(
    seed, prioritized, odd, how, tmp_path_factory, monkeypatch
):
    buf = build(seed, prioritized, odd)
    path = tmp_path_factory.mktemp("s") / "b"
    saved(buf, path, monkeypatch, how)
    assert loaded_shards.read_stored(path / "episodes") is not None  # no episode by episode
    back = type(buf).load(path)
    slow = slow_load(monkeypatch, path, type(buf))
    compare_states(back.get_state(), slow.get_state())
    assert same(back.rng.bit_generator.state, buf.rng.bit_generator.state)
    assert back.get_counters() == buf.get_counters()
    assert back.get_episodes() == buf.get_episodes()
    assert (back._store.capacity, back._store.size) == (slow._store.capacity, slow._store.size)
    # The stored episodes as _load_episodes adds them, before counters and priorities.
    fresh = type(buf)(buf.capacity, batch_size_B=buf.batch_size_B, **(
        {"alpha": buf.alpha} if prioritized else {}))  # fmt: skip
    loaded_shards.read_stored(path / "episodes").restore(fresh)
    added = per_episode(path, type(buf))
    state, want = fresh.get_state(), added.get_state()
    for key in ("rng",):  # fresh generators of their own (load sets the saved one)
        state.pop(key), want.pop(key)
    compare_states(state, want)
    if back.get_num_timesteps():
        assert same(back.sample(4, n_step=2, gamma=0.9), slow.sample(4, n_step=2, gamma=0.9))


# --------------------------------------------------------------- the odd pieces only read
def plain_buffer(kind: type, count: int, odd_at: list[int], what: str = "infos") -> Any:
    """Episodes without infos or custom_data, but those at ``odd_at`` (``what`` they hold).

    Simple ``custom_data`` is batched as plain since 2026-12-06; infos make an episode odd.
    """
    episodes = [
        SingleAgentEpisode(
            f"e{i}", observations=np.arange(5, dtype=np.float32) + i, actions=[0, 1, 0, 1],
            rewards=[1.0, 0.5, 0.0, 2.0], len_lookback_buffer=0,
            infos=[{"i": i}, {}, {}, {}, {"end": 1}] if what == "infos" and i in odd_at else None,
        )
        for i in range(count)
    ]  # fmt: skip
    for i in odd_at:
        if what == "custom_data":
            episodes[i].custom_data["i"] = i
        elif what == "agent_id":  # no str: the decoder's to read
            fields = {**episodes[i].field_values(), "agent_id": 7}
            episodes[i] = SingleAgentEpisode.from_fields(fields)
    buf = kind(10_000, seed=1)
    buf.add(episodes)
    return buf


@pytest.mark.parametrize("kind", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("what", ["infos", "custom_data", "agent_id"])
@pytest.mark.parametrize("odd_at", [[0], [20], [39], [0, 1, 2], list(range(40))])
def test_an_episode_with_infos_is_the_only_one_read(kind, what, odd_at, tmp_path, monkeypatch):
    buf = plain_buffer(kind, 40, odd_at, what)
    buf.save(tmp_path / "b")
    decoded = []
    decode = loaded_shards.decode_rows

    def counted(entry: Any, *args: Any, **kwargs: Any) -> Any:
        decoded.append(entry["meta"]["id"])
        return decode(entry, *args, **kwargs)

    def no_episode(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the save read again episode by episode")

    with monkeypatch.context() as m:
        m.setattr(loaded_shards, "decode_rows", counted)
        m.setattr(persistence, "read_episodes", no_episode)
        back = kind.load(tmp_path / "b")
    odd = [] if what == "custom_data" else [f"e{i}" for i in odd_at]  # custom_data: plain
    model = [] if len(odd) == 40 else [next(f"e{i}" for i in range(40) if f"e{i}" not in odd)]
    assert sorted(decoded) == sorted(odd + model)  # the odd ones, and the model piece
    assert back.get_episodes() == buf.get_episodes()
    compare_states(back.get_state(), slow_load(monkeypatch, tmp_path / "b", kind).get_state())


# ---------------------------------------------------------------------------------- damage
def outcome(load: Any, path: Path) -> Any:
    try:
        return ("loaded", load(path).get_state()["episodes"]["ids"])
    except Exception as err:  # noqa: BLE001 - the refusal itself is compared
        return (type(err), str(err))


def truncate_data(path: Path) -> None:
    data = next((path / "episodes" / "shards").glob("*.arrow"))
    data.write_bytes(data.read_bytes()[:-100])


def flip_index_byte(path: Path) -> None:
    index = next((path / "episodes" / "shards").glob("*.json"))
    raw = bytearray(index.read_bytes())
    raw[len(raw) // 3] ^= 0x01
    index.write_bytes(bytes(raw))


def flip_data_byte(path: Path) -> None:
    data = next((path / "episodes" / "shards").glob("*.arrow"))
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    data.write_bytes(bytes(raw))


def broken_infos_json(path: Path) -> None:
    """The odd piece's first info no JSON, every checksum made again (a forger's edit)."""

    def change(table: pa.Table) -> pa.Table:
        infos = table.column("infos").combine_chunks().to_pylist()
        infos[infos.index('{"i": 20}')] = '{"i": '
        at = table.schema.get_field_index("infos")
        return table.set_column(at, "infos", pa.array(infos, pa.large_string()))

    forge(path, lambda index: None, change)


def odd_piece_with_custom_data(path: Path) -> None:
    """The odd piece's entry given a ``custom_data`` no dict (every checksum made again)."""

    def change(index: dict[str, Any]) -> None:
        entry = next(e for e in index["episodes"] if e["meta"]["id"] == "e20")
        entry["meta"]["custom_data"] = [1]

    forge(path, change)


@pytest.mark.parametrize(
    "damage",
    [truncate_data, flip_index_byte, flip_data_byte, broken_infos_json, odd_piece_with_custom_data],
)
def test_damaged_mixed_saves_are_refused_as_before(damage, tmp_path, monkeypatch):
    buf = plain_buffer(EpisodeReplayBuffer, 40, [20])
    buf.save(tmp_path / "b")
    damage(tmp_path / "b")
    fast = outcome(EpisodeReplayBuffer.load, tmp_path / "b")
    slow = outcome(lambda p: slow_load(monkeypatch, p), tmp_path / "b")
    assert fast == slow
    assert fast[0] != "loaded"
