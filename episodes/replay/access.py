"""Deterministic reads, counters and persistence entry points of the replay buffers."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, SupportsIndex, TypeAlias, TypeVar, cast, overload

import numpy as np

from episodes.episode import SingleAgentEpisode
from episodes.errors import IntegerTypeError
from episodes.replay import sampling
from episodes.replay.counters import remember_evicted
from episodes.replay.episode_lookup import episode_bounds, items_at, stored_row
from episodes.replay.errors import EmptyBufferError
from episodes.replay.metadata import with_clocks
from episodes.replay.sequences import build_episode
from episodes.replay.store import StepStore
from episodes.replay.table import EpisodeTable
from episodes.replay.transitions import transition_batch

if TYPE_CHECKING:
    from episodes.replay.buffer import EpisodeReplayBuffer

_Buffer = TypeVar("_Buffer", bound="BufferAccess")  # the class from_dataset is called on
# One integer (numpy's too) or a 1-d sequence of them: item indices, or times of an episode.
_Integers: TypeAlias = SupportsIndex | Sequence[SupportsIndex] | np.ndarray

__all__ = ["BufferAccess"]


class BufferAccess:
    """Reads by stable item index, episode copies, counters, save/load (mixed into the buffers).

    Example:
        >>> from episodes.replay import EpisodeReplayBuffer
        >>> buf = EpisodeReplayBuffer(10)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
        ...                            rewards=[1.0, 2.0], len_lookback_buffer=0))
        >>> buf.locate("a", 1).tolist(), buf.get_evicted_ids(), len(buf.get_episodes())
        ([1], [], 1)
    """

    _store: StepStore
    _table: EpisodeTable
    _spaces: tuple[Any, Any]
    _evicted: dict[Any, None]  # insertion-ordered: the eviction order
    _num_added: int
    _num_sampled: int
    _num_episodes_evicted: int
    capacity: int

    def __repr__(self) -> str:
        # Counts only: a long-lived buffer's contents would flood a log or a debugger.
        try:
            counts = f"episodes={len(self._table.order)}, timesteps={self._store.num_live}"
            alpha = getattr(self, "alpha", None)  # a prioritized buffer's
            more = "" if alpha is None else f", alpha={alpha}"
            return f"{type(self).__name__}(capacity={self.capacity}, {counts}{more})"
        except AttributeError:  # not set up (a subclass's __init__ failed before ours ran)
            return object.__repr__(self)

    def get_episode_indices(self, episode_id: Any) -> np.ndarray:
        """Stable item indices of every stored step of one episode, in time order.

        Raises:
            KeyError: The episode is not stored (the words say so, and "evicted" where the
                buffer remembers evicting it). ``TypeError``: not one hashable id (an array
                or list of ids: :meth:`episode_bounds` and :meth:`items_at` take the items of
                many episodes at once).

        Example:
            >>> from episodes.replay import EpisodeReplayBuffer
            >>> buf = EpisodeReplayBuffer(10)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0, 3.0],
            ...                            actions=[0, 1, 0], rewards=[1.0, 2.0, 3.0],
            ...                            terminated=True, len_lookback_buffer=0))
            >>> buf.get_episode_indices("a").tolist()
            [0, 1, 2]
            >>> buf.get_episode_indices("zz")
            Traceback (most recent call last):
            ...
            KeyError: "episode 'zz' is not stored"
        """
        row = stored_row(self._table, self._evicted, episode_id, "episode_bounds and items_at")
        return self._store.uid[sampling.episode_slots(self._store, self._table, row)]

    def get_episodes(self) -> list[SingleAgentEpisode]:
        """Copies of the stored episodes as numpy'd ``SingleAgentEpisode`` s, oldest first.

        Each carries its stored id (None too), ``agent_id``, ``module_id``, clocks and a copy
        of its ``custom_data`` (``episodes.replay.metadata``).

        Example:
            >>> from episodes.replay import EpisodeReplayBuffer
            >>> buf = EpisodeReplayBuffer(10)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0, 3.0],
            ...                            actions=[0, 1, 0], rewards=[1.0, 2.0, 3.0],
            ...                            terminated=True, len_lookback_buffer=0))
            >>> [(ep.id_, len(ep), ep.is_terminated) for ep in buf.get_episodes()]
            [('a', 3, True)]
        """
        store, table, spaces = self._store, self._table, self._spaces
        return [
            with_clocks(
                build_episode(store, table, sampling.episode_slots(store, table, row), 0, spaces),
                table.meta[row],
            )
            for row in table.order.values()
        ]

    def _note_evicted(self, id_: Any) -> None:
        remember_evicted(self._evicted, id_)
        self._num_episodes_evicted += 1

    def get_evicted_ids(self) -> list[Any]:
        """Ids of the evicted episodes, in eviction order (chunks continuing them are refused).

        The ids are not sorted: ids of different types (``7``, ``"a"``, ``("t", 1)``) do not
        compare. Only the latest 65,536 are kept
        (:data:`episodes.replay.counters.EVICTED_IDS_KEPT`): a long run evicts without end.

        Example:
            >>> from episodes.replay import EpisodeReplayBuffer
            >>> buf = EpisodeReplayBuffer(2)
            >>> buf.add([SingleAgentEpisode(i, observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                             rewards=[1.0, 1.0], len_lookback_buffer=0)
            ...          for i in "abc"])
            >>> buf.get_evicted_ids(), buf.get_episode_ids()
            (['a', 'b'], ['c'])
        """
        return list(self._evicted)

    def get_counters(self) -> dict[str, int]:
        """Added and sampled steps and evicted episodes (what a restart must carry over).

        Example:
            >>> from episodes.replay import EpisodeReplayBuffer
            >>> buf = EpisodeReplayBuffer(10, seed=0)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                            rewards=[1.0, 2.0], len_lookback_buffer=0))
            >>> _ = buf.sample(5)
            >>> buf.get_counters()
            {'added_timesteps': 2, 'sampled_timesteps': 5, 'episodes_evicted': 0}
        """
        return {
            "added_timesteps": self._num_added,
            "sampled_timesteps": self._num_sampled,
            "episodes_evicted": self._num_episodes_evicted,
        }

    def set_counters(self, counters: dict[str, int], evicted: list[Any]) -> None:
        """Restores :meth:`get_counters` and the evicted ids (after a reload), in that order.

        Raises:
            ValueError: A counter missing or not an int >= 0 (a bool is no count), fewer added
                steps than are stored, evicted ids that are not a list, repeat, or name a
                stored episode, or an ``episodes_evicted`` below the number of evicted ids
                (each of them was evicted once). ``TypeError``: an unhashable evicted id.
                Nothing changes then.

        Example:
            >>> from episodes.replay import EpisodeReplayBuffer
            >>> buf = EpisodeReplayBuffer(10)
            >>> counters = {"added_timesteps": 7, "sampled_timesteps": 3, "episodes_evicted": 1}
            >>> buf.set_counters(counters, ["old"])
            >>> buf.get_added_timesteps(), buf.get_num_episodes_evicted(), buf.get_evicted_ids()
            (7, 1, ['old'])
            >>> buf.set_counters({**counters, "sampled_timesteps": -1}, [])
            Traceback (most recent call last):
            ...
            ValueError: counters['sampled_timesteps'] must be an int >= 0, got -1
        """
        from episodes.replay.counters import checked_counts

        checked = checked_counts(counters, evicted, self._table.order.keys(), self._store.num_live)
        (self._num_added, self._num_sampled, self._num_episodes_evicted, self._evicted) = checked

    def save(self, path: str | os.PathLike[str]) -> None:
        """Writes the buffer to a new directory (see ``episodes.replay.persistence``).

        Example:
            >>> import tempfile
            >>> from episodes.replay import EpisodeReplayBuffer
            >>> buf = EpisodeReplayBuffer(10)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                            rewards=[1.0, 2.0], len_lookback_buffer=0))
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     buf.save(tmp + "/buf")
            ...     EpisodeReplayBuffer.load(tmp + "/buf").get_num_timesteps()
            2
        """
        from episodes.replay.persistence import save_buffer

        save_buffer(cast("EpisodeReplayBuffer", self), path)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, seed: Any = None) -> EpisodeReplayBuffer:
        """Reads a buffer written by :meth:`save`.

        Called on ``EpisodeReplayBuffer`` or ``PrioritizedEpisodeReplayBuffer`` it builds the
        kind saved (uniform or prioritized). Called on a subclass of yours it builds that
        class, as ``cls(capacity, batch_size_B=..., seed=...)`` (and ``alpha=...`` when
        prioritized; its own arguments take their defaults), provided the save is of its
        kind: a prioritized save loaded by a uniform subclass, or the other way round, is a
        ``ValueError``. The class is never read from the save.

        ``seed`` picks the loaded buffer's sampling generator: None (the default) restores the
        generator's state as saved (its next draws are the saved buffer's next draws; the rows
        are laid out again, episode by episode, so the transitions they pick need not be the
        ones the saved buffer would have picked); anything else replaces it, as the
        constructor's ``seed`` does (an int, a ``np.random.Generator`` used itself, ...:
        ``np.random.default_rng(seed)``), the saved state then unused.

        Example:
            >>> import tempfile
            >>> from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
            >>> buf = PrioritizedEpisodeReplayBuffer(10, seed=0)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                            rewards=[1.0, 2.0], len_lookback_buffer=0))
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     buf.save(tmp + "/buf")
            ...     back = EpisodeReplayBuffer.load(tmp + "/buf", seed=1)
            ...     same = EpisodeReplayBuffer.load(tmp + "/buf")  # seed=None: the saved state
            >>> type(back).__name__, back.get_episode_ids()
            ('PrioritizedEpisodeReplayBuffer', ['a'])
            >>> nxt = buf.rng.random()  # the saved buffer's next draw
            >>> same.rng.random() == nxt, back.rng.random() == np.random.default_rng(1).random()
            (True, True)
        """
        from episodes.replay.persistence import load_buffer

        return load_buffer(path, seed=seed, make=cast("type[EpisodeReplayBuffer]", cls))

    @overload
    @classmethod
    def from_dataset(
        cls: type[_Buffer],
        path: str | os.PathLike[str],
        *,
        capacity: int | None = None,
        prioritized: None = None,
        seed: Any = None,
        **kwargs: Any,
    ) -> _Buffer: ...
    @overload
    @classmethod
    def from_dataset(
        cls,
        path: str | os.PathLike[str],
        *,
        capacity: int | None = None,
        prioritized: bool,
        seed: Any = None,
        **kwargs: Any,
    ) -> EpisodeReplayBuffer: ...
    @classmethod
    def from_dataset(
        cls,
        path: str | os.PathLike[str],
        *,
        capacity: int | None = None,
        prioritized: bool | None = None,
        seed: Any = None,
        **kwargs: Any,
    ) -> Any:
        """A buffer holding every chunk of an ``episodes.io`` dataset (offline RL).

        ``prioritized=None`` builds the class it is called on (a subclass of yours too): a
        ``PrioritizedEpisodeReplayBuffer.from_dataset(path)`` is prioritized.

        Example:
            >>> import tempfile
            >>> from episodes.io import EpisodeWriter
            >>> from episodes.replay import EpisodeReplayBuffer
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     with EpisodeWriter(tmp) as writer:
            ...         _ = writer.write(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0],
            ...                          actions=[0, 1], rewards=[1.0, 1.0], len_lookback_buffer=0))
            ...     buf = EpisodeReplayBuffer.from_dataset(tmp)
            >>> buf.capacity, buf.get_episode_ids()  # capacity defaults to the dataset's steps
            (2, ['a'])
        """
        from episodes.replay.persistence import buffer_from_dataset
        from episodes.replay.prioritized import PrioritizedEpisodeReplayBuffer

        make = None
        if prioritized is None:  # the class it is called on
            prioritized = issubclass(cls, PrioritizedEpisodeReplayBuffer)
            make = cast("type[EpisodeReplayBuffer]", cls)
        prioritized = sampling.check_flag(prioritized, "prioritized")
        return buffer_from_dataset(
            path, capacity=capacity, prioritized=prioritized, seed=seed, make=make, **kwargs
        )

    def add_dataset(self, path: str | os.PathLike[str]) -> int:
        """Adds an ``episodes.io`` dataset's episodes to this buffer, as ``add`` of its pieces.

        The pieces come as :meth:`from_dataset` adds them, into this buffer's capacity (the
        oldest episodes give way); a piece whose id is stored continues that episode. A refusal
        (or an episode an earlier add evicted) leaves the buffer as it was
        (:mod:`episodes.replay.dataset_add`). Returns the steps read.

        Example:
            >>> import tempfile
            >>> from episodes.io import EpisodeWriter
            >>> from episodes.replay import EpisodeReplayBuffer
            >>> buf = EpisodeReplayBuffer(100)
            >>> buf.add(SingleAgentEpisode("online", observations=[0.0, 1.0], actions=[0],
            ...                            rewards=[1.0], len_lookback_buffer=0))
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     with EpisodeWriter(tmp) as writer:
            ...         _ = writer.write(SingleAgentEpisode("offline", observations=[0.0, 1.0, 2.0],
            ...                          actions=[0, 1], rewards=[1.0, 1.0], len_lookback_buffer=0))
            ...     buf.add_dataset(tmp)
            2
            >>> buf.get_episode_ids(), buf.get_num_timesteps()
            (['online', 'offline'], 3)
        """
        from episodes.replay.dataset_add import add_dataset

        return add_dataset(self, path)

    def locate(self, episode_id: Any, t: _Integers) -> np.ndarray:
        """Stable item indices (as in a batch's ``indices``) of an episode's steps at times ``t``.

        Returns:
            A 1-d int64 array, one item per time, for one time too (``locate(id, 3)`` is
            ``array([i])``, not numpy's scalar: :meth:`episode_steps` and :meth:`items_at`
            answer one index alike, and :meth:`get_transitions` takes the array as it is);
            ``int(buf.locate(id, t)[0])`` is the one item.

        Raises:
            KeyError: The episode is not stored (evicted, where the buffer remembers it), or a
                time is outside its stored steps.
            ValueError: Times that are not integers (floats, bools or strings are not
                truncated).
            TypeError: ``episode_id`` is not one hashable id (the id array
                :meth:`episode_steps` returns, say): :meth:`items_at` locates the steps of
                many episodes at once, named by their items.

        Example:
            >>> from episodes.replay import EpisodeReplayBuffer
            >>> buf = EpisodeReplayBuffer(10)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0, 3.0],
            ...                            actions=[0, 1, 0], rewards=[1.0, 2.0, 3.0],
            ...                            terminated=True, len_lookback_buffer=0))
            >>> buf.locate("a", [2, 0]).tolist(), buf.locate("a", 1)
            ([2, 0], array([1]))
            >>> buf.locate("a", 1.5)
            Traceback (most recent call last):
            ...
            ValueError: times must be integers, got dtype float64
        """
        stored_row(self._table, self._evicted, episode_id, "items_at")
        return sampling.locate(self._store, self._table, episode_id, t)

    def episode_steps(self, indices: _Integers) -> tuple[np.ndarray, np.ndarray]:
        """The episode ids and env times of item indices: :meth:`locate` inverted.

        A batch's ``indices`` name steps, not episodes; this names them back, for work that
        needs a sampled step's episode (hindsight relabelling picks a future step of it).

        Returns:
            ``(episode_ids, t)``: an object array of episode ids and an int64 array of env
            times, one of each per index, in the order given.

        Raises:
            KeyError: Indices not stored (evicted or never issued). ``ValueError``: indices
                that are not integers, or not one index or a 1-d sequence.

        Example:
            >>> from episodes.replay import EpisodeReplayBuffer
            >>> buf = EpisodeReplayBuffer(10, seed=0)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0, 3.0],
            ...                            actions=[0, 1, 0], rewards=[1.0, 2.0, 3.0],
            ...                            t_started=4, len_lookback_buffer=0))
            >>> batch = buf.sample(2)
            >>> ids, t = buf.episode_steps(batch["indices"])
            >>> ids.tolist(), (t - 4 == batch["indices"]).all()
            (['a', 'a'], np.True_)
        """
        return sampling.episode_steps(self._store, self._table, indices)

    def episode_bounds(self, indices: _Integers) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The stored time range of each item's episode, and whether that episode has ended.

        With :meth:`episode_steps` (an item's own time ``t``) and :meth:`items_at`, what
        hindsight relabelling draws its goal steps from: a later step of the item's episode
        is one of ``range(t, t_end)``, its last one ``t_end - 1``, any of its stored ones one of
        ``range(t_begin, t_end)``. A running episode's ``t_end`` is the time of its newest
        stored observation (the ``next_obs`` of its last stored step).

        Returns:
            ``(t_begin, t_end, done)``, one of each per index, in the order given: the env
            time of the episode's first stored step and one past its last (int64; an item's
            episode holds ``t_end - t_begin`` steps), and whether it has ended, terminated or
            truncated (bool).

        Raises:
            KeyError: Indices not stored (evicted, never issued, or a sequence batch's -1
                padding). ``ValueError``: indices that are not integers, or not one index or a
                1-d sequence (as :meth:`episode_steps` refuses them).

        Example:
            >>> from episodes.replay import EpisodeReplayBuffer
            >>> buf = EpisodeReplayBuffer(10)
            >>> buf.add([SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                             rewards=[1.0, 1.0], t_started=4, terminated=True,
            ...                             len_lookback_buffer=0),
            ...          SingleAgentEpisode("b", observations=[0.0, 1.0], actions=[0],
            ...                             rewards=[1.0], len_lookback_buffer=0)])
            >>> t_begin, t_end, done = buf.episode_bounds([1, 2])
            >>> t_begin.tolist(), t_end.tolist(), done.tolist()
            ([4, 0], [6, 1], [True, False])
        """
        return episode_bounds(self._store, self._table, indices)

    def items_at(self, indices: _Integers, t: _Integers) -> np.ndarray:
        """The items of the episodes of ``indices`` at env times ``t``: a batched :meth:`locate`.

        ``items_at(indices, t)[i]`` is ``locate(episode_id, t[i])`` of the episode of
        ``indices[i]``, for the items of many episodes at once (one per item, in a few numpy
        passes), named by a batch's ``indices`` rather than by episode ids.

        Args:
            indices: Item indices (one or a 1-d sequence; numpy, a list or a CPU tensor).
            t: One env time for every item, or one per item.

        Raises:
            KeyError: Indices not stored (as :meth:`episode_bounds`), or a time outside the
                stored steps of its item's episode (as :meth:`locate`).
            ValueError: Indices or times that are not integers, indices not one index or a
                1-d sequence, or times neither one time nor as many as the indices.

        Example:
            >>> from episodes.replay import EpisodeReplayBuffer
            >>> buf = EpisodeReplayBuffer(10)
            >>> buf.add([SingleAgentEpisode(i, observations=[0.0, 1.0, 2.0, 3.0],
            ...                             actions=[0, 1, 0], rewards=[1.0, 1.0, 1.0],
            ...                             len_lookback_buffer=0) for i in "ab"])
            >>> _, t_end, _ = buf.episode_bounds([0, 4])
            >>> buf.items_at([0, 4], t_end - 1).tolist()  # each item's episode's last step
            [2, 5]
            >>> buf.items_at([0], [3])
            Traceback (most recent call last):
            ...
            KeyError: "times [3] outside the stored steps of their items' episodes: item 0 of ..."
        """
        return items_at(self._store, self._table, indices, t)

    def get_extra_model_outputs(self, key: str, indices: _Integers) -> Any:
        """The stored extra model output ``key`` of the items ``indices``, one row each.

        One column without building a transition batch: a MuZero value target bootstraps
        from the root value stored ``n`` steps later (``items_at(indices, t + n)``, then
        this). A nested column comes back as the dict or tuple of leaf arrays a sample gives.

        Raises:
            KeyError: ``key`` is no stored extra-output column (the message lists them), or
                indices not stored (evicted or never issued), as :meth:`get_transitions`.
            ValueError: Indices that are not integers, or not one index or a 1-d sequence.

        Example:
            >>> from episodes.replay import EpisodeReplayBuffer
            >>> buf = EpisodeReplayBuffer(10)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                            rewards=[1.0, 1.0], len_lookback_buffer=0,
            ...                            extra_model_outputs={"root_value": [0.5, 0.7]}))
            >>> buf.get_extra_model_outputs("root_value", buf.items_at([0], 1)).tolist()
            [0.7]
        """
        from episodes.replay.extra_writes import read_extras

        return read_extras(self._store, key, indices)

    def set_extra_model_outputs(self, key: str, values: Any, indices: _Integers) -> int:
        """Rewrites the stored extra model output ``key`` of the items ``indices``.

        For a reanalyse pass (EfficientZero's): re-run the search on sampled positions, then
        write the new search policies or root values back, so that later samples,
        :meth:`get_transitions`, episodes, ``get_state`` and ``save`` give them. ``values``
        hold one row per index in the column's row shape (nested columns: the dict or tuple
        of per-leaf rows an episode's getter gives); numpy, lists, tuples (a flat column's
        rows, as numpy reads them) or torch tensors (detached, from any device); cast into the
        column's dtype where every value survives (float64 into a float32 column), as ``add``
        casts a chunk's. Items evicted since they were sampled are skipped, as
        :meth:`update_priorities` skips them; a repeated index keeps its last value. Every
        check comes before the write: a refusal changes nothing.

        Returns:
            The number of items written (those of ``indices`` still stored).

        Raises:
            KeyError: ``key`` is no stored extra-output column (the message lists them).
            ValueError: Indices that are not integers, not 1-d, or that this buffer never
                issued (a sequence batch's -1 padding too: pass ``indices[mask]``); values
                not one per index (a nested column's leaf of another count is named), or
                whose row shape or dtype kind differ from the column's (ints into a float
                column too), or that its dtype cannot hold.
            TypeError: Values that are not numeric.

        Example:
            >>> from episodes.replay import EpisodeReplayBuffer
            >>> buf = EpisodeReplayBuffer(10, seed=0)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                            rewards=[1.0, 1.0], len_lookback_buffer=0,
            ...                            extra_model_outputs={"root_value": [0.5, 0.5]}))
            >>> buf.set_extra_model_outputs("root_value", [2.0], buf.locate("a", [1]))
            1
            >>> buf.get_transitions([0, 1], include_extra_model_outputs=True)["root_value"]
            array([0.5, 2. ])
        """
        from episodes.replay.extra_writes import write_extras

        return write_extras(self._store, key, values, indices)

    def get_rewards(self, indices: _Integers) -> np.ndarray:
        """The stored rewards of the items ``indices`` (a float32 copy).

        Read as :meth:`get_extra_model_outputs` reads an extra column (the same errors).

        Example:
            >>> from episodes.replay import EpisodeReplayBuffer
            >>> buf = EpisodeReplayBuffer(10)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                            rewards=[1.0, 2.0], len_lookback_buffer=0))
            >>> buf.get_rewards(buf.locate("a", [1, 0])).tolist()
            [2.0, 1.0]
        """
        from episodes.replay.reward_writes import read_rewards

        return read_rewards(self._store, indices)

    def set_rewards(self, values: Any, indices: _Integers) -> int:
        """Rewrites the stored rewards of the items ``indices`` (relabelling, a reward model).

        As :meth:`set_extra_model_outputs` (one value per index, numpy, lists or torch
        tensors; evicted items skipped; a repeated index keeps its last value; every check
        before the write), with the values taken as :meth:`add` takes rewards: real scalars
        (ints too) cast to float32 unless one would overflow. Later samples (their n-step
        returns), episodes, ``get_state`` and ``save`` give the new rewards.

        Returns:
            The number of items written (those of ``indices`` still stored).

        Raises:
            ValueError: Indices as :meth:`set_extra_model_outputs` refuses them; values not
                one per index, not scalars, or beyond float32.
            TypeError: Values that are not real numbers.

        Example:
            >>> from episodes.replay import EpisodeReplayBuffer
            >>> buf = EpisodeReplayBuffer(10, seed=0)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                            rewards=[1.0, 1.0], len_lookback_buffer=0))
            >>> buf.set_rewards([0.5], buf.locate("a", [1]))
            1
            >>> buf.get_transitions([0], n_step=2, gamma=0.5)["rewards"].tolist()
            [1.25]
        """
        from episodes.replay.reward_writes import write_rewards

        return write_rewards(self._store, values, indices)

    def get_transitions(
        self,
        indices: _Integers,
        *,
        n_step: int = 1,
        gamma: float = 0.99,
        include_infos: bool = False,
        include_extra_model_outputs: bool = False,
        device: Any = None,
    ) -> dict[str, Any]:
        """The transition batch of the given item indices (deterministic; no sampling).

        The columns of a :meth:`sample` batch, ``infos`` and the extra model outputs on
        request as there; its ``weights`` are 1 (nothing was drawn, so nothing to correct),
        so that a loss written for sampled batches takes it. With ``device``, numeric
        columns are torch tensors there, as :meth:`sample` gives them.

        Raises:
            KeyError: Indices not stored (evicted or never issued). ``ValueError``: bad
                ``n_step`` (one int: an ``(a, b)`` range, which :meth:`sample` takes, is an
                ``IntegerTypeError`` saying so) or ``gamma``, indices that are not integers (as
                :meth:`update_priorities` refuses them) or not one index or a 1-d sequence.
            TypeError, DeviceError: A ``device`` that is no device, or that torch cannot use
                here, as :meth:`sample` refuses it (before the buffer is read).
            EmptyBufferError: No indices asked of a buffer that has never stored a step (it
                has no columns to shape even an empty batch by).

        Example:
            >>> from episodes.replay import EpisodeReplayBuffer
            >>> buf = EpisodeReplayBuffer(10)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0, 3.0],
            ...                            actions=[0, 1, 0], rewards=[1.0, 2.0, 3.0],
            ...                            terminated=True, len_lookback_buffer=0))
            >>> batch = buf.get_transitions(buf.locate("a", [0, 2]), n_step=2, gamma=0.5)
            >>> batch["rewards"].tolist(), batch["terminateds"].tolist()
            ([2.0, 3.0], [False, True])
        """
        if isinstance(n_step, (tuple, list, range)):
            # sample() draws one horizon per item from a range; here nothing is drawn.
            raise IntegerTypeError(
                f"n_step must be an int >= 1, got {n_step!r:.60}: get_transitions builds every "
                "item with one horizon (ranges are for sample, which draws one per item; "
                "rebuild a sampled batch by calling this once per value of its n_step column)"
            )
        n_step = sampling.check_positive(n_step, "n_step")
        gamma = sampling.check_gamma(gamma)  # None: the default, as in sample
        infos = sampling.check_flag(include_infos, "include_infos")
        extras = sampling.check_flag(include_extra_model_outputs, "include_extra_model_outputs")
        items = np.atleast_1d(sampling.int_array(indices, "indices", KeyError))
        if items.ndim != 1:
            raise ValueError(
                f"indices must be one index or a 1-d sequence, got shape {items.shape}"
            )
        if device is not None:
            device = sampling.check_device(device)
        slots = sampling.slots_of(self._store, items)  # any index of an empty buffer: KeyError
        if self._store.obs is None:
            raise EmptyBufferError("the buffer has never stored a step: no batch to build")
        n = np.full(len(items), n_step)
        out = transition_batch(self._store, self._table, slots, n, float(gamma), infos, extras)
        out["weights"] = np.ones(len(items), np.float32)
        return out if device is None else sampling.to_device(out, device)

    # ------------------------------------------------------------------------------- state
