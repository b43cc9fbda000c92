"""``sample(device=...)`` batches: the numpy batch's columns as tensors, owned by the batch.

The CPU conversion puts the sample's own gathered arrays in tensors without ``Tensor.to``
(a no-op there, or a copy of arrays nobody else holds); other devices still get ``.to``. Every
column must equal the numpy batch drawn from the same generator state, and editing a tensor in
place must leave the buffer as it was.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer, sampling
from tests.replay._episodes import chunk, make_episode_data

torch = pytest.importorskip("torch")

MODES: list[tuple[str, dict[str, Any]]] = [
    ("one step", {}),
    ("n3", {"n_step": 3, "gamma": 0.9}),
    ("n-step range", {"n_step": (1, 5), "gamma": 0.5}),
    ("infos and extras", {"n_step": 2, "include_infos": True, "include_extra_model_outputs": True}),
    ("sequences", {"batch_length_T": 4}),
    (
        "sequences lookback pad",
        {
            "batch_length_T": 5,
            "lookback": 2,
            "pad": True,
            "include_infos": True,
            "include_extra_model_outputs": True,
        },
    ),
]


def filled(kind: type) -> Any:
    """Chunks of terminated, truncated and ongoing episodes, some split, added one by one."""
    buf = kind(60, seed=3)
    for index, (length, end) in enumerate([(7, "t"), (3, "u"), (9, ""), (2, "t"), (6, "u")]):
        data = make_episode_data(index, length)
        cut = length // 2 or length
        for a, b in [(0, cut), (cut, length)] if cut < length else [(0, length)]:
            last = b == length
            buf.add(
                chunk(
                    f"e{index}",
                    data,
                    a,
                    b,
                    terminated=last and end == "t",
                    truncated=last and end == "u",
                )
            )
    if isinstance(buf, PrioritizedEpisodeReplayBuffer):
        items = np.arange(buf.get_num_timesteps())
        buf.update_priorities(np.linspace(0.5, 4.0, len(items)), items)
    return buf


def draw(buf: Any, kwargs: dict[str, Any], state: dict[str, Any], device: Any = None) -> Any:
    buf.rng.bit_generator.state = copy.deepcopy(state)
    if device is not None:
        kwargs = {**kwargs, "device": device}
    return buf.sample(16, **kwargs)


def held_arrays(buf: Any) -> list[np.ndarray]:
    """Every numpy array the buffer keeps (columns, links, tables, the priority tree)."""
    found: list[np.ndarray] = []

    def visit(value: Any, depth: int = 0) -> None:
        if isinstance(value, np.ndarray):
            found.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item, depth + 1)
        elif depth < 5 and (hasattr(value, "__dict__") or hasattr(value, "__slots__")):
            names = list(getattr(value, "__dict__", {})) + list(getattr(value, "__slots__", ()))
            for name in names:
                if hasattr(value, name):
                    visit(getattr(value, name), depth + 1)

    visit(buf)
    return found


CASES = [
    (kind, name, kwargs, beta)
    for kind, betas in [(EpisodeReplayBuffer, [None]), (PrioritizedEpisodeReplayBuffer, [0.0, 0.6])]
    for name, kwargs in MODES
    for beta in betas
    if not (beta and "batch_length_T" in kwargs)
]


@pytest.mark.parametrize("device", ["cpu", "cpu:0"])
@pytest.mark.parametrize(
    "kind,name,kwargs,beta", CASES, ids=[f"{c[0].__name__}-{c[1]}-{c[3]}" for c in CASES]
)
def test_device_batch_equals_numpy_and_owns_its_memory(
    kind: type, name: str, kwargs: dict[str, Any], beta: float | None, device: str
) -> None:
    buf = filled(kind)
    if beta is not None:
        kwargs = {**kwargs, "beta": beta}
    state = copy.deepcopy(buf.rng.bit_generator.state)
    before = copy.deepcopy(buf)
    expected = draw(buf, kwargs, state)
    got = draw(buf, kwargs, state, device)
    assert list(got) == list(expected)
    held = held_arrays(buf)
    store = buf._store  # the walk found the buffer's columns
    for column in [store.obs.data, store.extras["logp"].data, store.uid, store.rewards]:
        assert any(array is column for array in held)
    for key, want in expected.items():
        value = got[key]
        if want.dtype == object:  # infos stay numpy object arrays
            assert isinstance(value, np.ndarray) and value.dtype == object, key
            assert value.tolist() == want.tolist(), key
            continue
        assert isinstance(value, torch.Tensor), key
        assert value.device == torch.device("cpu") and value.is_contiguous(), key
        assert value.dtype == torch.from_numpy(want).dtype, key
        assert np.array_equal(value.numpy(), want, equal_nan=want.dtype.kind == "f"), key
        assert not any(np.may_share_memory(value.numpy(), array) for array in held), key
    for value in got.values():  # every tensor edited in place: the buffer must not see it
        if isinstance(value, torch.Tensor):
            if value.dtype == torch.bool:
                value.logical_not_()
            else:
                value.add_(7)
    again, fresh = draw(buf, kwargs, state), draw(before, kwargs, state)
    for key, want in expected.items():
        assert again[key].tolist() == fresh[key].tolist() == want.tolist(), key
    if "batch_length_T" not in kwargs:
        indices = expected["indices"]
        now = buf.get_transitions(indices, include_infos=True, include_extra_model_outputs=True)
        then = before.get_transitions(indices, include_infos=True, include_extra_model_outputs=True)
        for key in then:
            assert now[key].tolist() == then[key].tolist(), key


def spy_on_to(monkeypatch: pytest.MonkeyPatch, passes: bool) -> list[Any]:
    """Records the device of every ``Tensor.to`` call; runs it, or hands the tensor back."""
    calls: list[Any] = []
    real = torch.Tensor.to

    def to(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(args[0] if args else kwargs.get("device"))
        return real(tensor, *args, **kwargs) if passes else tensor

    monkeypatch.setattr(torch.Tensor, "to", to)
    return calls


def test_cpu_batches_skip_tensor_to(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the CPU ``.to`` is a no-op per column (or a copy of arrays only the batch holds)."""
    calls = spy_on_to(monkeypatch, passes=True)
    buf = filled(EpisodeReplayBuffer)
    batch = buf.sample(8, include_infos=True, device="cpu")
    assert calls == []
    assert all(isinstance(v, torch.Tensor) for k, v in batch.items() if k != "infos")


