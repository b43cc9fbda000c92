"""Time-major blocks that one ``EnvRunner.sample()`` call records into.

A block holds one field for every sub-env: ``[rows, num_envs, ...]`` arrays, one per leaf of
the field's item structure (a Dict or Tuple observation space gives several leaves). Row ``r``
is what the call's ``r``-th vector step wrote, for every sub-env at once (a plain slice
assignment per field). Sub-env ``i`` owns column ``i``, and an episode is a contiguous row
range of it (a next-step reset step, a dead row, lies only between episodes), so a chunk is
the view ``leaf[first:stop, i]``. The first rows hold what the previous call carried over: the
lookback and, in next-step mode, the transitions recorded beyond ``num_steps``.

Example:
    >>> blocks = Blocks.allocate(np.zeros((2, 3), np.float32), rows=4)
    >>> blocks.obs.put(1, np.ones((2, 3), np.float32))
    >>> blocks.obs.put(2, np.full((2, 3), 2, np.float32))
    >>> blocks.obs.view(1, 3, 0).tolist()
    [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from episodes.buffer.plain_arrays import check_unmasked
from episodes.runner.nesting import inner_containers, nesting_changed, nests_within
from episodes.runner.timing import new_times, resized_times, shifted_times
from episodes.runner.widening import new_leaf, widened_dtype
from episodes.structs import flatten, skeleton, unflatten


class Column:
    """One field as ``[rows, num_envs, ...]`` leaf arrays plus the item structure joining them.

    Example:
        >>> col = Column.for_batch({"a": np.zeros(2), "b": np.zeros((2, 3))}, rows=5)
        >>> [leaf.shape for leaf in col.leaves]
        [(5, 2), (5, 2, 3)]
    """

    __slots__ = ("leaves", "structure", "shapes", "nested")

    def __init__(self, leaves: list[Any], structure: Any):  # numpy (tensors: TensorColumn)
        self.leaves = leaves
        self.structure = structure
        # Each leaf's ``[num_envs, ...]`` batch shape, which a write must match (widening and
        # resizing keep it). Kept: a numpy ``.shape`` is a new tuple at every read.
        self.shapes = [leaf.shape[1:] for leaf in leaves]
        self.nested = inner_containers(structure)  # what leaves_of compares inside the outer

    @classmethod
    def for_batch(cls, batch: Any, rows: int) -> Column:
        """An uninitialised column shaped and typed like the batched struct ``batch``.

        Example:
            >>> col = Column.for_batch(np.zeros((2, 3), np.float32), rows=4)
            >>> col.leaves[0].shape, col.leaves[0].dtype.name, col.structure is None
            ((4, 2, 3), 'float32', True)
        """
        leaves, structure = flatten(batch)
        arrays = [np.asarray(leaf) for leaf in leaves]
        return cls([new_leaf((rows, *a.shape), a.dtype) for a in arrays], skeleton(structure))

    @property
    def rows(self) -> int:
        """The capacity in rows.

        Example:
            >>> Column.for_batch(np.zeros(2), rows=7).rows
            7
        """
        return len(self.leaves[0])

    def put(self, row: int, batch: Any, name: str = "a batch") -> None:
        """Writes a batched struct (``[num_envs, ...]`` leaves) into row ``row``.

        Checked and widened as :meth:`leaves_of` and :meth:`widened` say (errors name ``name``):
        a masked array with masked entries is refused, as a row write would drop its mask.

        Example:
            >>> col = Column.for_batch({"a": np.zeros(2), "b": np.zeros(2)}, rows=3)
            >>> col.put(1, {"a": np.array([1.0, 2.0]), "b": np.array([3.0, 4.0])})
            >>> col.leaves[0][1].tolist(), col.leaves[1][1].tolist()
            ([1.0, 2.0], [3.0, 4.0])
        """
        if self.structure is None:  # the usual single leaf: no list, no call per row
            if getattr(batch, "shape", None) == self.shapes[0]:
                leaf = self.leaves[0]
                if batch.__class__ is not _NDARRAY:  # a masked array's mask would be dropped
                    check_unmasked(batch, name)
                if batch.dtype is not leaf.dtype:
                    leaf = self.widened(0, batch, name)
                leaf[row] = batch
                return
        self.put_leaves(row, self.leaves_of(batch, name), name)

    def leaves_of(self, batch: Any, name: str = "a batch") -> list[Any]:
        """The leaves of a batched struct, each checked against its ``[num_envs, ...]`` shape.

        A row write would broadcast a leaf that lost an axis over the row, file a batch of
        other dict keys under the column's, and drop a masked array's mask: refused instead,
        before anything is written.

        Raises:
            ValueError: A leaf's shape, the number of leaves or their nesting (``nests_within``)
                is not the column's, or a leaf is a masked array with masked entries
                (``check_unmasked``); the message names ``name``.

        Example:
            >>> col = Column.for_batch(np.zeros((2, 3)), rows=2)
            >>> col.leaves_of(np.zeros((2, 1)), "observations")  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ValueError: observations: got a batch of shape (2, 1), expected (2, 3) ...
        """
        structure = self.structure
        if structure is not None and not nests_within(batch, structure, self.nested):
            raise nesting_changed(name, structure, self.shapes, batch)
        values = [batch] if structure is None else flatten(batch)[0]
        shapes = self.shapes
        if len(values) != len(shapes):
            raise ValueError(
                f"{name}: got {len(values)} leaves, expected {len(shapes)} (the structure of "
                "the first batch)"
            )
        for j, value in enumerate(values):
            want = shapes[j]
            if getattr(value, "shape", None) != want and np.shape(value) != want:
                where = "" if self.structure is None else f" (leaf {j})"
                raise ValueError(
                    f"{name}{where}: got a batch of shape {tuple(np.shape(value))}, expected "
                    f"{tuple(want)} (one item of shape {tuple(want[1:])} per sub-env)"
                )
            if value.__class__ is not _NDARRAY and isinstance(value, np.ma.MaskedArray):
                where = "" if self.structure is None else f" (leaf {j})"
                check_unmasked(value, f"{name}{where}")  # a row write would drop its mask
        return values

    def put_leaves(self, row: int, values: list[Any], name: str = "a batch") -> None:
        """Writes checked leaves (see :meth:`leaves_of`) into row ``row``, widening as needed.

        Example:
            >>> col = Column.for_batch(np.zeros(2, np.int64), rows=2)
            >>> col.put_leaves(0, [np.array([0.5, 1.0])]); col.leaves[0][0].tolist()
            [0.5, 1.0]
        """
        for j, value in enumerate(values):
            leaf = self.leaves[j]
            if getattr(value, "dtype", None) is not leaf.dtype:
                leaf = self.widened(j, value, name)
            leaf[row] = value

    def fitted(self, values: list[np.ndarray], name: str) -> list[np.ndarray]:
        """Item leaves (``[k, ...]``) kept apart from the column, in the column's dtypes.

        The rule of a row write (:meth:`widened`): values the leaf's dtype holds are rounded
        into it, others widen the leaf first. Same-step final observations go through here, so
        an episode's final observation has the dtype of its other observations.

        Raises:
            ValueError: An item's shape or dtype is not one the column takes (see
                :meth:`widened`); the message names ``name``.

        Example:
            >>> col = Column.for_batch(np.zeros((2, 2), np.float32), rows=2)
            >>> col.fitted([np.array([[0.1, 0.2]])], "final observations")[0].dtype.name
            'float32'
            >>> col.fitted([np.array([[1e300, 0.0]])], "final observations")[0].dtype.name
            'float64'
            >>> col.leaves[0].dtype.name  # widened: the column holds that value too
            'float64'
        """
        out = []
        for j, value in enumerate(values):
            if value.shape[1:] != self.leaves[j].shape[2:]:
                raise ValueError(
                    f"{name}: got items of shape {value.shape[1:]}, expected "
                    f"{self.leaves[j].shape[2:]}"
                )
            leaf = self.widened(j, value, name)
            out.append(value if value.dtype == leaf.dtype else value.astype(leaf.dtype))
        return out

    def widened(self, j: int, value: Any, name: str = "a batch") -> Any:
        """Leaf ``j``, retyped first if ``value`` does not fit its dtype; returns the leaf.

        A later batch whose values the leaf's dtype cannot hold (floats after ints, ints beyond
        its range) would be changed by the row write's cast. The leaf is widened to the type
        both promote to, among bools, ints and floats only (``widened_dtype``).

        Raises:
            ValueError: Values no such widening holds (strings, objects; int64 and uint64,
                which only a float would hold), refused before they are written: the message
                names ``name`` (and the leaf) and both dtypes.

        Example:
            >>> col = Column.for_batch(np.zeros(2, np.int64), rows=2)
            >>> col.put(0, np.array([1, 2])); col.put(1, np.array([0.5, 1.5]))
            >>> col.leaves[0].dtype.name, col.leaves[0].tolist()
            ('float64', [[1.0, 2.0], [0.5, 1.5]])
        """
        leaf = self.leaves[j]
        named = name if self.structure is None else f"{name} (leaf {j})"
        # 64-bit ints are the ones float64 may round: their rows are zeroed, never garbage.
        recorded = leaf if leaf.dtype.kind in "iu" and leaf.dtype.itemsize == 8 else None
        wide = widened_dtype(leaf.dtype, np.asarray(value), named, recorded)
        if wide != leaf.dtype:
            leaf = self.leaves[j] = leaf.astype(wide)
        return leaf

    def gather(self, flat: np.ndarray) -> Any:
        """The items at flat positions ``row * num_envs + env`` (any index shape), as new arrays.

        A take along the first axis of the (row, env)-flattened leaf moves whole items: about
        twice as fast as numpy's two-array fancy indexing.

        Example:
            >>> col = Column([np.arange(6).reshape(3, 2) * 10], None)  # 3 rows, 2 envs
            >>> col.gather(np.array([[5, 0], [3, 1]])).tolist()  # 5: row 2, env 1
            [[50, 0], [30, 10]]
        """
        return unflatten(self.structure, [np.take(x, flat, axis=0) for x in self.flat_leaves()])

    def flat_leaves(self) -> list[Any]:
        """The leaves as ``[rows * N, ...]`` (views where they can be): item ``row * N + env``.

        Example:
            >>> [leaf.shape for leaf in Column([np.zeros((3, 2, 0))], None).flat_leaves()]
            [(6, 0)]
        """
        # Not reshape(-1, ...): a zero-size item (a Box of shape (0,)) leaves -1 undefined.
        return [x.reshape(x.shape[0] * x.shape[1], *x.shape[2:]) for x in self.leaves]

    def put_rows(
        self, rows: np.ndarray, envs: np.ndarray, batch: Any, name: str = "a batch"
    ) -> None:
        """Writes the ``envs`` items of a batched struct at ``(rows, envs)``.

        Checked and widened as :meth:`put` does (a ``ValueError`` naming ``name``).

        Example:
            >>> col = Column([np.zeros((3, 2), np.int64)], None)
            >>> col.put_rows(np.array([2]), np.array([1]), np.array([7, 8]))  # env 1's item, row 2
            >>> col.leaves[0].tolist()
            [[0, 0], [0, 0], [0, 8]]
            >>> col.put_rows(np.array([0]), np.array([0]), np.array([0.5, 9]))  # widens
            >>> col.leaves[0].dtype.name, col.leaves[0][0].tolist()
            ('float64', [0.5, 0.0])
        """
        for j, value in enumerate(self.leaves_of(batch, name)):
            items = np.asarray(value)[envs]
            # The rule of a row write: values the dtype cannot hold widen the leaf first.
            same = items.dtype is self.leaves[j].dtype
            leaf = self.leaves[j] if same else self.widened(j, items, name)
            leaf[rows, envs] = items

    def view(self, first: int, stop: int, env: int) -> Any:
        """Rows ``first:stop`` of sub-env ``env`` as a struct of views.

        Example:
            >>> col = Column([np.arange(6).reshape(3, 2)], None)
            >>> col.view(1, 3, 0).tolist(), np.shares_memory(col.view(0, 3, 1), col.leaves[0])
            ([2, 4], True)
        """
        return unflatten(self.structure, [leaf[first:stop, env] for leaf in self.leaves])

    def window(self, first: int, stop: int) -> Any:
        """Rows ``first:stop`` of every env (``[stop - first, N, ...]``) as a struct of views.

        Example:
            >>> col = Column([np.arange(6).reshape(3, 2)], None)
            >>> col.window(1, 3).tolist()
            [[2, 3], [4, 5]]
        """
        return unflatten(self.structure, [leaf[first:stop] for leaf in self.leaves])

    def resized(self, rows: int) -> Column:
        """A new column of ``rows`` rows holding this one's first rows (as many as fit).

        Example:
            >>> col = Column([np.arange(6).reshape(3, 2)], None)
            >>> col.resized(5).rows, col.resized(5).leaves[0][:3].tolist()
            (5, [[0, 1], [2, 3], [4, 5]])
            >>> col.resized(1).leaves[0].tolist()
            [[0, 1]]
        """
        keep = min(rows, self.rows)
        grown = []
        for leaf in self.leaves:
            bigger = new_leaf((rows, *leaf.shape[1:]), leaf.dtype)
            bigger[:keep] = leaf[:keep]
            grown.append(bigger)
        return Column(grown, self.structure)


BlocksT = TypeVar("BlocksT", bound="Blocks")
_NDARRAY = np.ndarray


@dataclass
class Blocks:
    """Every recorded field of one call, row ``r`` written by the call's ``r``-th vector step.

    ``obs`` has one row more than the step fields: ``obs[r, i]`` is the observation sub-env
    ``i`` acted on in row ``r``. ``dead[r, i]`` marks a next-step reset step, which records no
    transition. ``actions`` and ``extras`` are allocated by the first vector step (their dtypes
    are the policy's). ``times[r]``, a host array like ``obs`` one row longer, is when the
    observations of row ``r`` were recorded (see :mod:`episodes.runner.timing`).

    Example:
        >>> blocks = Blocks.allocate(np.zeros((2, 3)), rows=4)
        >>> blocks.obs.rows, blocks.rewards.shape, blocks.actions is None
        (5, (4, 2), True)
    """

    obs: Column
    # numpy ``[rows, N]`` arrays here; torch tensors in the device blocks' subclass.
    rewards: Any
    terminated: Any
    truncated: Any
    dead: Any
    actions: Column | None = None
    extras: dict[str, Column] = field(default_factory=dict)
    times: Any = None  # float64 ``[rows + 1]`` on the host (None: blocks not timed)

    @classmethod
    def allocate(cls, obs: Any, rows: int) -> Blocks:
        """Blocks of ``rows`` step rows, shaped like the batched ``obs`` (a reset's).

        Raises:
            ValueError: A leaf of ``obs`` is a masked array with masked entries (a row write
                would drop its mask), naming the env's reset observations.

        Example:
            >>> blocks = Blocks.allocate({"pos": np.zeros((3, 2), np.float32)}, rows=2)
            >>> blocks.obs.leaves[0].shape, blocks.dead.shape, blocks.rewards.dtype.name
            ((3, 3, 2), (2, 3), 'float64')
        """
        leaves = flatten(obs)[0]
        for leaf in leaves:
            check_unmasked(leaf, "the env's reset observations")
        num_envs = len(np.asarray(leaves[0]))
        return cls(
            obs=Column.for_batch(obs, rows + 1),
            rewards=np.zeros((rows, num_envs), np.float64),
            terminated=np.zeros((rows, num_envs), bool),
            truncated=np.zeros((rows, num_envs), bool),
            dead=np.zeros((rows, num_envs), bool),
            times=new_times(rows),
        )

    @property
    def step_rows(self) -> int:
        """The capacity in step rows (``obs`` has one more).

        Example:
            >>> Blocks.allocate(np.zeros((2, 3)), rows=4).step_rows
            4
        """
        return len(self.rewards)

    def ensure_outputs(self, actions: Any, extras: dict[str, np.ndarray]) -> None:
        """Allocates the action and extra-output blocks from the policy's first outputs.

        Example:
            >>> blocks = Blocks.allocate(np.zeros((2, 3)), rows=4)
            >>> blocks.ensure_outputs(np.zeros(2, np.int64), {"logp": np.zeros(2, np.float32)})
            >>> blocks.actions.leaves[0].shape, blocks.extras["logp"].leaves[0].dtype.name
            ((4, 2), 'float32')
        """
        rows = self.step_rows
        if self.actions is None:
            self.actions = Column.for_batch(actions, rows)
        for key, value in extras.items():
            if key not in self.extras:
                self.extras[key] = Column.for_batch(value, rows)

    def put_outputs(self, row: int, actions: Any, extras: dict[str, Any]) -> None:
        """Writes the policy's actions and extra outputs of row ``row``.

        The runner writes them before the env steps: an env may write its next observations
        into the buffer the policy read (gymnasium's ``SyncVectorEnv(copy=False)``, simulators
        on a device), or clip the actions in place, and outputs that are views of either would
        change under the env.

        Raises:
            ValueError: A field's values are of a dtype its column cannot take
                (``Column.widened``), or the extra outputs' keys changed.

        Example:
            >>> blocks = Blocks.allocate(np.zeros(2), rows=3)
            >>> blocks.put_outputs(1, np.array([1, 0]), {"vf": np.array([0.5, 0.7])})
            >>> blocks.actions.leaves[0][1].tolist(), blocks.extras["vf"].leaves[0][1].tolist()
            ([1, 0], [0.5, 0.7])
        """
        if self.actions is None or len(extras) != len(self.extras):
            self.ensure_outputs(actions, extras)
        assert self.actions is not None
        self.actions.put(row, actions, "the policy's actions")
        columns = self.extras
        try:
            for key, value in extras.items():
                extra = columns[key]
                leaf = extra.leaves[0]
                if extra.structure is None and value.dtype is leaf.dtype:  # no call per step
                    leaf[row] = value
                else:
                    extra.put(row, value, f"the policy's extra output {key!r}")
        except KeyError as err:  # the same number of outputs under another key
            raise ValueError(
                f"the policy's extra outputs changed from {sorted(columns)} to "
                f"{sorted(extras)}: a runner records the same extra outputs at every step"
            ) from err

    def put_env_step(
        self, row: int, obs: Any, rewards: Any, terminateds: Any, truncateds: Any
    ) -> None:
        """Writes what the env's step returned, all checked before anything is written.

        Row ``row`` of the flags and rewards, row ``row + 1`` of ``obs``.

        Raises:
            ValueError: The observations, rewards or flags do not hold one item per sub-env of
                the blocks' shapes, or observations of a dtype the column cannot take.

        Example:
            >>> blocks = Blocks.allocate(np.zeros(2), rows=3)
            >>> no = np.zeros(2, bool)
            >>> blocks.put_env_step(0, np.array([0.5, 0.7]), np.ones(2), no, no)
            >>> blocks.obs.leaves[0][1].tolist(), blocks.rewards[0].tolist()
            ([0.5, 0.7], [1.0, 1.0])
        """
        # A malformed batch would be broadcast over the row (one shape comparison per leaf).
        column = self.obs
        obs_values = None  # a single leaf of the right shape: written without a list
        if column.structure is not None or getattr(obs, "shape", None) != column.shapes[0]:
            obs_values = column.leaves_of(obs, "the env's observations")
        width = column.shapes[0][:1]  # (num_envs,)
        if rewards.shape != width or terminateds.shape != width or truncateds.shape != width:
            named = zip(("rewards", "terminated", "truncated"), (rewards, terminateds, truncateds))
            name, value = next((n, v) for n, v in named if v.shape != width)
            # A trailing axis of one is the usual slip (a [N, 1] reward tensor of a torch
            # simulator): say how to drop it rather than only that the shape is wrong.
            hint = "; squeeze its last axis" if tuple(value.shape) == (*width, 1) else ""
            raise ValueError(
                f"the env's {name}: got shape {tuple(value.shape)}, expected {tuple(width)} "
                f"(one per sub-env){hint}"
            )
        self.rewards[row] = rewards
        self.terminated[row] = terminateds
        self.truncated[row] = truncateds
        if obs_values is None:
            column.put(row + 1, obs, "the env's observations")  # checked above: its fast path
        else:
            column.put_leaves(row + 1, obs_values, "the env's observations")

    def sharing(self: BlocksT) -> BlocksT:
        """Blocks over the same arrays with columns of their own (see ``Column.widened``).

        Example:
            >>> blocks = Blocks.allocate(np.zeros(2), rows=2)
            >>> twin = blocks.sharing()
            >>> twin.obs is blocks.obs, twin.obs.leaves[0] is blocks.obs.leaves[0]
            (False, True)
        """

        def own(column: Column) -> Column:
            return type(column)(list(column.leaves), column.structure)

        return dataclasses.replace(
            self,
            obs=own(self.obs),
            actions=None if self.actions is None else own(self.actions),
            extras={key: own(column) for key, column in self.extras.items()},
        )

    def resized(self, step_rows: int) -> Blocks:
        """Blocks with ``step_rows`` step rows holding these blocks' first rows.

        Example:
            >>> blocks = Blocks.allocate(np.zeros(2), rows=2)
            >>> blocks.rewards[:] = [[1.0, 2.0], [3.0, 4.0]]
            >>> grown = blocks.resized(3)
            >>> grown.step_rows, grown.obs.rows, grown.rewards[:2].tolist()
            (3, 4, [[1.0, 2.0], [3.0, 4.0]])
        """

        def grow(array: np.ndarray) -> np.ndarray:
            return Column([array], None).resized(step_rows).leaves[0]

        return Blocks(
            obs=self.obs.resized(step_rows + 1),
            rewards=grow(self.rewards),
            terminated=grow(self.terminated),
            truncated=grow(self.truncated),
            dead=grow(self.dead),
            actions=None if self.actions is None else self.actions.resized(step_rows),
            extras={key: column.resized(step_rows) for key, column in self.extras.items()},
            times=None if self.times is None else resized_times(self.times, step_rows),
        )

    def rows_between(self, first: int, stop: int) -> Blocks:
        """Step rows ``first:stop`` (``obs``: one more) as blocks of views, renumbered from 0.

        Example:
            >>> blocks = Blocks.allocate(np.zeros((2, 3)), rows=5)
            >>> blocks.rows_between(1, 3).obs.rows, blocks.rows_between(1, 3).step_rows
            (3, 2)
        """

        def cut(column: Column, extra: int = 0) -> Column:
            return Column([leaf[first : stop + extra] for leaf in column.leaves], column.structure)

        return Blocks(
            obs=cut(self.obs, 1),
            rewards=self.rewards[first:stop],
            terminated=self.terminated[first:stop],
            truncated=self.truncated[first:stop],
            dead=self.dead[first:stop],
            actions=None if self.actions is None else cut(self.actions),
            extras={key: cut(column) for key, column in self.extras.items()},
            times=None if self.times is None else self.times[first : stop + 1],
        )

    def successor(self, first: int, stop: int, rows: int) -> Blocks:
        """New blocks of ``rows`` step rows (same layouts) starting with rows ``first:stop``.

        One copy per field: what the next call continues from (``stop - first <= rows``).

        Example:
            >>> blocks = Blocks.allocate(np.zeros(2), rows=4)
            >>> blocks.rewards[:, 0] = [1.0, 2.0, 3.0, 4.0]
            >>> nxt = blocks.successor(2, 4, rows=3)
            >>> nxt.step_rows, nxt.rewards[:, 0].tolist()
            (3, [3.0, 4.0, 0.0])
        """

        def like(column: Column, count: int) -> Column:
            leaves = [new_leaf((count, *leaf.shape[1:]), leaf.dtype) for leaf in column.leaves]
            for new, old in zip(leaves, column.leaves):
                new[: stop - first + (count - rows)] = old[first : stop + (count - rows)]
            return Column(leaves, column.structure)

        def flat(array: np.ndarray) -> np.ndarray:
            out = np.zeros((rows, *array.shape[1:]), array.dtype)
            out[: stop - first] = array[first:stop]
            return out

        return Blocks(
            obs=like(self.obs, rows + 1),
            rewards=flat(self.rewards),
            terminated=flat(self.terminated),
            truncated=flat(self.truncated),
            dead=flat(self.dead),
            actions=None if self.actions is None else like(self.actions, rows),
            extras={key: like(column, rows) for key, column in self.extras.items()},
            times=None if self.times is None else shifted_times(self.times, first, stop, rows),
        )
