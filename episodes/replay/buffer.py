"""``EpisodeReplayBuffer``: episode chunks in, transitions, sequences or episodes out."""

from __future__ import annotations

import contextlib
import copy
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from episodes.episode import SingleAgentEpisode
from episodes.indexing import whole_number
from episodes.replay import sampling
from episodes.replay.access import BufferAccess
from episodes.replay.adding import adopted_spaces, check_on_evicted, copied_space, named_refusal
from episodes.replay.agents import agents_checked
from episodes.replay.applying import apply_one_by_one, apply_plan, evict_one, write_chunks
from episodes.replay.errors import EmptyBufferError
from episodes.replay.ingest import Chunk, plan_add, prepare_all
from episodes.replay.rng import sampling_generator
from episodes.replay.sample_keywords import explains_sample_keywords
from episodes.replay.sequences import sample_chunks, sample_sequences
from episodes.replay.sizes import check_batch_room, out_of_memory
from episodes.replay.store import StepStore, deferred_interrupts
from episodes.replay.table import EpisodeTable, StoredEpisodes
from episodes.replay.transitions import transition_batch

__all__ = ["EpisodeReplayBuffer"]


class EpisodeReplayBuffer(BufferAccess):
    """Replay over episodes with capacity in timesteps and uniform sampling.

    Chunks are added with :meth:`add`; a chunk whose id is stored continues that episode (its
    ``t_started`` must be where the stored part ends). When more than ``capacity`` steps are
    stored, whole episodes are evicted, oldest first (one always stays). Data lives in
    contiguous columns, so a sample is a few numpy gathers whatever the buffer's size.

    :meth:`sample` draws one of three units: transitions with n-step returns (the default),
    fixed-length sequences (``batch_length_T``) or :class:`SingleAgentEpisode` chunks
    (``sample_episodes=True``). See ``docs/replay.md``.

    Args:
        capacity: Steps to keep.
        batch_size_B: Default batch size of :meth:`sample`.
        seed: Seed of the sampling generator, as ``np.random.default_rng`` takes it: None,
            an int >= 0 (numpy ints taken), a list of ints >= 0, or a numpy ``SeedSequence``,
            ``BitGenerator`` or ``Generator`` (used itself); a float, a bool or a negative int
            is a ``ValueError``, a bit generator that is not one of numpy's own classes (a
            subclass of ``PCG64``), which the state could not restore, a ``TypeError``.

    Example:
        >>> buf = EpisodeReplayBuffer(capacity=100, seed=0)
        >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
        ...                            rewards=[1.0, 1.0], terminated=True, len_lookback_buffer=0))
        >>> batch = buf.sample(4, n_step=2, gamma=0.5)
        >>> buf.get_num_timesteps(), sorted(set(batch["rewards"].tolist()))
        (2, [1.0, 1.5])
    """

    _joined: dict[str, Any] | None = None  # while from_dataset fills it: dataset_pieces.widen

    def __copy__(self) -> Any:
        # A shallow copy would share the columns but not the counters: adding to it would
        # change this buffer's episodes behind its bookkeeping. A copy owns its data.
        # A space deepcopy refuses (a lock inside) is shared, as add keeps it (copied_space).
        memo = {id(space): copied_space(space) for space in self._spaces if space is not None}
        return copy.deepcopy(self, memo)

    def __init__(self, capacity: int = 10_000, *, batch_size_B: int = 16, seed: Any = None):
        self.capacity = sampling.check_positive(capacity, "capacity")
        self.batch_size_B = sampling.check_positive(batch_size_B, "batch_size_B")
        self.rng = sampling_generator(seed)
        self._store = StepStore()
        self._table = EpisodeTable()
        self._evicted: dict[Any, None] = OrderedDict()  # the eviction order, oldest first
        self._spaces: tuple[Any, Any] = (None, None)
        self._num_added = 0
        self._num_sampled = 0
        self._num_episodes_evicted = 0

    # --------------------------------------------------------------------------------- add
    def add(
        self,
        episodes: SingleAgentEpisode | Iterable[SingleAgentEpisode],
        *,
        on_evicted: str = "raise",
    ) -> None:
        """Adds a chunk or an iterable of chunks; continuing chunks extend their stored episode.

        A chunk without steps that ends its episode (a stored one, or one begun earlier in
        the same add) ends it there, as ``concat_episode`` would; other chunks without steps
        are ignored. Every chunk is checked before anything is stored; a refusal of a chunk's
        values names it (``chunk 2 (episode 'b'): ...``: its place in ``episodes``, its id).

        Args:
            episodes: A ``SingleAgentEpisode`` chunk or an iterable of them.
            on_evicted: A chunk continuing an episode an earlier add evicted: ``"raise"``
                refuses the add, ``"drop"`` drops the chunk (its steps count as added) and
                stores the rest, ``"restart"`` stores it as a new episode under its id, which
                leaves ``get_evicted_ids()``. See ``docs/replay.md``.

        Raises:
            TypeError: Not episodes, or values that are not numeric arrays.
            ValueError: Rows that do not fit the stored columns (rewards: one number a step,
                which float32 holds); a chunk continuing a done episode, of another agent
                (``agent_id``), leaving a gap in time or starting with another observation
                than the stored one; ``EvictedEpisodeError`` (a ``ValueError``) for a chunk
                continuing an evicted episode (``on_evicted="raise"``), or another
                ``on_evicted``. The buffer is then unchanged.
            MemoryError: Columns, table or priorities that do not fit; unchanged, as after a
                ``KeyboardInterrupt``. A Ctrl-C while the steps are written waits till they are.

        Example:
            >>> buf = EpisodeReplayBuffer(5, seed=0)
            >>> buf.add([SingleAgentEpisode(i, observations=[0.0, 1.0, 2.0, 3.0], actions=[0, 1, 0],
            ...                             rewards=[1.0] * 3, terminated=True,
            ...                             len_lookback_buffer=0) for i in "ab"])
            >>> buf.get_episode_ids(), buf.get_num_timesteps()  # 6 steps > 5: "a" was evicted
            (['b'], 3)
            >>> buf.add("b")
            Traceback (most recent call last):
            ...
            TypeError: add() takes SingleAgentEpisode chunks, got str
        """
        on_evicted = check_on_evicted(on_evicted)
        if isinstance(episodes, SingleAgentEpisode):
            given = [episodes]
        elif isinstance(episodes, Iterable) and not isinstance(episodes, (str, bytes, Mapping)):
            given = list(episodes)  # a list, or any sequence such as the runner's chunks
        else:
            raise TypeError(f"add() takes SingleAgentEpisode chunks, got {type(episodes).__name__}")
        chunks = agents_checked(prepare_all(given, self._table.order, self._evicted), self._table)
        self._check_fit(chunks)
        plan = plan_add(
            chunks,
            StoredEpisodes(self._table),
            iter(self._table.order),
            self._evicted,
            self._store.num_live,
            self.capacity,
            on_evicted,
        )
        spaces = adopted_spaces(
            self._spaces, (item for kind, item in plan.steps if kind != "evict")
        )
        # The one move and every large allocation come before the first change: an exception
        # there (MemoryError, KeyboardInterrupt) leaves the buffer as it was.
        n = sum(chunk.n for chunk in chunks)
        self._store.capacity = int(self.capacity)  # bounds the store's growth (set_state too)
        if self._store.compacts_for(n):
            self._compact()
        self._store.reserve(n)  # grows if need be (compacted already)
        with deferred_interrupts():  # a Ctrl-C waits for the end (_prepare fixes a first layout)
            self._prepare([item for kind, item in plan.steps if kind == "chunk" and item.n])
            self._spaces = spaces
            cls = type(self)
            if (
                cls._write is EpisodeReplayBuffer._write
                and cls._evict is EpisodeReplayBuffer._evict
            ):
                apply_plan(self, plan.steps)  # the table in plan order, rows and kills batched
            else:  # a subclass's own hooks: called as they always were
                apply_one_by_one(self, plan.steps)
        if self._store.needs_compaction():
            with contextlib.suppress(MemoryError):  # housekeeping, all or nothing: the next add
                self._compact()

    def add_rollouts(
        self,
        observations: Any,
        actions: Any,
        rewards: Any,
        *,
        terminated: Any = None,
        truncated: Any = None,
        lengths: Any = None,
        extra_model_outputs: Mapping[str, Any] | None = None,
        ids: Any = None,
    ) -> list[Any]:
        """Adds ``B`` rollouts given as arrays, each a new episode; returns their ids.

        As :meth:`add` of one ``SingleAgentEpisode`` per rollout (same state, samples and
        evictions), without building them. See ``episodes.replay.array_rollouts``.

        Args:
            observations: ``[B, H + 1, ...]`` (or dicts / tuples of such arrays).
            actions: ``[B, H, ...]`` (or nested as observations).
            rewards: ``[B, H]`` real numbers.
            terminated: ``[B, H]`` bools (None: none); a rollout keeps its steps up to its
                first terminated or truncated one and ends as that step says.
            truncated: ``[B, H]`` bools, likewise.
            lengths: ``[B]`` ints in ``1 .. H``: steps kept at most (None: ``H``).
            extra_model_outputs: str -> ``[B, H, ...]`` arrays.
            ids: ``B`` new episode ids (None: fresh uuid4 hex ones).

        Raises:
            TypeError, ValueError: Bad input, naming the argument; the buffer is unchanged.

        Example:
            >>> buf = EpisodeReplayBuffer(100)
            >>> ids = buf.add_rollouts(np.zeros((2, 4, 3)), np.zeros((2, 3)), np.ones((2, 3)),
            ...                        terminated=np.eye(2, 3, dtype=bool), ids=["a", "b"])
            >>> ids, buf.get_num_timesteps(), buf.get_episodes()[1].is_terminated
            (['a', 'b'], 3, True)
        """
        from episodes.replay.array_rollouts import add_rollouts

        named = {"terminated": terminated, "truncated": truncated, "lengths": lengths, "ids": ids}
        named["extra_model_outputs"] = extra_model_outputs
        return add_rollouts(self, observations, actions, rewards, **named)

    def _prepare(self, written: list[Chunk]) -> None:
        """Allocates what writing ``written`` needs: the table's rows, the columns last."""
        self._on_reserve()
        if not written:
            return
        first, table = written[0], self._table
        try:
            order = table.order  # not `ids - order.keys()`: that walks every stored id
            new = sum(id_ not in order for id_ in {chunk.id_ for chunk in written})
            table.reserve(new, first.obs[-1:])
            self._store.init_columns(first.obs, first.actions, first.extras)  # all or nothing
        except BaseException:
            if table.final_obs is not None and self._store.obs is None:
                self._table = EpisodeTable()  # its layout is the next add's to fix
            raise

    def _check_fit(self, chunks: list[Chunk]) -> None:
        store = self._store
        first = next((chunk for chunk in chunks if chunk.n), None)
        if store.obs is None and first is not None:
            if self._joined:
                from episodes.replay.dataset_pieces import widen

                widen(first, self._joined)
            # No columns yet: the first chunk with steps fixes them; the others must match it.
            probe = StepStore()
            probe.reserve(first.n)
            probe.append(
                first.rows(), first.extras, first.step_infos(), ep_row=0, t0=0, prev_slot=-1
            )
            store = probe
        for chunk in chunks:  # from here on every chunk holds the columns' dtypes
            try:  # free unless raised: a refusal names the chunk
                if not chunk.n:  # an episode's end: its observation only (no actions or extras)
                    if store.obs is not None:
                        chunk.obs = store.obs.fit(chunk.obs, "observations")
                    continue
                chunk.obs, chunk.actions, chunk.extras = store.fit_rows(
                    chunk.obs, chunk.actions, chunk.extras
                )
            except ValueError as error:
                raise named_refusal(error, chunk.position, chunk.id_) from None

    def _write(self, chunks: list[Chunk]) -> None:
        write_chunks(self, chunks)

    def _evict(self, id_: str) -> None:
        evict_one(self, id_)

    def _compact(self) -> None:
        # All or nothing: what holds slots is remapped aside, the store compacts all or nothing,
        # then plain stores swap the new arrays in (no call between: no signal either).
        store, table = self._store, self._table
        remap = store.compaction_map()
        slots, hooked = table.remapped_slots(remap), self._remapped(remap)
        store.compact()
        (table.first_slot, table.last_slot) = slots
        self.__dict__.update(hooked)

    # Hooks for the prioritized subclass.
    def _on_reserve(self) -> None:
        pass

    def _on_append(self, slots: np.ndarray) -> None:
        pass

    def _on_kill(self, slots: np.ndarray) -> None:
        pass

    def _remapped(self, remap: np.ndarray) -> dict[str, Any]:
        return {}  # the attributes holding slots, remapped aside (the table: _compact's own)

    # ------------------------------------------------------------------------------ sample
    @explains_sample_keywords
    def sample(
        self,
        num_items: int | None = None,
        *,
        batch_size_B: int | None = None,
        batch_length_T: int | None = None,
        n_step: int | tuple[int, int] | range | None = 1,
        gamma: float | None = None,
        include_infos: bool = False,
        include_extra_model_outputs: bool = False,
        sample_episodes: bool = False,
        lookback: int = 0,
        pad: bool = False,
        device: Any = None,
    ) -> Any:
        """Samples transitions (default), sequences (``batch_length_T``) or episode chunks.

        Args:
            num_items: Items to draw (``batch_size_B`` is the same; give at most one).
            batch_size_B: Alias of ``num_items`` (RLlib's name).
            batch_length_T: Sequence length; sequences never cross an episode border unless
                ``pad`` (then steps past the end are zeros with ``mask`` False). None or 0
                (RLlib's "no sequences"): transitions, or whole chunks.
            n_step: Steps per transition's return: an int, or ``(lo, hi)`` / ``range(lo, hi)``
                drawn per item with ``hi`` exclusive (RLlib's convention); None is 1.
            gamma: Discount of the n-step returns; None is 0.99 (RLlib's default). Transitions
                only: any ``gamma`` given with ``batch_length_T`` or ``sample_episodes`` is a
                ``ValueError`` (nothing there is discounted), as is an ``n_step`` other than 1.
            include_infos: Add ``infos``: the info of each item's ``next_obs``, for
                transitions and sequences alike (``{}`` in a sequence's padded steps). Sampled
                episodes always carry theirs: with ``sample_episodes`` it is a ``ValueError``.
            include_extra_model_outputs: Add every extra-model-output column (at ``o_t``);
                with ``sample_episodes`` a ``ValueError``, as ``include_infos``.
            sample_episodes: Return ``SingleAgentEpisode`` chunks: whole stored episodes
                without ``batch_length_T``, else chunks of that length.
            lookback: Steps of context before each sequence / chunk (burn-in); padded with
                ``mask`` False before the episode's first stored step. Needs
                ``batch_length_T``: for transitions or whole episodes a lookback > 0 is a
                ``ValueError`` (it would be ignored).
            pad: Let sequences run past their episode's end (padded); sequences only: with
                ``sample_episodes`` or for transitions it is a ``ValueError`` (nothing is padded
                there).
            device: Return torch tensors on this device (torch is imported only then).

        Raises:
            EmptyBufferError: Nothing stored, or no start from which a sequence of
                ``batch_length_T`` fits without crossing an episode border.
            ValueError: Bad arguments, a batch no array could hold among them.
            MemoryError: A batch that does not fit in memory (the message names the sizes).

        Example:
            >>> buf = EpisodeReplayBuffer(10, seed=0)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0, 3.0],
            ...                            actions=[0, 1, 0], rewards=[1.0, 2.0, 3.0],
            ...                            terminated=True, len_lookback_buffer=0))
            >>> buf.sample(4)["obs"].shape, buf.sample(2, batch_length_T=2)["obs"].shape
            ((4,), (2, 2))
            >>> [(ep.id_, len(ep)) for ep in buf.sample(1, sample_episodes=True)]
            [('a', 3)]
        """
        # Every argument is checked before the buffer is looked at: a bad one gets its own
        # error even from an empty buffer.
        size = sampling.batch_size(num_items, batch_size_B, self.batch_size_B)
        flag = sampling.check_flag
        pad, sample_episodes = flag(pad, "pad"), flag(sample_episodes, "sample_episodes")
        include_infos = flag(include_infos, "include_infos")
        include_extra_model_outputs = flag(
            include_extra_model_outputs, "include_extra_model_outputs"
        )
        n_step = 1 if n_step is None else n_step  # RLlib's default: one step
        if batch_length_T is not None:
            # 0 asks for no sequences, as in RLlib (its DQN passes 0 for a stateless module).
            batch_length_T = whole_number(batch_length_T, "batch_length_T", 0) or None
        transitions = batch_length_T is None and not sample_episodes
        n_step = sampling.check_n_step(n_step, transitions=transitions)
        lookback = sampling.check_non_negative(lookback, "lookback")
        if sample_episodes and device is not None:
            raise ValueError("device applies to batches; sample_episodes returns episodes")
        gamma = sampling.check_gamma(gamma, transitions=transitions)
        if pad and (sample_episodes or batch_length_T is None):
            raise ValueError(
                "pad applies to sequences (batch_length_T without sample_episodes); episode "
                "chunks and transitions are never padded"
            )
        if lookback and batch_length_T is None:
            raise ValueError(
                "lookback applies to sequences and episode chunks (batch_length_T); "
                "transitions and whole episodes take none"
            )
        if sample_episodes and (include_infos or include_extra_model_outputs):
            raise ValueError(
                "include_infos and include_extra_model_outputs apply to transitions and "
                "sequences; sampled episodes always carry their infos and extra model outputs"
            )
        check_batch_room(size, batch_length_T, lookback, sequences=not sample_episodes)
        if device is not None:  # before the contents: any buffer refuses a bad device
            device = sampling.check_device(device)
        if self._store.num_live == 0:
            raise EmptyBufferError("cannot sample from an empty buffer")
        rng_state = self.rng.bit_generator.state
        try:  # a refused sample leaves the generator as it was
            out = self._sample(
                size,
                batch_length_T,
                n_step,
                gamma,
                include_infos,
                include_extra_model_outputs,
                sample_episodes,
                lookback,
                pad,
            )
            if device is not None:  # a device torch refuses is refused here, nothing counted
                out = sampling.to_device(out, device)
        except BaseException as error:  # an interrupt too: a resumed run draws what it would have
            self.rng.bit_generator.state = rng_state
            if isinstance(error, MemoryError):  # numpy's words name no argument
                raise out_of_memory(error, size, batch_length_T, lookback) from error
            raise
        self._num_sampled += size
        return out

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
        if sample_episodes:
            return sample_chunks(
                self._store, self._table, self.rng, size, batch_length_T, lookback, self._spaces
            )
        if batch_length_T is not None:
            return sample_sequences(
                self._store,
                self._table,
                self.rng,
                size,
                batch_length_T,
                lookback,
                pad,
                include_infos,
                include_extra_model_outputs,
            )
        n = sampling.n_steps(n_step, size, self.rng)
        slots, weights = self._draw_transitions(size)
        out = transition_batch(
            self._store,
            self._table,
            slots,
            n,
            float(gamma),
            include_infos,
            include_extra_model_outputs,
        )
        out["weights"] = weights
        return out

    def _draw_transitions(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        return sampling.draw_live(self._store, self.rng, size), np.ones(size, np.float32)

    # ------------------------------------------------------------------------------ counts
    def __len__(self) -> int:
        return self._store.num_live

    def get_num_episodes(self, module_id: Any = None) -> int:
        """Episodes stored (``module_id``, RLlib's, is ignored: one module's steps).

        Example:
            >>> buf = EpisodeReplayBuffer(10)
            >>> buf.add([SingleAgentEpisode(i, observations=[0.0, 1.0], actions=[0], rewards=[1.0],
            ...                             len_lookback_buffer=0) for i in "ab"])
            >>> buf.get_num_episodes()
            2
        """
        return len(self._table)

    def get_num_episodes_evicted(self, module_id: Any = None) -> int:
        """Episodes evicted so far (``module_id``, RLlib's, is ignored: one module's steps).

        Example:
            >>> buf = EpisodeReplayBuffer(2)
            >>> buf.add([SingleAgentEpisode(i, observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                             rewards=[1.0, 1.0], len_lookback_buffer=0)
            ...          for i in "ab"])
            >>> buf.get_num_episodes_evicted(), buf.get_num_episodes()
            (1, 1)
        """
        return self._num_episodes_evicted

    def get_num_timesteps(self, module_id: Any = None) -> int:
        """Steps stored (``module_id``, RLlib's, is ignored: one module's steps).

        Example:
            >>> buf = EpisodeReplayBuffer(10)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0, 3.0],
            ...                            actions=[0, 1, 0], rewards=[1.0, 2.0, 3.0],
            ...                            len_lookback_buffer=0))
            >>> buf.get_num_timesteps()  # 4 observations, 3 steps
            3
        """
        return self._store.num_live

    def get_added_timesteps(self, module_id: Any = None) -> int:
        """Steps ever added, evicted ones included (``module_id``, RLlib's, is ignored).

        The buffer holds one module's steps.

        Example:
            >>> buf = EpisodeReplayBuffer(2)
            >>> buf.add([SingleAgentEpisode(i, observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                             rewards=[1.0, 1.0], len_lookback_buffer=0)
            ...          for i in "ab"])
            >>> buf.get_added_timesteps(), buf.get_num_timesteps()
            (4, 2)
        """
        return self._num_added

    def get_sampled_timesteps(self, module_id: Any = None) -> int:
        """Items ever sampled (``module_id``, RLlib's, is ignored: one module's steps).

        Example:
            >>> buf = EpisodeReplayBuffer(10, seed=0)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0, 3.0],
            ...                            actions=[0, 1, 0], rewards=[1.0, 2.0, 3.0],
            ...                            len_lookback_buffer=0))
            >>> _ = buf.sample(4), buf.sample(2, batch_length_T=3)
            >>> buf.get_sampled_timesteps()  # items, not steps: 4 transitions + 2 sequences
            6
        """
        return self._num_sampled

    def get_episode_ids(self) -> list[Any]:
        """Stored episode ids, oldest first (the eviction order).

        Example:
            >>> buf = EpisodeReplayBuffer(4)
            >>> buf.add([SingleAgentEpisode(i, observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                             rewards=[1.0, 1.0], len_lookback_buffer=0)
            ...          for i in "abc"])
            >>> buf.get_episode_ids()
            ['b', 'c']
        """
        return list(self._table.order)

    def get_state(self) -> dict[str, Any]:
        """A snapshot of contents, counters and the sampling generator (numpy arrays).

        Example:
            >>> buf = EpisodeReplayBuffer(10)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                            rewards=[1.0, 2.0], len_lookback_buffer=0))
            >>> state = buf.get_state()
            >>> state["num_timesteps"], state["episodes"]["ids"], state["steps"]["rewards"].tolist()
            (2, ['a'], [1.0, 2.0])
        """
        from episodes.replay.state import buffer_state

        return buffer_state(self)

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores a :meth:`get_state` snapshot (the capacity too).

        Example:
            >>> buf = EpisodeReplayBuffer(10, seed=0)
            >>> buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
            ...                            rewards=[1.0, 2.0], len_lookback_buffer=0))
            >>> copy = EpisodeReplayBuffer(3)
            >>> copy.set_state(buf.get_state())
            >>> copy.capacity, copy.get_episode_ids(), copy.get_num_timesteps()
            (10, ['a'], 2)
        """
        from episodes.replay.state import restore_buffer

        restore_buffer(self, state)
