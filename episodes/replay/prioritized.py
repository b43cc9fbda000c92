"""``PrioritizedEpisodeReplayBuffer``: proportional prioritized replay (PER) over episodes."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from episodes.episode import SingleAgentEpisode
from episodes.replay import sampling
from episodes.replay.batch_source import batch_items, forget_token, tagged
from episodes.replay.buffer import EpisodeReplayBuffer
from episodes.replay.integers import holds_bool
from episodes.replay.item_slots import find_slots
from episodes.replay.priority_state import is_real as _is_real
from episodes.replay.priority_state import leaf_of, parsed_priorities, priority_values
from episodes.replay.sample_keywords import refuse_sample_keywords, taken_by
from episodes.replay.sequence_priorities import importance_weights, prioritized_sequences
from episodes.replay.state import parsed_state
from episodes.replay.store import StepStore
from episodes.replay.sum_tree import SumTree
from episodes.structs import short_repr

__all__ = ["PrioritizedEpisodeReplayBuffer"]

# The least priority stored: RLlib 2.60 raises every priority below 1e-12 to 1e-12 too.
PRIORITY_FLOOR = 1e-12
# sample()'s own keywords, then those it passes on, as the refusals list them.
_SAMPLE_KEYWORDS = ["num_items", "beta"] + taken_by(EpisodeReplayBuffer.sample)[1:]


class PrioritizedEpisodeReplayBuffer(EpisodeReplayBuffer):
    """Transitions and sequence starts drawn with probability ``p_i^alpha / sum_j p_j^alpha``.

    New steps get the largest priority seen so far. Batches carry ``weights``, the importance
    weights ``(N P(i))^-beta`` divided by their maximum over the whole buffer (the PER paper's
    normalization), and ``indices`` for :meth:`update_priorities`. A sequence's first
    (non-lookback) step is drawn so among the steps that may start one (R2D2's prioritized
    sequences; one weight per sequence); episode chunks are drawn uniformly.

    Args:
        capacity: Steps to keep.
        batch_size_B: Default batch size.
        alpha: Priority exponent (0: uniform).
        seed: Seed of the sampling generator.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> buf = PrioritizedEpisodeReplayBuffer(100, alpha=1.0, seed=0)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
        ...                            rewards=[0.0, 1.0], len_lookback_buffer=0))
        >>> batch = buf.sample(2, beta=0.4)
        >>> buf.update_priorities(np.array([3.0, 1.0]), batch["indices"][:1].repeat(2))
        >>> buf.get_priorities(batch["indices"][:1]).tolist()
        [1.0]
    """

    #: The starting priority of the ``add`` under way (None: ``max_priority``); a class
    #: default, so that a buffer pickled before ``add`` took a weight still adds.
    _weight: float | None = None
    _sequences = False  # whether the last indices are a sequence sample's starts

    def __init__(
        self,
        capacity: int = 10_000,
        *,
        batch_size_B: int = 16,
        alpha: float = 1.0,
        seed: Any = None,
    ):
        if not _is_real(alpha) or not 0 <= float(alpha) < math.inf:
            raise ValueError(f"alpha must be a finite float >= 0, got {alpha!r}")
        super().__init__(capacity, batch_size_B=batch_size_B, seed=seed)
        self._alpha = float(alpha)
        self._tree = SumTree(64)
        # The priorities as set, per slot: the tree's p ** alpha gives no p for alpha ~ 0.
        self._raw = np.zeros(64)
        self._max_priority = 1.0
        self._beta = 0.0
        self._last_indices: np.ndarray | None = None
        self._last_slots: tuple[np.ndarray, int, int] | None = None  # slots, moves, kills
        self._no_last = "nothing sampled yet"  # why there are no last indices, for the error
        self._kills = 0

    @property
    def alpha(self) -> float:
        """The priority exponent (read-only: the tree holds every priority to its power).

        Example:
            >>> PrioritizedEpisodeReplayBuffer(10, alpha=0.6).alpha
            0.6
        """
        return self._alpha

    @property
    def max_priority(self) -> float:
        """The priority new steps get: the largest ever given (1.0 at first); settable.

        Every value an ``update_priorities`` call takes counts, as in RLlib, also one that a
        repeated index overwrote within the same call.

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> buf = PrioritizedEpisodeReplayBuffer(10)
            >>> buf.max_priority = 4.0
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0], actions=[0], rewards=[1.0],
            ...                            len_lookback_buffer=0))
            >>> buf.get_priorities([0]).tolist()
            [4.0]
            >>> buf.max_priority = 0.0
            Traceback (most recent call last):
            ...
            ValueError: max_priority must be finite and > 0, got 0.0
        """
        return self._max_priority

    @max_priority.setter
    def max_priority(self, value: float) -> None:
        if not _is_real(value) or not 0 < float(value) < math.inf:
            raise ValueError(f"max_priority must be finite and > 0, got {value!r}")
        self._leaf_of(float(value), self._alpha)  # new steps get it: refused if unusable
        self._max_priority = float(value)

    _leaf_of = staticmethod(leaf_of)  # priority ** alpha, refused when 0 or inf

    # ------------------------------------------------------------------------- store hooks
    def _on_reserve(self) -> None:
        # Before add changes anything: a tree or array too large for memory refuses the add.
        if self._store.size > self._tree.capacity:
            tree = SumTree(self._store.size)
            tree.rebuild(self._tree.leaves())
            self._tree = tree
        if self._store.size > len(self._raw):
            self._raw = np.concatenate([self._raw, np.zeros(self._store.size - len(self._raw))])

    def _on_append(self, slots: np.ndarray) -> None:
        self._on_reserve()  # nothing to do after add's own call
        start = self._max_priority if self._weight is None else self._weight
        self._tree._write(slots, np.full(len(slots), self._leaf_of(start, self.alpha)))
        self._raw[slots] = start

    def _check_fit(self, chunks: list[Any]) -> None:
        super()._check_fit(chunks)
        # Checked before anything is stored: new steps get max_priority each (or add's weight).
        start = self._max_priority if self._weight is None else self._weight
        leaf = self._leaf_of(start, self.alpha)
        if not math.isfinite(self._tree.total + sum(chunk.n for chunk in chunks) * leaf):
            what = "max_priority" if self._weight is None else "weight"
            raise ValueError(
                f"adding these steps at {what}={start} would make the sum of all priorities "
                "infinite"
            )

    def add(
        self,
        episodes: SingleAgentEpisode | Iterable[SingleAgentEpisode],
        weight: float | None = None,
        *,
        on_evicted: str = "raise",
    ) -> None:
        """:meth:`EpisodeReplayBuffer.add`; the new steps start at ``weight`` (RLlib's argument).

        ``weight=None`` starts them at :attr:`max_priority`, so that each is drawn soon; a
        weight is a finite priority > 0 (below :data:`PRIORITY_FLOOR` stored as that floor, as
        :meth:`update_priorities` stores one), which leaves ``max_priority`` as it is.
        ``on_evicted`` is :meth:`EpisodeReplayBuffer.add`'s.

        Raises:
            ValueError: A weight that is not a finite number > 0, or what ``add`` refuses.

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> buf = PrioritizedEpisodeReplayBuffer(10, seed=0)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                            rewards=[1.0, 1.0], len_lookback_buffer=0), weight=3.0)
            >>> buf.get_priorities(buf.get_episode_indices("a")).tolist(), buf.max_priority
            ([3.0, 3.0], 1.0)
        """
        if weight is not None and (not _is_real(weight) or not 0 < float(weight) < math.inf):
            raise ValueError(f"weight must be a finite priority > 0 or None, got {weight!r}")
        # Floored as update_priorities floors a priority: a tinier one would weigh its items 0.
        self._weight = None if weight is None else max(float(weight), PRIORITY_FLOOR)
        try:
            super().add(episodes, on_evicted=on_evicted)
        finally:
            self._weight = None

    def _on_kill(self, slots: np.ndarray) -> None:
        self._tree._write(slots, np.zeros(len(slots)))
        self._kills += 1  # sampled slots may be dead now

    def _remapped(self, remap: np.ndarray) -> dict[str, Any]:
        leaves = self._tree.leaves()
        old = np.flatnonzero(remap[:-1] >= 0)
        moved = np.zeros(self._tree.capacity)
        moved[remap[old]] = leaves[old]
        tree = SumTree(self._tree.capacity)  # made aside: _compact swaps it in
        tree.rebuild(moved)
        raw = np.zeros(len(self._raw))
        raw[remap[old]] = self._raw[old]
        return {"_tree": tree, "_raw": raw}

    # ------------------------------------------------------------------------------ sample
    def sample(self, num_items: int | None = None, *, beta: float = 0.0, **kwargs: Any) -> Any:
        """:meth:`EpisodeReplayBuffer.sample` with prioritized transitions.

        Args:
            num_items: Items to draw.
            beta: Importance-weight exponent (0: all weights 1; 1: full correction). With
                ``batch_length_T`` one weight per sequence (``[B]``), that of its first
                (non-lookback) step; with ``sample_episodes`` (drawn uniformly, without
                weights) another beta than 0 is a ``ValueError``.
            **kwargs: As :meth:`EpisodeReplayBuffer.sample`. With ``batch_length_T`` each
                sequence's first step is drawn by priority among the steps that may start
                one (``pad=False``: ``batch_length_T`` steps left in its episode), the rest
                of the batch is the uniform buffer's for those starts, and
                :meth:`update_priorities` without indices sets the starts' priorities.

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> buf = PrioritizedEpisodeReplayBuffer(10, seed=0)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                            rewards=[1.0, 1.0], len_lookback_buffer=0))
            >>> buf.update_priorities([4.0, 1.0], [0, 1])
            >>> batch = buf.sample(1000, beta=1.0)  # item 0 drawn with probability 4/5
            >>> round(float((batch["indices"] == 0).mean()), 1)
            0.8
            >>> sorted(set(batch["weights"].tolist()))  # (p_i / p_min) ** -beta
            [0.25, 1.0]
        """
        # Named as this class's, not the base's; beta is taken here, not refused as there.
        refuse_sample_keywords(
            type(self).__name__, [k for k in kwargs if k not in _SAMPLE_KEYWORDS], _SAMPLE_KEYWORDS
        )
        # _is_real first: a str, None, complex or array refused as documented, not a TypeError.
        if not _is_real(beta) or not 0 <= float(beta) < math.inf:
            raise ValueError(f"beta must be a finite float >= 0, got {beta!r}")
        episodes = kwargs.get("sample_episodes", False)  # its type judged before its meaning
        if beta and sampling.check_flag(episodes, "sample_episodes"):
            # Reported, not ignored: episodes are drawn uniformly and carry no weights.
            raise ValueError(
                "beta applies to transitions and sequences (their importance weights); "
                "episodes are drawn uniformly and carry no weights: leave beta at 0 there"
            )
        self._beta = float(beta)
        previous = self._last_indices, self._last_slots, self._no_last, self._sequences
        # An episode sample has no items to update: an update_priorities() without indices
        # after it must not reach back to an older batch.
        self._last_indices = self._last_slots = None
        self._no_last = "it drew episodes"
        try:
            batch = super().sample(num_items, **kwargs)
        except BaseException:
            # A refused or interrupted sample changes nothing.
            self._last_indices, self._last_slots, self._no_last, self._sequences = previous
            raise
        if self._last_indices is None:  # episodes: no items to update
            return batch
        column = int(kwargs.get("lookback", 0)) if self._sequences else None  # first steps
        return tagged(batch, self, column)  # a dict that knows its buffer

    def _sample(
        self,
        size: int,
        batch_length_T: int | None,
        n_step: Any,
        gamma: float,
        include_infos: bool,
        include_extra_model_outputs: bool,
        sample_episodes: bool,
        lookback: int,
        pad: bool,
    ) -> Any:
        infos, extras = include_infos, include_extra_model_outputs
        if batch_length_T is None or sample_episodes:  # transitions, or episodes (uniform)
            args = (n_step, gamma, infos, extras, sample_episodes, lookback, pad)
            return super()._sample(size, batch_length_T, *args)
        store, table, tree, rng, beta = self._store, self._table, self._tree, self.rng, self._beta
        batch, starts = prioritized_sequences(
            store, table, tree, rng, size, batch_length_T, lookback, pad, beta, infos, extras
        )
        self._remember(starts)
        self._sequences = True
        return batch

    def _draw_transitions(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        tree = self._tree
        masses = self.rng.random(size)
        masses *= tree.total
        slots = tree.find(masses)
        # (N P(i))^-beta over the largest weight, that of the smallest priority: the N and the
        # total cancel, leaving (p_i / p_min)^-beta <= 1.
        weights = importance_weights(tree.leaves(slots), tree.min, self._beta)
        self._remember(slots)
        self._sequences = False
        return slots, weights

    def _remember(self, slots: np.ndarray) -> None:
        # The drawn items (a sequence's first step) for update_priorities() without indices.
        self._last_indices = self._store.uid[slots]
        self._last_slots = (slots, self._store.moves, self._kills)

    # -------------------------------------------------------------------------- priorities
    def update_priorities(
        self, priorities: Any, indices: Any = None, *, module_id: Any = None
    ) -> None:
        """Sets the priorities of sampled items (by default the last sample's).

        The last sample's items are its transitions, or the first (non-lookback) steps of its
        sequences: one priority per sequence, ``[B]``. ``module_id`` (RLlib's, as a keyword) is
        ignored: the buffer holds one module's steps. ``indices`` may be the batch itself
        (``update_priorities(td, batch)``): its items, refused unless this buffer drew it.

        Items evicted since they were sampled are skipped; a repeated index keeps its last
        priority. A priority below :data:`PRIORITY_FLOOR` (``1e-12``, RLlib's floor), a TD error
        of 0 say, is stored as that floor: the item stays drawable, rarely.

        Raises:
            ValueError: No indices (nothing sampled yet, the last sample drew episodes, or
                none since ``set_state``, as a state holds no last sample; a
                string there, RLlib's ``module_id``, too; the message says which), lengths differ,
                priorities that are negative, NaN or infinite, or whose power ``alpha`` is 0 or
                infinite, or indices this buffer never issued (float indices beside integer
                priorities: TorchRL's ``update_priority(index, priority)`` order, said so).
                A batch of another buffer or drawn before ``set_state`` (or ``load``) is
                refused too (:mod:`episodes.replay.batch_source`). Nothing changes then.

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> buf = PrioritizedEpisodeReplayBuffer(10, seed=0)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                            rewards=[1.0, 1.0], len_lookback_buffer=0))
            >>> batch = buf.sample(1)
            >>> buf.update_priorities([5.0])  # the last sample's items
            >>> buf.get_priorities(batch["indices"]).tolist(), buf.max_priority
            ([5.0], 5.0)
        """
        cached = None
        if isinstance(indices, Mapping):  # a sampled batch: refused unless this buffer drew it
            indices, last = batch_items(indices, self), self._last_indices
            if last is not None and indices.shape == last.shape and (indices == last).all():
                indices, cached = last, self._last_slots  # the last sample, rows as drawn
        if indices is None:
            indices, cached = self._last_indices, self._last_slots
        if indices is None:
            raise ValueError(
                "update_priorities needs indices: the last sample drew no transitions or "
                f"sequences ({self._no_last}); pass the batch's 'indices'"
            )
        if isinstance(indices, (str, bytes)):  # RLlib's second argument is a module id
            raise ValueError(
                f"indices must be a batch's item indices, got {short_repr(indices)}: RLlib's "
                "update_priorities(priorities, module_id) takes a module id there; this buffer "
                "has none, so call update_priorities(priorities) for the last sample's items"
            )
        idx = _host(indices, name="indices")
        prio = _host(priorities, name="priorities")
        if (
            idx.size
            and idx.dtype.kind == "f"
            and prio.dtype.kind in "iu"
            and not holds_bool(priorities)
        ):
            # TorchRL's update_priority(index, priority) is the other way round: say so
            raise ValueError(
                f"indices must be integers, got dtype {getattr(indices, 'dtype', idx.dtype)}: "
                "update_priorities takes the priorities first, then the indices (TorchRL's "
                "update_priority(index, priority) takes the index first)"
            )
        if prio.size and (prio.dtype.kind not in "iuf" or holds_bool(priorities)):  # [1.0, False]
            kind = "bool" if prio.dtype.kind in "iuf" else prio.dtype  # no strings, bools, complex
            raise ValueError(f"priorities must be real numbers, got dtype {kind}")
        prio = prio.astype(np.float64, copy=False)
        if idx.ndim != 1 or prio.ndim != 1 or len(idx) != len(prio):
            per = "; the last sample drew sequences: one priority each" * self._sequences
            if idx.ndim == 2 and prio.shape == idx.shape:  # TorchRL's per-step slice habit
                per = "; per step of [B, T] sequences: priorities[m], indices[m], m = batch['mask']"
            raise ValueError(
                f"priorities (shape {prio.shape}) and indices (shape {idx.shape}) must be 1-d "
                f"and equally long{per if cached is not None or idx.ndim == 2 else ''}"
            )
        if not len(idx):
            return
        top = float(prio.max())
        low = float(prio.min())
        if not (low >= 0 and top < np.inf):  # NaN fails both
            bad = prio[~(np.isfinite(prio) & (prio >= 0))][:5]
            raise ValueError(f"priorities must be finite and >= 0, got {bad.tolist()}")
        if low < PRIORITY_FLOOR:  # a TD error of 0: RLlib's floor, drawn with a tiny probability
            prio = np.maximum(prio, PRIORITY_FLOOR)
            top = max(top, PRIORITY_FLOOR)  # the largest value stored, as RLlib takes it
        if cached is not None and cached[1:] == (self._store.moves, self._kills):
            slots = cached[0]  # the sampled slots, all still live: no search needed
        else:
            idx = _issued(indices, self._store.next_uid)  # as given: idx may hold floats
            slots, found = self._find(idx)
            if not found.all():  # evicted items: skipped, their priorities too
                slots, prio = slots[found], prio[found]
                top = float(prio.max(initial=0.0))
        with np.errstate(over="ignore", under="ignore"):
            leaves = prio**self.alpha if self.alpha != 1.0 else prio
        if not (leaves.min(initial=np.inf) > 0 and leaves.max(initial=0.0) < np.inf):
            bad = prio[~(np.isfinite(leaves) & (leaves > 0))][:5]
            raise ValueError(
                f"priorities {bad.tolist()} to the power alpha={self.alpha} are 0 or infinite"
            )
        if not self._tree._sum_stays_finite(slots, leaves):
            raise ValueError("these priorities would make the sum of all priorities infinite")
        self._tree._write(slots, leaves)
        self._raw[slots] = prio  # a repeated slot keeps its last priority, as in the tree
        self._max_priority = max(self._max_priority, top)

    def get_priorities(self, indices: Any) -> np.ndarray:
        """Current priorities (before ``alpha``) of stored items; ``KeyError`` for evicted ones.

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> buf = PrioritizedEpisodeReplayBuffer(10, alpha=0.5)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                            rewards=[1.0, 1.0], len_lookback_buffer=0))
            >>> buf.update_priorities([4.0, 9.0], [0, 1])
            >>> buf.get_priorities([1, 0]).tolist()
            [9.0, 4.0]
        """
        idx = _issued(indices, self._store.next_uid)
        slots, found = self._find(idx.ravel())
        if not found.all():
            raise KeyError("some indices are no longer stored")
        return self._raw[slots].reshape(idx.shape)

    def _find(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        store = self._store
        return find_slots(store.uid[: store.end], store.live[: store.end], idx)

    # ------------------------------------------------------------------------------- state
    def get_state(self) -> dict[str, Any]:
        """:meth:`EpisodeReplayBuffer.get_state` plus priorities and ``alpha``.

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> buf = PrioritizedEpisodeReplayBuffer(10)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                            rewards=[1.0, 1.0], len_lookback_buffer=0))
            >>> buf.update_priorities([2.0, 1.0], [0, 1])
            >>> extra = buf.get_state()["prioritized"]
            >>> extra["alpha"], extra["max_priority"], extra["leaves"].tolist()
            (1.0, 2.0, [2.0, 1.0])
        """
        state = super().get_state()
        keep = np.flatnonzero(self._store.live[: self._store.end])
        state["prioritized"] = {
            "alpha": self.alpha,
            "max_priority": self._max_priority,
            "leaves": self._tree.leaves(keep),
            "priorities": self._raw[keep].copy(),
        }
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores :meth:`get_state` (a uniform buffer's state gets priority 1 everywhere).

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> uniform = EpisodeReplayBuffer(10)
            >>> uniform.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                                rewards=[1.0, 1.0], len_lookback_buffer=0))
            >>> buf = PrioritizedEpisodeReplayBuffer(10)
            >>> buf.set_state(uniform.get_state())
            >>> buf.get_priorities([0, 1]).tolist(), buf.get_num_timesteps()
            ([1.0, 1.0], 2)
        """
        parts = parsed_state(state, self._store.next_uid)  # checked before this buffer changes
        store: StepStore = parts["_store"]
        leaves = np.zeros(store.end)
        raw = np.zeros(max(store.size, 1))
        live = np.flatnonzero(store.live[: store.end])  # where the state's rows were placed
        extra = state.get("prioritized")
        alpha, top = self.alpha, 1.0
        if extra is None:
            leaves[live] = raw[live] = 1.0
        else:
            try:
                alpha, top, leaves[live], raw[live] = parsed_priorities(extra, len(live))
            except (TypeError, ValueError) as err:
                raise ValueError(f"a broken replay buffer state: {err}") from None
        tree = SumTree(max(store.size, 1))
        tree.rebuild(leaves)
        for name, value in parts.items():
            setattr(self, name, value)
        self._alpha, self._max_priority, self._tree, self._raw = alpha, top, tree, raw
        self._last_indices = None
        self._last_slots = None
        self._no_last = "none since set_state: a state holds no last sample, RLlib's does"
        forget_token(self)  # the batches drawn before may name other steps now

    def _set_saved_priorities(self, priorities: np.ndarray, first: int = 0) -> None:
        """Sets the priorities of items ``first .. first + N - 1`` (a loaded save's) as given.

        Checked as :meth:`set_state` checks a state's: finite real values above 0 whose power
        ``alpha`` is above 0 and finite, of a finite sum. No floor is applied: a priority
        below ``1e-12`` that ``max_priority`` gave comes back as it was saved, and a 0 is
        refused, as no buffer holds one.

        Raises:
            ValueError: Priorities that are not so; nothing changes then.
        """
        count = len(priorities)
        slots, found = self._find(np.arange(first, first + count))
        if not found.all() or count != self.get_num_timesteps():
            raise ValueError(f"{count} priorities for {self.get_num_timesteps()} stored steps")
        prio = np.asarray(priorities, np.float64)
        bad = prio[~(np.isfinite(prio) & (prio > 0))]
        if len(bad):
            raise ValueError(f"priorities must be finite and above 0, got {bad[:5].tolist()}")
        with np.errstate(over="ignore", under="ignore"):
            leaves = prio**self.alpha if self.alpha != 1.0 else prio
        priority_values(leaves, f"priorities to the power alpha={self.alpha}", count, summed=True)
        self._tree._write(slots, leaves)
        self._raw[slots] = prio
        self._max_priority = max(self._max_priority, float(prio.max(initial=0.0)))


