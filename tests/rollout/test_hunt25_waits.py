"""The rollout ops wait for the device as often as their docs say, uploads from the host included.

On a GPU a tensor made from a Python list (``torch.tensor``, ``new_tensor``) is a blocking copy,
as is a read to the host or a boolean-mask index. Counted here on the CPU with torch's modes,
so that the counts hold without a device (round 25: the layout uploaded a one-element list,
the recurrent generator its env bounds, and a mask reset of ``CircularBuffer`` indexed by it).
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from episodes.rollout import CircularBuffer, RolloutStorage, trajectory_layout

_READS = {"item", "tolist", "numpy", "cpu", "__bool__", "__int__", "__float__", "nonzero"}
_UPLOADS = {"tensor", "new_tensor", "as_tensor"}


class Waits(TorchFunctionMode):
    """Names of the calls that wait for a device: reads, uploads of host data, mask indexing."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []
        self._masks = _MaskIndexing(self.calls)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        data = args[1] if name == "new_tensor" else (args[0] if args else None)
        if name in _READS or (name in _UPLOADS and not isinstance(data, torch.Tensor)):
            self.calls.append(name)
        return func(*args, **(kwargs or {}))

    def __enter__(self):
        self._masks.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        super().__exit__(*exc)
        return self._masks.__exit__(*exc)


class _MaskIndexing(TorchDispatchMode):
    def __init__(self, calls: list[str]):
        super().__init__()
        self.calls = calls

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in ("index", "index_put", "index_put_") and any(
            isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] or ())
        ):
            self.calls.append(f"{name}[mask]")
        return func(*args, **(kwargs or {}))


def _dones(num_steps: int = 16, num_envs: int = 6) -> torch.Tensor:
    return (
        torch.rand(num_steps, num_envs, generator=torch.Generator().manual_seed(0)) < 0.2
    ).float()


def test_a_layout_waits_once() -> None:
    dones = _dones()
    with Waits() as waits:
        trajectory_layout(dones)
    assert waits.calls == ["nonzero"]


def test_the_recurrent_generator_waits_twice_at_its_first_batch() -> None:
    num_steps, num_envs = 16, 6
    storage = RolloutStorage("rl", num_envs, num_steps, (3,), (1,))
    storage.write_block(
        0,
        observations=torch.randn(num_steps, num_envs, 3),
        actions=torch.randn(num_steps, num_envs, 1),
        rewards=torch.randn(num_steps, num_envs),
        dones=_dones(num_steps, num_envs),
        values=torch.randn(num_steps, num_envs),
        actions_log_prob=torch.randn(num_steps, num_envs),
    )
    storage.compute_returns(torch.zeros(num_envs, 1), 0.99, 0.95)
    batches = storage.recurrent_mini_batch_generator(2, 2)
    with Waits() as waits:
        for _ in batches:
            pass
    assert sorted(waits.calls) == ["nonzero", "tolist"]


def test_a_mask_reset_of_a_circular_buffer_does_not_wait() -> None:
    buffer = CircularBuffer(max_len=3, batch_size=4, device="cpu")
    buffer.append(torch.ones(4, 2))
    mask = torch.tensor([True, False, True, False])
    with Waits() as waits:
        buffer.reset(mask)
    assert waits.calls == []
    assert buffer.current_length.tolist() == [0, 1, 0, 1]
