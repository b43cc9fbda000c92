"""Refusals around the session-54 review fixes: shapes, ids, and torch where it is missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import EpisodeWriter, load_episodes
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from tests.replay._nested import same_state
from tests.test_session54_notorch import run_without

CLASSES = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]
OBS, ACT, REW = np.zeros((2, 4, 1)), np.zeros((2, 3), np.int64), np.ones((2, 3))

SHAPES = [
    # rewards are one float per step: exactly [B, H], said so (not "[B, H, ...]")
    ("rewards-B", {"rewards": np.ones((3, 3))}, r"^rewards: expected shape \[B, H\] = \[2, 3\] "),
    ("rewards-vector", {"rewards": np.ones((2, 3, 1))}, r"^rewards: expected shape \[B, H\] ="),
    ("rewards-scalar", {"rewards": 1.0}, r"^rewards: expected shape \[B, H\] = .*got \(\)$"),
    ("actions-scalar", {"actions": np.int64(0)}, r"^actions: expected shape \[B, H, \.\.\.\]"),
    ("obs-python-float", {"observations": 0.5}, r"^observations: expected shape \[B, H \+ 1"),
    (
        "extras-scalar",
        {"extra_model_outputs": {"v": np.float32(1)}},
        r"^extra_model_outputs\['v'\]: expected shape",
    ),
]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize(("change", "words"), [c[1:] for c in SHAPES], ids=[c[0] for c in SHAPES])
def test_shapes_are_refused_as_shapes(cls: Any, change: dict[str, Any], words: str) -> None:
    buf = cls(20, seed=0)
    buf.add_rollouts(OBS, ACT, REW, ids=["kept0", "kept1"])
    before = buf.get_state()
    args = {"observations": OBS, "actions": ACT, "rewards": REW, **change}
    with pytest.raises(ValueError, match=words):
        buf.add_rollouts(**args)
    same_state(buf.get_state(), before)


def test_non_numeric_scalars_keep_their_dtype_refusal() -> None:
    buf = EpisodeReplayBuffer(20, seed=0)
    with pytest.raises(TypeError, match="^observations: replay stores numeric arrays only"):
        buf.add_rollouts(np.array("x"), ACT, REW)
    assert len(buf) == 0


IDS = [
    ("set", {"a", "b"}, r"^ids: .*a set has no order"),
    ("frozenset", frozenset({1, 2}), r"^ids: .*a set has no order"),
    # a 0-d str array's tolist() is one str: it must not be split into ids "a", "b"
    ("0-d-array", np.array("ab"), r"^ids: expected a sequence"),
]


@pytest.mark.parametrize(("ids", "words"), [c[1:] for c in IDS], ids=[c[0] for c in IDS])
def test_unordered_or_scalar_ids_are_refused(ids: Any, words: str) -> None:
    buf = EpisodeReplayBuffer(20, seed=0)
    with pytest.raises(TypeError, match=words):
        buf.add_rollouts(OBS, ACT, REW, ids=ids)
    assert len(buf) == 0 and buf.get_episodes() == []


def test_ordered_ids_of_a_dict_are_taken_in_order() -> None:
    buf = EpisodeReplayBuffer(20, seed=0)
    assert buf.add_rollouts(OBS, ACT, REW, ids={"z": 0, "a": 1}.keys()) == ["z", "a"]


@pytest.mark.parametrize("capacity", [2**63 - 1, 2**63, 2**64, 10**30])
def test_huge_capacity_keeps_every_rollout(capacity: int) -> None:
    buf = EpisodeReplayBuffer(capacity, seed=0)
    for k in range(3):
        buf.add_rollouts(OBS, ACT, REW, ids=[f"a{k}", f"b{k}"])
    assert buf.get_num_episodes() == 6 and buf.get_num_timesteps() == 18


def test_a_zero_d_tensor_of_ids_is_refused_by_name(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    with EpisodeWriter(tmp_path / "d") as w:
        w.write(SingleAgentEpisode(3, observations=[0]))
    with pytest.raises(TypeError, match=r"ids must be a collection of ids, .*pass \[3\]"):
        load_episodes(tmp_path / "d", torch.tensor(3))
    assert [e.id_ for e in load_episodes(tmp_path / "d", torch.tensor([3]).tolist())] == [3]


@pytest.mark.parametrize(
    "call",
    [
        "buf.sample(1, device='cpu')",
        "buf.get_transitions([0], device='cpu')",
        "to_device({'obs': np.zeros(2)}, 'cpu')",
    ],
)
def test_device_without_torch_is_an_import_error_naming_device(call: str) -> None:
    done = run_without(f"""
        import numpy as np
        from episodes.replay import EpisodeReplayBuffer
        from episodes.replay.sampling import to_device
        buf = EpisodeReplayBuffer(capacity=10)
        buf.add_rollouts(np.zeros((1, 3)), np.zeros((1, 2)), np.ones((1, 2)), ids=["a"])
        before = buf.get_counters()
        try:
            {call}
        except ImportError as error:
            assert type(error) is ImportError and error.name == "torch", repr(error)
            print(error)
        assert buf.get_counters() == before and len(buf) == 2
        """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("device='cpu' needs torch"), done.stdout
    assert "pip install torch" in done.stdout and "leave device out" in done.stdout
