"""SampledChunks: what ``EnvRunner.sample()`` returns, a lazy sequence of block-backed chunks.

The runner records a call into time-major blocks (see :mod:`episodes.runner.recorder`); a
chunk is a row range of one sub-env's column. ``chunks[k]`` builds chunk ``k`` the first time it
is touched (and caches it): an ordinary numpy'd :class:`SingleAgentEpisode` whose columns are
:class:`~episodes.buffer.view_store.ViewStore` views into the blocks. Only the observation
column of an episode whose final observation was kept apart (same-step and disabled modes) is a
small copy.

Write rule: copy on write. A setter, append, ``concat_episode``, pop or truncate first copies
the column it changes, so no chunk ever writes into a block: rows are shared (a chunk's lookback
is the previous chunk's tail, and later calls append to the same blocks while there is room),
and a row, once handed out, is never written again.

The converter reads the blocks directly (:meth:`SampledChunks.time_major`) when no chunk was
changed in a way the blocks do not see (:meth:`SampledChunks.unchanged`).

Example:
    >>> import gymnasium as gym
    >>> from episodes.runner import EnvRunner, RandomPolicy
    >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    >>> chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(5)
    >>> sum(len(c) for c in chunks), chunks[0].custom_data["env_index"]
    (10, 0)
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Iterator, Sequence
from typing import Any, overload

import gymnasium as gym
import numpy as np

from episodes.buffer import InfiniteLookbackBuffer
from episodes.buffer.list_store import ListStore
from episodes.buffer.view_store import ViewStore
from episodes.episode import SingleAgentEpisode
from episodes.episode.single_agent_episode import REWARD_SPACE
from episodes.indexing import sequence_position, whole_number
from episodes.runner.blocks import Column
from episodes.runner.chunk_signature import chunk_signature, to_list_mode, views_intact
from episodes.runner.infos import chunk_infos, same_infos
from episodes.runner.table import Recording
from episodes.structs import unflatten

__all__ = ["SampledChunks"]


class SampledChunks(Sequence[SingleAgentEpisode]):
    """The chunks of one ``sample()`` call: env by env, in time order, built when touched.

    A :class:`collections.abc.Sequence`: ``len``, indexing, iteration, slicing (to a list)
    and ``==`` with any sequence of episodes work as on a list.

    Args:
        recording: The call's blocks, chunk table, infos and final observations.
        observation_space: Space of one observation.
        action_space: Space of one action.
        numpy_episodes: False: chunks are switched to list mode as they are built.

    Example:
        >>> from episodes.runner import EnvRunner, RandomPolicy
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        >>> chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(3)
        >>> len(chunks), chunks.built()
        (2, [])
        >>> chunks[1].custom_data["env_index"], chunks.built(), chunks[1] is chunks[1]
        (1, [1], True)
    """

    def __init__(
        self,
        recording: Recording,
        observation_space: gym.Space[Any] | None,
        action_space: gym.Space[Any] | None,
        *,
        numpy_episodes: bool = True,
    ):
        self.recording = recording
        self.observation_space = observation_space
        self.action_space = action_space
        self.numpy_episodes = numpy_episodes
        # Built chunks: (chunk, its signature when built, whether its obs column is a copy).
        self._cache: dict[int, tuple[SingleAgentEpisode, tuple[Any, ...], bool]] = {}
        self._flat_index: Any = None  # numpy, or a tensor on the blocks' device
        self._aligned: int | None = recording.aligned_start
        # custom_data and infos of chunks to be rebuilt (a copy dropped their unchanged columns).
        self._custom: dict[int, dict[Any, Any]] = {}
        self._infos: dict[int, list[Any]] = {}

    # ---------------------------------------------------------------------------- sequence
    def __len__(self) -> int:
        return len(self.recording.table)

    @overload
    def __getitem__(self, index: int) -> SingleAgentEpisode: ...

    @overload
    def __getitem__(self, index: slice) -> list[SingleAgentEpisode]: ...

    def __getitem__(self, index: int | slice) -> SingleAgentEpisode | list[SingleAgentEpisode]:
        if isinstance(index, slice):
            return [self[k] for k in range(*index.indices(len(self)))]
        k = sequence_position(index, len(self))
        cached = self._cache.get(k)
        if cached is not None:
            return cached[0]
        episode = self._build(k)
        custom = self._custom.pop(k, None)
        if custom is not None:
            episode.custom_data.clear()
            episode.custom_data.update(custom)
        copied = bool(self.recording.table.final[k] >= 0)
        self._cache[k] = (episode, chunk_signature(episode), copied)
        return episode

    def __iter__(self) -> Iterator[SingleAgentEpisode]:
        for k in range(len(self)):
            yield self[k]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __getstate__(self) -> dict[str, Any]:  # for another process: device blocks go as host
        return self._state(keep_device=False)

    def __copy__(self) -> SampledChunks:
        # A list's copy: built chunks and the blocks (rows handed out stay as they are) shared.
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__, _cache=dict(self._cache), _custom=dict(self._custom))
        new._infos = dict(self._infos)
        return new

    def __deepcopy__(self, memo: dict[int, Any]) -> SampledChunks:
        # A copy in this process keeps the device: the converter's device path still applies.
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__setstate__(copy.deepcopy(self._state(keep_device=True), memo))
        return new

    def _state(self, *, keep_device: bool) -> dict[str, Any]:
        # Only the band of rows this call's chunks read travels (see ``Recording.compact``).
        state = dict(self.__dict__)
        state["recording"] = self.recording.compact(keep_device=keep_device)
        state["_flat_index"] = None
        state["_aligned"] = state["recording"].aligned_start  # compacting renumbers the rows
        # A built chunk the blocks still describe is rebuilt from them on the other side (a copy
        # would own its arrays: unchanged() False); its custom_data (user keys, stamps) travels.
        state["_cache"], state["_custom"], state["_infos"] = {}, dict(self._custom), {}
        envs = self.recording.table.env
        for k, entry in self._cache.items():
            # A chunk changed since it was built (a flag, a column, its id or spaces) travels
            # as it is: rebuilt from the blocks, the change would be lost.
            chunk = entry[0]
            # A finalized infos column is no list of the recording's dicts: it travels too.
            changed = chunk_signature(chunk) != entry[1] or chunk.infos.finalized
            if changed or not views_intact(entry[1], entry[2]):
                state["_cache"][k] = entry
                continue
            # Infos are plain dicts, not in the blocks: ones written in place or replaced
            # travel beside the chunk, which is rebuilt (still unchanged() on the other side).
            have = chunk.infos.store.items(0)
            if not same_infos(have, self._info_list(k)):
                state["_infos"][k] = list(have)
            if chunk.custom_data != {"env_index": int(envs[k])}:
                state["_custom"][k] = chunk.custom_data
        state["_infos"] = {**self._infos, **state["_infos"]}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_custom", {})
        self.__dict__.setdefault("_infos", {})
        self._aligned = self.recording.aligned_start

    def __repr__(self) -> str:
        return (
            f"SampledChunks({len(self)} chunks of {self.recording.num_steps} steps per env, "
            f"{len(self._cache)} built)"
        )

    # ------------------------------------------------------------------------------- table
    @property
    def env_indices(self) -> np.ndarray:
        """The sub-env that recorded every chunk (a later edit of its custom_data aside).

        Example:
            >>> from episodes.runner import EnvRunner, RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(12)
            >>> chunks.env_indices.tolist(), chunks.built()
            ([0, 0, 1], [])
        """
        return self.recording.table.env.copy()  # the table's own array places every chunk

    def lengths(self) -> np.ndarray:
        """The number of steps of every chunk, without building any.

        Example:
            >>> from episodes.runner import EnvRunner, RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(12)
            >>> chunks.lengths().tolist()  # sub-env 0's first episode ended after 10 steps
            [10, 2, 12]
        """
        table = self.recording.table
        lengths = table.stop - table.first
        for k, entry in self._cache.items():  # a built chunk may have grown since
            lengths[k] = len(entry[0])
        return lengths

    def by_env(self) -> list[list[SingleAgentEpisode]]:
        """The chunks grouped per sub-env, in time order (builds every chunk).

        Example:
            >>> from episodes.runner import EnvRunner, RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(12)
            >>> [[len(c) for c in group] for group in chunks.by_env()], chunks.built()
            ([[10, 2], [12]], [0, 1, 2])
        """
        groups: list[list[SingleAgentEpisode]] = [[] for _ in range(self.num_envs)]
        for k, env in enumerate(self.env_indices.tolist()):
            groups[env].append(self[k])
        return groups

    @property
    def num_envs(self) -> int:
        """The number of sub-envs (columns of the blocks).

        Example:
            >>> from episodes.runner import EnvRunner, RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(12)
            >>> chunks.num_envs, len(chunks)
            (2, 3)
        """
        return int(self.recording.blocks.rewards.shape[1])

    def built(self) -> list[int]:
        """Indices of the chunks built so far.

        Example:
            >>> from episodes.runner import EnvRunner, RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(12)
            >>> _ = chunks[2], chunks[0]
            >>> chunks.built()
            [0, 2]
        """
        return sorted(self._cache)

    def stored_custom_data(self, k: int) -> dict[Any, Any] | None:
        """Chunk ``k``'s ``custom_data`` where someone may have stored something, unbuilt.

        A built chunk's own dict, the dict a copy or pickle carried for a chunk it did not
        build, or None (never built: only its ``env_index``). ``k`` is read as ``chunks[k]``
        reads it (a ``TypeError`` for a bool or a float, an ``IndexError`` out of range).

        Example:
            >>> import copy
            >>> from episodes.runner import EnvRunner, RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(3)
            >>> chunks.stored_custom_data(0) is None
            True
            >>> chunks[0].custom_data["bootstrap_value"] = 0.5
            >>> twin = copy.deepcopy(chunks)
            >>> twin.built(), twin.stored_custom_data(0)
            ([], {'env_index': 0, 'bootstrap_value': 0.5})
        """
        k = sequence_position(k, len(self))  # as ``chunks[k]`` reads it
        cached = self._cache.get(k)
        if cached is not None:
            return cached[0].custom_data
        return self._custom.get(k)

    # ------------------------------------------------------------------------- materialise
    def _info_list(self, k: int) -> list[Any]:
        """Chunk ``k``'s infos: the recording's, or those a copy carried for it."""
        given = self._infos.get(k)
        return list(given) if given is not None else chunk_infos(self.recording, k)

    def _build(self, k: int) -> SingleAgentEpisode:
        rec = self.recording
        table, blocks = rec.table, rec.blocks
        env, first, stop = int(table.env[k]), int(table.first[k]), int(table.stop[k])
        lookback = int(table.lookback[k])
        start = first - lookback
        entry = int(table.final[k])
        if entry >= 0:  # the final observation was kept apart: this one column is a small copy
            leaves = [
                np.concatenate([leaf[start:stop, env], final[entry : entry + 1]])
                for leaf, final in zip(blocks.obs.leaves, rec.finals.leaves)
            ]
            observations = unflatten(blocks.obs.structure, leaves)
        else:
            observations = blocks.obs.view(start, stop + 1, env)
        assert blocks.actions is not None

        def column(data: Any, space: gym.Space[Any] | None = None) -> InfiniteLookbackBuffer:
            return InfiniteLookbackBuffer(ViewStore.from_batch(data), lookback, space)

        episode = SingleAgentEpisode.from_fields(
            {
                "id_": f"{rec.uid}{int(table.number[k]):08x}",
                "observations": column(observations, self.observation_space),
                "infos": InfiniteLookbackBuffer(ListStore(self._info_list(k)), lookback),
                "actions": column(blocks.actions.view(start, stop, env), self.action_space),
                "rewards": column(blocks.rewards[start:stop, env], REWARD_SPACE),
                "extra_model_outputs": {
                    key: column(block.view(start, stop, env))
                    for key, block in blocks.extras.items()
                },
                "is_terminated": bool(table.terminated[k]),
                "is_truncated": bool(table.truncated[k]),
                "t_started": int(table.t_started[k]),
                **table.clocks(k),
                "observation_space": self.observation_space,
                "action_space": self.action_space,
                "custom_data": {"env_index": env},
            }
        )
        if not self.numpy_episodes:
            to_list_mode(episode)
        return episode

    def renumber(self, index: int, env_index: int) -> SingleAgentEpisode:
        """Chunk ``index`` numbered ``env_index`` in a wider layout (a ``GroupSample``'s): no edit.

        :meth:`unchanged` stays True; an edit of ``env_index`` before or after still counts.

        Example:
            >>> from episodes.runner import EnvRunner, RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(3)
            >>> chunks.renumber(1, 5).custom_data["env_index"], chunks.unchanged()
            (5, True)
            >>> chunks[1].custom_data["env_index"] = 6  # the caller's own edit
            >>> chunks.unchanged()
            False
        """
        number, episode = whole_number(env_index, "env_index", 0), self[index]
        k = operator.index(index) % len(self)
        chunk, signature, copied = self._cache[k]
        if signature[-1] == episode.custom_data.get("env_index"):  # an earlier edit stays one
            self._cache[k] = (chunk, (*signature[:-1], number), copied)
        episode.custom_data["env_index"] = number
        return episode

    # --------------------------------------------------------------------------- converter
    def unchanged(self) -> bool:
        """True if the blocks still say what every built chunk says.

        False once a built chunk was written in any way: a setter, append, concat or pop
        (copy on write: the column was copied off the blocks first, so no write reaches them),
        a column, flag, space or lookback replaced, or a switch to list mode.

        Example:
            >>> from episodes.runner import EnvRunner, RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(3)
            >>> chunks.unchanged()
            True
            >>> chunks[0].set_rewards(new_data=5.0, at_indices=0)  # copies the column first
            >>> chunks.unchanged(), chunks.take("rewards")[0].tolist()
            (False, [1.0, 1.0])
        """
        if not self.numpy_episodes and self._cache:
            return False
        # Device blocks do not see writes into their host mirror.
        on_device = self.recording.device is not None
        return all(
            chunk_signature(ep) == sig
            and views_intact(sig, copied)
            and not (on_device and any(store.written for store in sig[1]))
            for ep, sig, copied in self._cache.values()
        )

    def time_major(
        self, extra_keys: Sequence[str], *, lazy_extras: bool = False, observations: bool = True
    ) -> dict[str, Any] | None:
        """The window as ``[T, N, ...]`` columns straight from the blocks (None: a key is missing).

        Keys: ``observations`` (a struct), ``actions``, ``rewards`` (float64), ``dones``,
        ``truncated`` (truncated and not terminated: the steps to bootstrap) and ``extras`` (a
        dict by key; empty with ``lazy_extras``: read them with :meth:`take`; observations are
        None with ``observations=False``, and so are actions). See
        :meth:`take` for when these are views.

        Example:
            >>> from episodes.runner import EnvRunner, RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(12)
            >>> window = chunks.time_major([])
            >>> window["observations"].shape, window["dones"].sum(0).tolist()
            ((12, 2, 4), [1, 0])
            >>> chunks.time_major(["vf_preds"]) is None  # the policy recorded no such output
            True
        """
        blocks = self.recording.blocks
        if blocks.actions is None or any(k not in blocks.extras for k in extra_keys):
            return None
        terminated = self.take("terminated")
        truncated = self.take("truncated")
        return {
            "observations": self.take("observations") if observations else None,
            "actions": self.take("actions") if observations else None,
            "rewards": self.take("rewards"),
            "dones": terminated | truncated,
            "truncated": truncated & ~terminated,
            "extras": {} if lazy_extras else {k: self.take("extra:" + k) for k in extra_keys},
        }

    def take(self, name: str) -> Any:
        """One field of the window as ``[T, N, ...]``, straight from the blocks.

        A view when every env's window is the same row range, else gathered (one take per
        leaf). Names: ``observations``, ``actions``, ``rewards``, ``terminated``, ``truncated`` and
        ``extra:<key>``.

        Example:
            >>> from episodes.runner import EnvRunner, RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(3)
            >>> rewards = chunks.take("rewards")
            >>> rewards.shape, np.shares_memory(rewards, chunks.recording.blocks.rewards)
            ((3, 2), True)
        """
        rec = self.recording
        column = self._column(name)
        first = self._aligned
        if first is not None:
            return column.window(first, first + rec.num_steps)
        if self._flat_index is None:
            self._flat_index = self._window_positions()
            if rec.device is not None:
                # Moved to the device once; every field's gather reuses it.
                self._flat_index = rec.device.index(self._flat_index)
        return column.gather(self._flat_index)

    def gather_plan(self, name: str) -> tuple[list[np.ndarray], np.ndarray] | None:
        """What :meth:`take` gathers, for a caller that gathers into its own arrays.

        Returns None when the windows are aligned (:meth:`take` gives views, nothing to
        gather) or the blocks are on a torch device (:meth:`take` gathers there); else the
        field's leaves flattened to ``[rows * N, ...]`` (views) and the
        ``[T, N]`` positions to take from them.

        Example:
            >>> from episodes.runner import EnvRunner, RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(12)
            >>> leaves, positions = chunks.gather_plan("rewards")  # sub-env 0 skipped a reset step
            >>> leaves[0].shape, positions.shape, positions[-1].tolist()
            ((28,), (12, 2), [24, 23])
        """
        rec = self.recording
        if self._aligned is not None or rec.device is not None:
            return None
        if self._flat_index is None:
            self._flat_index = self._window_positions()
        leaves = self._column(name).flat_leaves()
        return leaves, self._flat_index

    def _window_positions(self) -> np.ndarray:
        """``[T, N]`` flat block positions ``row * N + env`` of the window, C-ordered.

        ``window`` is ``[N, T]``; arithmetic on its transpose would keep the transposed memory
        order, and every gather (and every array gathered with it) would then pay a reorder.
        Computed in one new array: a transposed copy, its product and their sum were three
        ``[T, N]`` int64 arrays at once (the converter's peak at 4096 sub-envs of CartPole).
        """
        window = self.recording.window
        positions = np.empty(window.shape[::-1], np.promote_types(window.dtype, np.int64))
        np.multiply(window.T, self.num_envs, out=positions)
        positions += np.arange(self.num_envs)
        return positions

    def example(self, name: str) -> Any:
        """A ``[1, N, ...]`` struct of views of a field (its layout, for allocating outputs).

        Example:
            >>> from episodes.runner import EnvRunner, RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(3)
            >>> chunks.example("observations").shape, chunks.example("observations").dtype
            ((1, 2, 4), dtype('float32'))
        """
        return self._column(name).window(0, 1)

    def item_shape(self, name: str) -> tuple[int, ...]:
        """The per-step shape of a flat field (see :meth:`take`), without reading it.

        Example:
            >>> from episodes.runner import EnvRunner, RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(3)
            >>> chunks.item_shape("observations"), chunks.item_shape("actions")
            ((4,), ())
        """
        return tuple(self._column(name).leaves[0].shape[2:])

    def _column(self, name: str) -> Column:
        """A field's column: on the device when the env yields tensors, else the host blocks."""
        rec = self.recording
        blocks = rec.blocks if rec.device is None else rec.device
        if name.startswith("extra:"):
            return blocks.extras[name[len("extra:") :]]
        if name == "observations":
            return blocks.obs
        if name == "actions":
            assert blocks.actions is not None
            return blocks.actions
        if name in ("rewards", "terminated", "truncated"):
            return type(blocks.obs)([getattr(blocks, name)], None)  # a numpy or tensor column
        raise KeyError(f"no field {name!r} in the blocks")

    def bootstrap_observations(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
        """The observations whose values a truncation bootstrap needs, batched, in one struct.

        First the final observation of every episode that ended truncated (not terminated) in
        the window, env by env in time order; then the last observation of every env whose
        episode is still running.

        Returns:
            ``(steps, envs, ongoing, observations)``: the window step and env of each truncated
            ending, the envs still running, and the batched observations (truncated first).

        Example:
            >>> from episodes.runner import EnvRunner, RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync", max_episode_steps=2)
            >>> chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(3)
            >>> steps, envs, ongoing, obs = chunks.bootstrap_observations()
            >>> steps.tolist(), envs.tolist(), ongoing.tolist(), obs.shape
            ([1, 1], [0, 1], [0, 1], (4, 4))
        """
        rec = self.recording
        table, blocks = rec.table, rec.blocks
        cut = np.flatnonzero(table.truncated & ~table.terminated)
        env, stop, entry = table.env[cut], table.stop[cut], table.final[cut]
        last = np.flatnonzero(table.last_step == rec.num_steps - 1)
        ongoing = table.env[last][~(table.terminated[last] | table.truncated[last])]
        last_rows = rec.window[ongoing, -1] + 1
        apart = entry >= 0
        if rec.device is not None:
            rows = (stop, env, stop - 1, apart, last_rows, ongoing)
            return table.last_step[cut], env, ongoing, rec.device.bootstrap_observations(*rows)
        leaves = []
        for j, leaf in enumerate(blocks.obs.leaves):
            finals = leaf[stop, env]  # in place (next-step mode)
            if apart.any():
                finals[apart] = rec.finals.leaves[j][entry[apart]]
            leaves.append(np.concatenate([finals, leaf[last_rows, ongoing]]))
        return table.last_step[cut], env, ongoing, unflatten(blocks.obs.structure, leaves)
