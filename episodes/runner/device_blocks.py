"""Time-major blocks as torch tensors on the env's device, for vector envs that yield tensors.

GPU simulators step thousands of sub-envs and return torch tensors on their device. Recording
them into numpy blocks would copy every step to the host and wait for the device each time;
these blocks stay where the env's tensors are. A vector step is still one slice assignment per
field (queued on the device, no host sync), and the host gets one copy per call: the flags and
rewards the chunk table needs at the end of ``sample()``, and the other fields only when a
chunk is built (:class:`HostColumn`).

Same-step envs report the final observations of finished sub-envs as a batched tensor
``infos["final_obs"]`` (``[N, ...]``; rows of sub-envs that did not finish are ignored), which
is written to the ``finals`` block row by row, like any other field.

The blocks outlive a call (the next one continues in them): they are made as normal tensors
even inside ``torch.inference_mode`` (:func:`_normal_tensors`), so that a runner sampled under
``inference_mode``, ``no_grad`` or neither, in any order, writes into them.

Example:
    >>> import torch
    >>> blocks = DeviceBlocks.allocate(torch.zeros(2, 3), rows=4, with_finals=False)
    >>> blocks.obs.put(1, torch.ones(2, 3))
    >>> blocks.obs.view(1, 2, 0).tolist(), blocks.host().obs.leaves[0].shape
    ([[1.0, 1.0, 1.0]], (5, 2, 3))
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from episodes.buffer.plain_arrays import native_array
from episodes.runner.blocks import Blocks, Column
from episodes.runner.device_values import tensor_dtype
from episodes.runner.policy import check_numpy_dtype
from episodes.runner.timing import new_times, resized_times, shifted_times
from episodes.runner.widening import promoted_dtype
from episodes.structs import flatten, skeleton, unflatten

__all__ = ["DeviceBlocks", "HostColumn", "TensorColumn"]


def _normal_tensors() -> AbstractContextManager[Any]:
    """A context whose new tensors are normal ones, inside ``torch.inference_mode`` too.

    An inference tensor kept across calls refuses the in-place writes of a later call made
    outside inference mode. Grad mode stays off in it. Outside inference mode: nothing.

    Example:
        >>> with torch.inference_mode(), _normal_tensors():
        ...     torch.zeros(1).is_inference(), torch.is_grad_enabled()
        (False, False)
    """
    return _outside_inference() if torch.is_inference_mode_enabled() else nullcontext()


@contextmanager
def _outside_inference() -> Iterator[None]:
    with torch.inference_mode(False), torch.no_grad():  # inference_mode(False) enables grad
        yield


def _device_of(leaf: Any) -> Any:
    # torch.as_tensor without a device moves a tensor to torch's default device.
    return leaf.device if isinstance(leaf, torch.Tensor) else "cpu"


def _promoted(a: torch.dtype, b: torch.dtype, name: str = "a batch") -> torch.dtype:
    """The dtype the host's rule (``promoted_dtype``) gives the two dtypes, as torch's.

    torch's own promotion keeps a float dtype's width (int64 and float32 give float32, which
    rounds ints beyond 2**24); the host columns promote as numpy does. A dtype numpy lacks
    (bfloat16) counts as float32, which holds all its values. Pairs the host refuses (a
    complex dtype; int64 and uint64, which only a float holds) are a ``ValueError``.

    Example:
        >>> _promoted(torch.int64, torch.float32), _promoted(torch.int32, torch.bfloat16)
        (torch.float64, torch.float64)
    """

    def numpy_of(dtype: torch.dtype) -> np.dtype[Any]:
        try:
            return torch.empty(0, dtype=dtype, device="cpu").numpy().dtype
        except TypeError:
            return np.dtype(np.float32) if dtype.is_floating_point else np.dtype(np.complex64)

    wide = promoted_dtype(numpy_of(a), numpy_of(b), name)
    return torch.from_numpy(np.empty(0, wide)).dtype


class TensorColumn(Column):
    """A :class:`~episodes.runner.blocks.Column` of ``[rows, num_envs, ...]`` torch tensors.

    Example:
        >>> col = TensorColumn.for_batch(torch.zeros(2, 3), rows=4)
        >>> col.put(0, torch.ones(2, 3)); col.leaves[0].shape, col.leaves[0].device.type
        (torch.Size([4, 2, 3]), 'cpu')
    """

    __slots__ = ()

    @classmethod
    def for_batch(cls, batch: Any, rows: int, device: Any = None) -> TensorColumn:
        """An uninitialised column shaped and typed like ``batch`` (numpy leaves are converted).

        ``device`` defaults to the batch's own device.

        Example:
            >>> col = TensorColumn.for_batch(np.zeros((2, 3), np.float32), rows=4)
            >>> tuple(col.leaves[0].shape), col.leaves[0].dtype
            ((4, 2, 3), torch.float32)
        """
        leaves, structure = flatten(batch)
        # A numpy leaf in native byte order (torch takes no other), as the host's blocks.
        leaves = [native_array(x) if isinstance(x, np.ndarray) else x for x in leaves]
        # On the data's device (numpy: the host), not torch's default one.
        tensors = [torch.as_tensor(leaf, device=device or _device_of(leaf)) for leaf in leaves]
        for tensor in tensors:
            check_numpy_dtype(tensor)  # chunks are numpy'd episodes: each leaf needs a dtype
        with _normal_tensors():
            leaves = [
                torch.empty((rows, *t.shape), dtype=t.dtype, device=t.device) for t in tensors
            ]
        return cls(leaves, skeleton(structure))

    @property
    def device(self) -> torch.device:
        """Where the leaves live.

        Example:
            >>> TensorColumn.for_batch(torch.zeros(2), rows=3).device
            device(type='cpu')
        """
        leaf: torch.Tensor = self.leaves[0]
        return leaf.device

    def gather(self, flat: Any) -> Any:
        """The items at flat positions ``row * num_envs + env`` (any index shape), on the device.

        Example:
            >>> col = TensorColumn([torch.arange(6).reshape(3, 2) * 10], None)  # 3 rows, 2 envs
            >>> col.gather(np.array([[5, 0], [3, 1]])).tolist()
            [[50, 0], [30, 10]]
        """
        index = torch.as_tensor(flat, device=self.device)
        flat_index = index.reshape(-1)
        return unflatten(
            self.structure,
            [
                # index_select moves whole rows: several times faster than advanced indexing.
                _rows_at(leaf, flat_index).reshape(*index.shape, *leaf.shape[1:])
                for leaf in self.flat_leaves()
            ],
        )

    def widened(self, j: int, value: Any, name: str = "a batch") -> Any:
        """:meth:`Column.widened` on the device: decided by the dtypes alone.

        The host's rule looks at the values (floats are rounded into a float leaf whose range
        holds them, ints kept in an int leaf whose range holds them); here that look would
        wait for the device. So real values (bool, int, float) written into a float leaf are
        rounded into its dtype, and values beyond its range become ``inf`` (the host widens
        the leaf instead); an episode's observations keep one dtype in every chunk that way.
        Other pairs (floats after ints, another int dtype) widen the leaf to the dtype the
        host promotes the two to (``promoted_dtype``: int64 then float32 gives float64,
        keeping every int64 value that float32 would round) whatever the values, so this
        differs from the host where they fit: an int32 leaf widens to int64 for an int64
        batch of small ints, which the host's int32 leaf takes as they are. Pairs the host
        refuses are refused here too, whatever the values (a complex dtype; int64 and uint64,
        which only a float holds): a ``ValueError`` naming ``name`` and both dtypes.

        Example:
            >>> col = TensorColumn.for_batch(torch.zeros(2, dtype=torch.int64), rows=2)
            >>> col.put(0, torch.tensor([0.5, 1.5])); col.leaves[0].dtype
            torch.float64
            >>> col = TensorColumn.for_batch(torch.zeros(2), rows=2)  # float32
            >>> col.put(0, torch.tensor([0.5, 1e300], dtype=torch.float64))
            >>> col.leaves[0].dtype, col.leaves[0][0].tolist()
            (torch.float32, [0.5, inf])
            >>> col = TensorColumn.for_batch(torch.zeros(2, dtype=torch.int32), rows=2)
            >>> col.put(0, torch.tensor([1, 2])); col.leaves[0].dtype  # the host keeps int32
            torch.int64
        """
        leaf: torch.Tensor = self.leaves[j]
        named = name if self.structure is None else f"{name} (leaf {j})"
        dtype = tensor_dtype(value, named)  # strings, objects, lists: a ValueError naming it
        if dtype == leaf.dtype or (leaf.dtype.is_floating_point and not dtype.is_complex):
            return leaf
        wide = _promoted(leaf.dtype, dtype, named)
        if wide != leaf.dtype:
            with _normal_tensors():
                leaf = self.leaves[j] = leaf.to(wide)
        return leaf

    def resized(self, rows: int) -> TensorColumn:
        """A new column of ``rows`` rows holding this one's first rows (as many as fit).

        Example:
            >>> col = TensorColumn([torch.arange(6).reshape(3, 2)], None)
            >>> col.resized(2).leaves[0].tolist(), col.resized(5).rows
            ([[0, 1], [2, 3]], 5)
        """
        keep = min(rows, self.rows)
        grown = []
        with _normal_tensors():
            for leaf in self.leaves:
                bigger = torch.empty((rows, *leaf.shape[1:]), dtype=leaf.dtype, device=leaf.device)
                bigger[:keep] = leaf[:keep]
                grown.append(bigger)
        return TensorColumn(grown, self.structure)

    def shifted(self, first: int, stop: int, rows: int) -> TensorColumn:
        """A new column of ``rows`` rows starting with rows ``first:stop`` of this one.

        Example:
            >>> col = TensorColumn([torch.arange(6).reshape(3, 2)], None)
            >>> shifted = col.shifted(1, 3, rows=4)
            >>> shifted.rows, shifted.leaves[0][:2].tolist()
            (4, [[2, 3], [4, 5]])
        """
        out = []
        with _normal_tensors():
            for leaf in self.leaves:
                new = torch.empty((rows, *leaf.shape[1:]), dtype=leaf.dtype, device=leaf.device)
                count = min(stop, leaf.shape[0]) - first
                new[:count] = leaf[first : first + count]
                out.append(new)
        return TensorColumn(out, self.structure)


class HostColumn(Column):
    """A host (numpy) mirror of a :class:`TensorColumn`, copied when its leaves are first read.

    On a CPU device the mirror shares the tensors' memory; elsewhere it is one copy per leaf.

    Example:
        >>> mirror = HostColumn(TensorColumn([torch.arange(4).reshape(2, 2)], None))
        >>> mirror.leaves[0].tolist()
        [[0, 1], [2, 3]]
    """

    __slots__ = ("_source", "_host")

    def __init__(self, source: TensorColumn):  # noqa: D107 - no leaves are copied here
        self._source = source
        self._host: list[np.ndarray] | None = None
        self.structure = source.structure
        self.shapes = source.shapes

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as the plain host column it mirrors: its leaves are a read-only property
        # here, which the default slot pickling would try to set.
        return (Column, (self.leaves, self.structure))

    @property
    def leaves(self) -> list[np.ndarray]:  # type: ignore[override]
        """The numpy leaves (copied from the device the first time).

        Example:
            >>> mirror = HostColumn(TensorColumn([torch.zeros(2, 2)], None))
            >>> type(mirror.leaves[0]).__name__, mirror.leaves[0] is mirror.leaves[0]  # copied once
            ('ndarray', True)
        """
        if self._host is None:
            tensors: list[torch.Tensor] = list(self._source.leaves)
            self._host = [leaf.detach().cpu().numpy() for leaf in tensors]
        return self._host


@dataclass
class DeviceBlocks(Blocks):
    """:class:`~episodes.runner.blocks.Blocks` whose fields are torch tensors on one device.

    ``finals[r, i]`` is the final observation of sub-env ``i``'s episode that ended in row
    ``r`` (same-step envs only; other rows hold whatever the env reported there).

    Example:
        >>> blocks = DeviceBlocks.allocate(torch.zeros(2, 3), rows=4, with_finals=True)
        >>> tuple(blocks.finals.leaves[0].shape), blocks.rewards.dtype, blocks.device.type
        ((4, 2, 3), torch.float64, 'cpu')
    """

    finals: TensorColumn | None = None

    @classmethod
    def allocate(cls, obs: Any, rows: int, *, with_finals: bool = False) -> DeviceBlocks:
        """Blocks of ``rows`` step rows on the observations' device, shaped like ``obs``.

        Example:
            >>> blocks = DeviceBlocks.allocate(np.zeros((3, 2), np.float32), rows=2)
            >>> tuple(blocks.obs.leaves[0].shape), tuple(blocks.dead.shape), blocks.finals is None
            ((3, 3, 2), (2, 3), True)
        """
        leaf = flatten(obs)[0][0]
        first = torch.as_tensor(leaf, device=_device_of(leaf))
        device, num_envs = first.device, len(first)

        def zeros(dtype: torch.dtype) -> torch.Tensor:
            return torch.zeros((rows, num_envs), dtype=dtype, device=device)

        with _normal_tensors():
            return cls(
                obs=TensorColumn.for_batch(obs, rows + 1),
                rewards=zeros(torch.float64),
                terminated=zeros(torch.bool),
                truncated=zeros(torch.bool),
                dead=zeros(torch.bool),
                finals=TensorColumn.for_batch(obs, rows) if with_finals else None,
                times=new_times(rows),  # on the host: the clock is read there (no device sync)
            )

    @property
    def device(self) -> torch.device:
        """Where the blocks live.

        Example:
            >>> DeviceBlocks.allocate(torch.zeros(2), rows=3).device
            device(type='cpu')
        """
        rewards: torch.Tensor = self.rewards
        return rewards.device

    def ensure_outputs(self, actions: Any, extras: dict[str, Any]) -> None:
        """Allocates the action and extra-output blocks (on the blocks' device).

        Example:
            >>> blocks = DeviceBlocks.allocate(torch.zeros(2, 3), rows=4)
            >>> blocks.ensure_outputs(np.array([0, 1]), {"logp": torch.zeros(2)})
            >>> type(blocks.actions).__name__, blocks.actions.leaves[0].dtype
            ('TensorColumn', torch.int64)
            >>> blocks.extras["logp"].rows
            4
        """
        rows = self.step_rows
        if self.actions is None:
            self.actions = TensorColumn.for_batch(actions, rows, self.device)
        for key, value in extras.items():
            if key not in self.extras:
                self.extras[key] = TensorColumn.for_batch(value, rows, self.device)

    def resized(self, step_rows: int) -> DeviceBlocks:
        """Blocks with ``step_rows`` step rows holding these blocks' first rows.

        Example:
            >>> blocks = DeviceBlocks.allocate(torch.zeros(2), rows=2)
            >>> blocks.rewards[:] = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
            >>> grown = blocks.resized(3)
            >>> grown.step_rows, grown.obs.rows, grown.rewards.tolist()
            (3, 4, [[1.0, 2.0], [3.0, 4.0], [0.0, 0.0]])
        """

        def flat(array: torch.Tensor) -> torch.Tensor:
            out = torch.zeros((step_rows, *array.shape[1:]), dtype=array.dtype, device=array.device)
            keep = min(step_rows, len(array))
            out[:keep] = array[:keep]
            return out

        times = None if self.times is None else resized_times(self.times, step_rows)
        return self._remade(flat, lambda column, extra: column.resized(step_rows + extra), times)

    def successor(self, first: int, stop: int, rows: int) -> DeviceBlocks:
        """New blocks of ``rows`` step rows starting with rows ``first:stop`` (one copy each).

        Example:
            >>> blocks = DeviceBlocks.allocate(torch.zeros(2), rows=4)
            >>> blocks.rewards[:, 0] = torch.tensor([1.0, 2.0, 3.0, 4.0])
            >>> nxt = blocks.successor(2, 4, rows=3)
            >>> nxt.step_rows, nxt.rewards[:, 0].tolist()
            (3, [3.0, 4.0, 0.0])
        """

        def flat(array: torch.Tensor) -> torch.Tensor:
            out = torch.zeros((rows, *array.shape[1:]), dtype=array.dtype, device=array.device)
            out[: stop - first] = array[first:stop]
            return out

        return self._remade(
            flat,
            lambda column, extra: column.shifted(first, stop + extra, rows + extra),
            None if self.times is None else shifted_times(self.times, first, stop, rows),
        )

    def _remade(
        self,
        flat: Callable[[torch.Tensor], torch.Tensor],
        column: Callable[[TensorColumn, int], TensorColumn],
        times: np.ndarray | None,
    ) -> DeviceBlocks:
        def field(col: Column, extra: int = 0) -> TensorColumn:
            assert isinstance(col, TensorColumn)
            return column(col, extra)

        with _normal_tensors():
            return DeviceBlocks(
                obs=field(self.obs, 1),
                rewards=flat(self.rewards),
                terminated=flat(self.terminated),
                truncated=flat(self.truncated),
                dead=flat(self.dead),
                actions=None if self.actions is None else field(self.actions),
                extras={key: field(col) for key, col in self.extras.items()},
                finals=None if self.finals is None else field(self.finals),
                times=times,
            )

    def match_finals(self) -> None:
        """Gives the observation and final-observation leaves one dtype.

        An episode's final observation joins its other observations (a chunk's column, a
        bootstrap batch). Float finals are rounded into a float observation leaf when written
        (:meth:`TensorColumn.widened`: a float64 ``final_obs`` of float32 observations keeps
        the block float32, so an episode's chunks keep one dtype); what still differs here is
        a leaf one of them widened from ints, which then widens the other the same way.
        Compares dtypes only (no look at the values, which would wait for the device).

        Example:
            >>> blocks = DeviceBlocks.allocate(torch.zeros(2, dtype=torch.int64), rows=2,
            ...                                with_finals=True)
            >>> blocks.finals.put(0, torch.tensor([0.5, 1.5]))
            >>> blocks.match_finals(); blocks.obs.leaves[0].dtype, blocks.finals.leaves[0].dtype
            (torch.float64, torch.float64)
        """
        finals = self.finals
        if finals is None:
            return
        obs = self.obs
        for j, leaf in enumerate(finals.leaves):
            if leaf.dtype is not obs.leaves[j].dtype:
                finals.widened(j, obs.widened(j, leaf))

    def index(self, positions: np.ndarray) -> torch.Tensor:
        """Host index positions as a tensor on the blocks' device.

        Example:
            >>> index = DeviceBlocks.allocate(torch.zeros(2), rows=2).index(np.array([1, 0]))
            >>> index.tolist(), index.dtype, index.device.type
            ([1, 0], torch.int64, 'cpu')
        """
        return torch.as_tensor(positions, device=self.device)

    def bootstrap_observations(
        self,
        stop: np.ndarray,
        env: np.ndarray,
        final_rows: np.ndarray,
        apart: np.ndarray,
        last_rows: np.ndarray,
        ongoing: np.ndarray,
    ) -> Any:
        """The observations a bootstrap needs, batched on the device.

        ``obs[stop, env]`` (from ``finals[final_rows, env]`` where ``apart``), then
        ``obs[last_rows, ongoing]``; see ``SampledChunks.bootstrap_observations``.

        Example:
            >>> blocks = DeviceBlocks.allocate(torch.zeros(2), rows=3, with_finals=True)
            >>> blocks.obs.leaves[0][:] = torch.arange(8.0).reshape(4, 2)
            >>> blocks.finals.leaves[0][:] = 100 + torch.arange(6.0).reshape(3, 2)
            >>> stop, env, final_rows = np.array([2, 1]), np.array([0, 1]), np.array([1, 0])
            >>> apart, last_rows, ongoing = np.array([False, True]), np.array([3]), np.array([0])
            >>> out = blocks.bootstrap_observations(stop, env, final_rows, apart, last_rows,
            ...                                     ongoing)
            >>> out.tolist()  # obs[2, 0], finals[0, 1], then obs[3, 0]
            [4.0, 101.0, 6.0]
        """
        index = self.index
        # Each position array goes to the device once per call, not once per leaf.
        at_stop, at_env, at_last, at_ongoing = map(index, (stop, env, last_rows, ongoing))
        any_apart = bool(apart.any())
        if any_apart:
            assert self.finals is not None
            kept_rows, kept_env = index(final_rows[apart]), index(env[apart])
            kept_at = index(np.flatnonzero(apart))
        leaves = []
        for j, leaf in enumerate(self.obs.leaves):
            finals = leaf[at_stop, at_env]
            if any_apart:
                assert self.finals is not None
                kept = self.finals.leaves[j][kept_rows, kept_env]
                # index_put has no uint16/32/64 kernel either: the same bits as signed ints.
                signed = _SIGNED_BITS.get(finals.dtype, finals.dtype)
                finals.view(signed)[kept_at] = kept.view(signed)
            leaves.append(torch.cat([finals, leaf[at_last, at_ongoing]]))
        return unflatten(self.obs.structure, leaves)

    def host(self) -> Blocks:
        """A host mirror: flags and rewards copied now, the other fields when first read.

        The flags are copied whole, so that row numbers stay the same.

        Example:
            >>> blocks = DeviceBlocks.allocate(torch.zeros(2, 3), rows=2)
            >>> blocks.rewards[1, 0] = 1.5
            >>> mirror = blocks.host()
            >>> type(mirror).__name__, type(mirror.rewards).__name__, mirror.rewards[1].tolist()
            ('Blocks', 'ndarray', [1.5, 0.0])
        """

        def copy(array: Any) -> np.ndarray:
            return np.asarray(array.detach().cpu().numpy())

        return Blocks(
            obs=HostColumn(self.obs),  # type: ignore[arg-type]
            rewards=copy(self.rewards),
            terminated=copy(self.terminated),
            truncated=copy(self.truncated),
            dead=copy(self.dead),
            actions=None if self.actions is None else HostColumn(self.actions),  # type: ignore[arg-type]
            extras={key: HostColumn(col) for key, col in self.extras.items()},  # type: ignore[arg-type]
            times=self.times,  # a host array already
        )


#: Signed ints of the widths of the unsigned dtypes whose ``index_select`` and ``index_put``
#: torch lacks (CPU).
_SIGNED_BITS = {
    getattr(torch, f"uint{bits}"): getattr(torch, f"int{bits}")
    for bits in (16, 32, 64)
    if hasattr(torch, f"uint{bits}")
}


def _rows_at(leaf: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``index_select`` of rows, through the same bits as signed ints for uint16/32/64."""
    signed = _SIGNED_BITS.get(leaf.dtype)
    if signed is None:
        return torch.index_select(leaf, 0, index)
    return torch.index_select(leaf.view(signed), 0, index).view(leaf.dtype)