def _host(values: Any, dtype: Any = None, name: str = "values") -> np.ndarray:
    """Numpy values of a list, array or torch tensor (any device or dtype, with grad too)."""
    if hasattr(values, "detach") and hasattr(values, "cpu"):  # a torch tensor (no import)
        values = values.detach().cpu()
        if dtype is not None or values.is_floating_point():  # bfloat16 has no numpy dtype
            values = values.double()
        values = values.numpy()
    try:
        return np.asarray(values, dtype)
    except (ValueError, TypeError) as error:  # ragged: numpy's inhomogeneous-shape words
        raise ValueError(f"{name} must be a 1-d sequence of numbers, got {values!r:.80}") from error


def _issued(indices: Any, next_uid: int) -> np.ndarray:
    """Item indices as int64, refused unless integers this buffer may have issued."""
    if hasattr(indices, "detach") and hasattr(indices, "dtype") and indices.is_floating_point():
        # _host reads a float tensor as float64: its own dtype is named (torch.float32)
        raise ValueError(f"indices must be integers, got dtype {indices.dtype}")
    host = _host(indices, name="indices")  # a tensor's values; a ragged list refused by name
    # A list's items decide, as in get_transitions: numpy makes int64 and uint64 ones floats.
    given = host if isinstance(indices, np.ndarray) or hasattr(indices, "detach") else indices
    idx = sampling.int_array(given, "indices")
    if idx.size and (idx.min() < 0 or idx.max() >= next_uid):
        pad = "-1 is a sequence batch's padding, where its mask is False: pass indices[mask]"
        hint = pad if -1 in idx else "use a batch's 'indices'"
        raise ValueError(f"indices the buffer never issued ({hint})")
    return idx.astype(np.int64)
