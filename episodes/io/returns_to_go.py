"""Returns-to-go and env timesteps of ``SequenceDataset`` windows: a Decision Transformer's inputs.

``SequenceDataset(path, length=K, returns_to_go=gamma)`` adds two columns to each item:
``returns_to_go`` (``K`` float64: each step's discounted return to the end of its run, not of
the window) and ``timesteps`` (``K`` int64: each step's env time, ``t_started`` included), both
0 where a ``pad=True`` window is padded. A window holds its own rewards only, so
:class:`RunReturns` reads every rewards column once, at the process's first item, into one
table of float64 per step (the runs that give items), the suffix sums of each run; an item then
copies its ``K`` values from it.

A run is what the dataset's windows go over (:mod:`episodes.io.piece_windows`): an episode's
pieces that continue one another. Where they do not (steps left out or stored twice), each
run's returns go to its own last step, as no window crosses from one to the next; a running
episode's returns go to its last stored step (the return so far).

Example:
    >>> import tempfile
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import DatasetWriter
    >>> from episodes.io.torch_data import SequenceDataset
    >>> path = tempfile.mkdtemp()
    >>> with DatasetWriter(path) as w:  # one episode in two pieces
    ...     w.write(SingleAgentEpisode("a", observations=[0, 1, 2], actions=[0, 0],
    ...                                rewards=[1.0, 2.0], t_started=5, len_lookback_buffer=0))
    ...     w.write(SingleAgentEpisode("a", observations=[2, 3], actions=[0], rewards=[4.0],
    ...                                t_started=7, terminated=True, len_lookback_buffer=0))
    >>> item = SequenceDataset(path, length=2, returns_to_go=1.0)[0]
    >>> item["returns_to_go"].tolist(), item["timesteps"].tolist()
    ([7.0, 6.0], [5, 6])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from episodes.arguments import discount_factor
from episodes.io.errors import CorruptDatasetError
from episodes.io.item_steps import RunHeads
from episodes.io.nstep import discount_weights, summable_rewards
from episodes.io.shard_columns import _plan
from episodes.structs import short_repr

__all__ = ["RunReturns", "run_returns", "suffix_returns"]


def run_returns(returns_to_go: Any, types: dict[str, Any] | None) -> RunReturns | None:
    """``SequenceDataset``'s ``returns_to_go`` keyword checked: None, or a :class:`RunReturns`.

    ``types`` is the dataset's joined item types (:mod:`episodes.io.item_types`): rewards of
    more than one number per step are refused here, not at the first item inside a worker.

    Raises:
        ValueError: ``returns_to_go`` is neither None nor a discount in ``[0, 1]`` (a bool
            too), or the dataset's rewards are not one number per step (multi-objective).
        TypeError: Complex rewards (a float64 sum would drop their imaginary parts).

    Example:
        >>> run_returns(None, {}) is None, run_returns(0.5, {}).gamma
        (True, 0.5)
        >>> run_returns(True, {})
        Traceback (most recent call last):
        ...
        ValueError: returns_to_go must be None or a discount gamma in [0, 1], got True
    """
    if returns_to_go is None:
        return None
    try:
        gamma = discount_factor(returns_to_go)
    except ValueError:
        raise ValueError(
            "returns_to_go must be None or a discount gamma in [0, 1], got "
            f"{short_repr(returns_to_go)}"
        ) from None
    joined = (types or {}).get("rewards")
    if joined is not None:
        (paths, leaves), piece = joined
        if paths != ((),) or leaves[0][1] != ():
            shape = f"of shape {leaves[0][1]}" if paths == ((),) else "nested"
            raise ValueError(
                f"returns_to_go sums one number per step, and the rewards of piece {piece} "
                f"are {shape} (multi-objective): leave returns_to_go out and sum the "
                "items' rewards per component"
            )
        if leaves[0][0].kind == "c":
            raise TypeError(
                f"returns_to_go needs real rewards, and piece {piece}'s are complex "
                f"({leaves[0][0]}): a float64 sum would drop their imaginary parts"
            )
    return RunReturns(gamma)


def suffix_returns(rewards: np.ndarray, left: np.ndarray, gamma: float) -> np.ndarray:
    """``rewards`` (float64) made, in place, each step's discounted return over ``left`` steps.

    ``rewards[t]`` becomes ``sum(gamma**j * rewards[t + j] for j < left[t])``, ``left[t]``
    counting the steps from ``t`` to its run's end (``t`` included): runs lie one after the
    other, each step's ``left`` one less than the step before it in its run. The sums are
    made by doubling (``log2`` of the longest run passes over the array, each adding the
    partial sums ``d`` steps ahead inside the run), so they hold the same terms as a
    sequential sum, grouped in a balanced tree: exact where the rewards and every partial sum
    are floats (integer or half rewards, ``gamma`` 1 or 0.5), else within a few roundings. The
    weights are :func:`~episodes.io.nstep.discount_weights`'s: terms past its first weight of
    0 (all but the step's own with ``gamma=0``) are left out, not added as ``0 * reward``.

    Example:
        >>> rewards = np.array([1.0, 2.0, 4.0, 8.0, 16.0])  # runs of 3 and 2 steps
        >>> suffix_returns(rewards, np.array([3, 2, 1, 2, 1]), 0.5).tolist()
        [3.0, 4.0, 4.0, 16.0, 16.0]
    """
    weights = discount_weights(gamma, int(left.max(initial=0)))
    d = 1
    # A sum past float max is inf, inf and -inf NaN: valid results, no RuntimeWarning.
    with np.errstate(over="ignore", invalid="ignore"):
        while d < len(weights):
            ahead = rewards[d:] * weights[d]  # the partial sums d steps on, old values
            ahead[left[:-d] <= d] = 0.0  # t + d lies past t's run
            rewards[:-d] += ahead
            d *= 2
    return rewards


class RunReturns:
    """A ``SequenceDataset``'s returns-to-go table, made at the first window asked for.

    Memory: one float64 per step of the runs that give items, and two int64 per run, made
    once per process (while it is made, about three more per step for a moment). Pickled,
    it keeps only ``gamma``: a ``DataLoader`` worker started with a pickle makes its own at
    its first item, as it opens its own shards (a forked one shares its parent's, if made).

    Args:
        gamma: The discount of the returns, checked (:func:`run_returns`).

    Example:
        >>> import pickle
        >>> to_go = RunReturns(0.9)
        >>> pickle.loads(pickle.dumps(to_go)).gamma
        0.9
    """

    def __init__(self, gamma: float):
        self.gamma = gamma
        self._table: np.ndarray | None = None  # each run's suffix sums, run after run
        self._first = self._t0 = np.zeros(0, np.int64)  # per run: its table row, its env time

    def __getstate__(self) -> dict[str, Any]:
        return {"gamma": self.gamma}  # the table is made again where it is needed

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["gamma"])  # type: ignore[misc]

    def window(self, data: Any, run: int, t: int, steps: int) -> dict[str, np.ndarray]:
        """``returns_to_go`` and ``timesteps`` of run ``run``'s ``steps`` steps from ``t``.

        ``data`` is the ``SequenceDataset`` (its reader, runs and item counts are read once,
        the first time). Each window costs ``O(steps)``.

        Example:
            >>> import tempfile
            >>> from episodes import SingleAgentEpisode
            >>> from episodes.io import DatasetWriter
            >>> from episodes.io.torch_data import SequenceDataset
            >>> path = tempfile.mkdtemp()
            >>> with DatasetWriter(path) as w:
            ...     w.write(SingleAgentEpisode(observations=[0, 1, 2, 3], actions=[0, 0, 0],
            ...                                rewards=[1.0, 2.0, 4.0], len_lookback_buffer=0))
            >>> cols = RunReturns(0.5).window(SequenceDataset(path, length=2), 0, 1, 2)
            >>> cols["returns_to_go"].tolist(), cols["timesteps"].tolist()
            ([4.0, 4.0], [1, 2])
        """
        if self._table is None:
            self._make(data)
        assert self._table is not None
        a = int(self._first[run]) + t
        return {
            "returns_to_go": self._table[a : a + steps].copy(),
            "timesteps": int(self._t0[run]) + t + np.arange(steps, dtype=np.int64),
        }

    def _make(self, data: Any) -> None:
        """Reads the rewards of every piece giving items, shard by shard, and sums them."""
        reader, runs = data._open(), data._runs
        counts = np.diff(data._ends, prepend=0)
        lengths = np.where(counts > 0, runs.lengths, 0)
        first = np.cumsum(lengths) - lengths
        run_of = np.repeat(np.arange(len(lengths)), np.diff(runs.bounds))  # per piece entry
        at = first[run_of] + runs.starts  # where each piece's steps go in the table
        rewards = np.zeros(int(lengths.sum()), np.float64)
        entries = np.flatnonzero(counts[run_of] > 0)
        # In manifest order: each shard is read once, its pieces in order (no plan cached).
        for e in entries[np.argsort(runs.pieces[entries], kind="stable")].tolist():
            piece, n, a = int(runs.pieces[e]), int(runs.steps[e]), int(at[e])
            shard, j = reader.locate(piece)
            where = f"{shard.where} episode {j}"
            stored = _piece_rewards(shard, j, n, where)
            try:
                values = summable_rewards(stored)
            except (TypeError, ValueError) as err:  # complex, strings, ints beyond float
                raise type(err)(f"returns_to_go of {where}: {err}") from None
            if values.shape != (n,):
                raise ValueError(
                    f"returns_to_go of {where}: rewards of shape {values.shape[1:]} per step, "
                    "not one number (multi-objective): leave returns_to_go out"
                )
            rewards[a : a + n] = values
        left = np.repeat(first + lengths, lengths) - np.arange(len(rewards), dtype=np.int64)
        self._table = suffix_returns(rewards, left, self.gamma)
        self._first = first
        self._t0 = RunHeads(reader.summaries, runs).t_started


def _piece_rewards(shard: Any, j: int, steps: int, where: str) -> Any:
    """The shard's episode ``j``'s ``steps`` rewards, its rewards column alone planned.

    ``Shard.columns`` plans every column (views of each, a JSON column's checks), most of
    the time of a pass that needs the rewards only.
    """
    entry = shard.entry_of(j)
    meta = entry.get("meta") if isinstance(entry, dict) else None
    columns = meta.get("columns") if isinstance(meta, dict) else None
    column = columns.get("rewards") if isinstance(columns, dict) else None
    if column is None:
        raise CorruptDatasetError(f"{where}: malformed episode metadata (no rewards column)")
    plan = _plan((shard, *shard.part_of(j), entry, where), ["rewards"], column)
    if plan.size - plan.lookback != steps:
        raise CorruptDatasetError(
            f"{where} column rewards: {plan.size - plan.lookback} items after the lookback "
            f"for {steps} steps (the sizes disagree with the index)"
        )
    return plan.take(0, steps)