def test_other_devices_move_every_numeric_column(monkeypatch: pytest.MonkeyPatch) -> None:
    """The path for accelerators: one ``.to(device)`` per numeric column, infos left as numpy."""
    target = torch.device("cuda", 1)  # never used: the spy hands the CPU tensor back
    calls = spy_on_to(monkeypatch, passes=False)
    monkeypatch.setattr(sampling, "check_device", lambda device: target)
    buf = filled(EpisodeReplayBuffer)
    state = copy.deepcopy(buf.rng.bit_generator.state)
    expected = draw(buf, {"include_infos": True}, state)
    got = sampling.to_device(expected, "cuda:1")
    numeric = [k for k, v in expected.items() if v.dtype != object]
    assert calls == [target] * len(numeric)
    assert got["infos"] is expected["infos"]
    for key in numeric:
        assert np.array_equal(got[key].numpy(), expected[key]), key


@pytest.mark.parametrize(
    "column",
    [
        np.arange(6, dtype=np.float32).reshape(2, 3).T,  # not C-contiguous
        np.broadcast_to(np.float32(1), (4,)),  # 0-stride, read-only
        np.arange(10, dtype=np.int64)[::-2],  # negative stride
        np.zeros((2, 0, 3), np.uint8),
        np.array([True, False]),
    ],
)
def test_to_device_cpu_tensors_of_odd_arrays(column: np.ndarray) -> None:
    before = column.copy()
    out = sampling.to_device({"x": column, "infos": np.array([{}], object)}, "cpu")
    tensor = out["x"]
    assert tensor.is_contiguous() and tuple(tensor.shape) == column.shape
    assert np.array_equal(tensor.numpy(), before)
    if column.size and not np.shares_memory(tensor.numpy(), column):
        tensor.view(-1)[0] = 1 - tensor.view(-1)[0] if tensor.dtype != torch.bool else True
        assert np.array_equal(column, before)
