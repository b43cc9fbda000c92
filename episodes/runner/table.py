"""The chunk table of one recorded call: where every chunk lies in the blocks, computed with numpy.

Sub-env ``i``'s window is its ``T`` transitions of the call (rows of its column, dead rows
skipped); it splits after every row whose transition ended an episode. A chunk is one piece:
its env, first and stop rows, lookback (its episode's age, at most ``L``), episode number,
``t_started`` and end flags. Chunks come env by env, in time order; an episode that ends in the
window's last row leaves no empty chunk behind.

Example:
    >>> from episodes.runner.blocks import Blocks
    >>> blocks = Blocks.allocate(np.zeros((2, 1)), rows=3)
    >>> blocks.terminated[1, 0] = True  # env 0 ends an episode in row 1
    >>> events = np.array([[1], [0], [2]])  # (row, env, the next episode's number)
    >>> state = (np.zeros(2, np.int64), np.zeros(2, np.int64), np.arange(2))
    >>> table, window, _ = chunk_table(blocks, 3, 3, 0, state, events, None)
    >>> table.env.tolist(), table.first.tolist(), table.stop.tolist(), table.number.tolist()
    ([0, 0, 1], [0, 2, 0], [2, 3, 3], [0, 2, 1])
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from episodes.runner.blocks import Blocks
from episodes.runner.finals import Finals
from episodes.runner.row_infos import RowInfos
from episodes.runner.timing import chunk_times


@dataclass(frozen=True)
class ChunkTable:
    """One entry per chunk (numpy arrays of equal length).

    Example:
        >>> blocks = Blocks.allocate(np.zeros((1, 1)), rows=4)
        >>> blocks.truncated[1, 0] = blocks.dead[2, 0] = True  # next-step: row 2 resets
        >>> state = (np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64))
        >>> table = chunk_table(blocks, 4, 3, 0, state, np.array([[1], [0], [1]]), None)[0]
        >>> len(table), table.truncated.tolist(), table.last_step.tolist()
        (2, [True, False], [1, 2])
    """

    env: np.ndarray
    first: np.ndarray
    stop: np.ndarray
    lookback: np.ndarray
    number: np.ndarray
    t_started: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    #: The ending's entry in ``Recording.finals`` for a finished chunk whose final
    #: observation is kept apart, -1 otherwise.
    final: np.ndarray
    #: The window step (0 .. T - 1) of the chunk's last transition.
    last_step: np.ndarray
    #: The chunk's ``start_time`` and ``last_step_time`` (float64, NaN: none; see
    #: :mod:`episodes.runner.timing`).
    start_time: np.ndarray
    last_step_time: np.ndarray

    def __len__(self) -> int:
        return len(self.env)

    def clocks(self, k: int) -> dict[str, float | None]:
        """Chunk ``k``'s clock fields, as ``SingleAgentEpisode.from_fields`` takes them.

        Example:
            >>> blocks = Blocks.allocate(np.zeros((1, 1)), rows=2)
            >>> blocks.times[:3] = [5.0, 6.0, 7.0]  # the reset, then two steps
            >>> state = (np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64))
            >>> chunk_table(blocks, 2, 2, 0, state, np.zeros((3, 0), int), None)[0].clocks(0)
            {'start_time': 5.0, 'last_step_time': 7.0}
        """
        start, last = float(self.start_time[k]), float(self.last_step_time[k])
        return {
            "start_time": None if start != start else start,  # NaN: no time recorded
            "last_step_time": None if last != last else last,
        }


@dataclass(frozen=True)
class Recording:
    """Everything one ``sample()`` call recorded: blocks, chunk table, sparse infos and finals.

    ``window[i]`` lists the rows of sub-env ``i``'s ``num_steps`` transitions (dead rows
    skipped); ``infos[(row, env)]`` is the info of observation row ``row`` (missing: ``{}``).
    ``finals`` holds the final observations kept apart from the blocks (same-step and disabled
    modes; ``table.final`` says which entry is whose), ``final_infos[(row, env)]`` the final
    info of the episode ending in ``row``. ``device`` holds the blocks on the env's torch
    device when the env yields tensors (see :mod:`episodes.runner.device_recorder`).

    Example:
        >>> import gymnasium as gym
        >>> from episodes.runner import EnvRunner, RandomPolicy
        >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
        >>> runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
        >>> rec = runner.sample(3).recording
        >>> rec.num_steps, rec.window.tolist(), rec.table.env.tolist()
        (3, [[0, 1, 2], [0, 1, 2]], [0, 1])
    """

    blocks: Blocks
    lookback: int
    num_steps: int
    table: ChunkTable
    window: np.ndarray
    infos: RowInfos
    finals: Finals
    final_infos: RowInfos
    uid: str
    #: The blocks on the env's device when the env yields torch tensors (``blocks`` is then
    #: their host mirror), else None.
    device: Any = None
    #: A next-step window of ``num_steps`` vector steps, the same rows for every env, whose
    #: reset steps hold no transition (see :meth:`dead_cells`); other modes' windows of vector
    #: steps hold transitions only and leave this False.
    vector_steps: bool = False

    @property
    def aligned_start(self) -> int | None:
        """The first row when every env's window is the same row range, else None.

        Example:
            >>> import gymnasium as gym
            >>> from episodes.runner import EnvRunner, RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
            >>> runner.sample(4).recording.aligned_start  # no episode ended: rows 0..3 for both
            0
            >>> print(runner.sample(30).recording.aligned_start)  # reset steps shifted the windows
            None
        """
        first = int(self.window[0, 0]) if self.window.size else 0
        expected = first + np.arange(self.num_steps)
        return first if bool((self.window == expected).all()) else None

    def dead_cells(self) -> Any:
        """``[T, N]`` bool, True where the window holds no transition; see below for None.

        Only a window of vector steps (``vector_steps``) can hold such cells: the next-step
        reset steps; other windows give None. A host recording gives a numpy array, or None
        when the window has no such cell, and so does a torch recording on the CPU (a bool
        tensor); on an accelerator the mask is always given, a bool tensor on the env's device
        (all False when no cell is dead: asking the device whether any is set would wait for
        it).

        Example:
            >>> import gymnasium as gym
            >>> from episodes.runner import EnvRunner, RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0,
            ...                    window="vector_steps")
            >>> dead = runner.sample(40).recording.dead_cells()
            >>> dead.shape, bool(dead.any())  # an episode ended, its env's reset step follows
            ((40, 2), True)
        """
        if not self.vector_steps:
            return None
        first = int(self.window[0, 0]) if self.window.size else 0
        blocks = self.device if self.device is not None else self.blocks
        dead = blocks.dead[first : first + self.num_steps]
        if self.device is not None and dead.device.type != "cpu":
            return dead  # asking the device whether any is set would wait for it
        return dead if dead.any() else None

    def compact(self, *, keep_device: bool = False) -> Recording:
        """The recording cut to the rows its chunks read (views), renumbered from row 0.

        The blocks a call records into may also hold earlier calls' rows (calls append while
        there is room): what is pickled or sent to another process is the one band of rows
        from the earliest any of this call's chunks reads (with its lookback) to the latest.
        In next-step mode a sub-env's window lags or leads the others' by its carried rows, so
        the band also holds rows that other sub-envs' chunks of earlier or later calls read:
        it grows with the carried rows (see ``episodes.runner.backlog``). A
        recording on a torch device becomes a host recording of its host mirror (a view of a
        device tensor would pickle all of the tensor's rows, and the other side may have no
        such device), unless ``keep_device`` (a copy within this process): then it is
        returned as it is.

        Example:
            >>> import gymnasium as gym
            >>> from episodes.runner import EnvRunner, RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
            >>> _ = runner.sample(4); rec = runner.sample(4).recording
            >>> rec.blocks.step_rows > rec.compact().blocks.step_rows
            True
        """
        table = self.table
        if self.device is not None:
            if keep_device:
                return self
            return dataclasses.replace(self, device=None).compact()
        if not len(table):
            return self
        first = int((table.first - table.lookback).min())
        stop = int(table.stop.max())
        if self.vector_steps:  # the window's first or last rows may be reset steps only
            first = min(first, int(self.window[:, 0].min()))
            stop = max(stop, int(self.window[:, -1].max()) + 1)
        if first == 0 and stop == self.blocks.step_rows:
            return self

        return dataclasses.replace(
            self,
            blocks=self.blocks.rows_between(first, stop),
            table=dataclasses.replace(table, first=table.first - first, stop=table.stop - first),
            window=self.window - first,
            infos=self.infos.moved(first, stop, -first),
            finals=self.finals.kept(np.ones(len(self.finals.rows), bool), -first),
            final_infos=self.final_infos.moved(first, stop, -first),
        )

    def chunk_lengths(self) -> list[int]:
        """The number of steps of every chunk.

        Example:
            >>> import gymnasium as gym
            >>> from episodes.runner import EnvRunner, RandomPolicy
            >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
            >>> runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
            >>> sum(runner.sample(4).recording.chunk_lengths())
            8
        """
        return (self.table.stop - self.table.first).tolist()


State = tuple[np.ndarray, np.ndarray, np.ndarray]


def chunk_table(
    blocks: Blocks,
    rows: int,
    num_steps: int,
    lookback: int,
    state: State,
    events: np.ndarray,
    finals: Finals | None,
) -> tuple[ChunkTable, np.ndarray, State]:
    """The chunks of the call's window, and the per-env state the next call starts from.

    Args:
        blocks: The call's blocks.
        rows: How many rows the call wrote.
        num_steps: ``T``: transitions per env in the window.
        lookback: ``L``: the chunks' lookback, clamped to their episode's age.
        state: Per env, the first row not handed out yet, and the start row and number of the
            episode holding it.
        events: ``[3, k]``: (done row, env, number of the episode that follows) per ending.
        finals: The (frozen) final observations kept apart, or None in next-step mode (final
            observations stay in place and a dead row follows every ending).

    Returns:
        The table; per env the rows of its window ``[N, T]``; the next call's state.

    Example:
        >>> blocks = Blocks.allocate(np.zeros((1, 1)), rows=4)
        >>> blocks.terminated[1, 0] = True  # next-step mode: row 2 is the reset step
        >>> blocks.dead[2, 0] = True
        >>> state = (np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64))
        >>> table, window, (start, _, number) = chunk_table(
        ...     blocks, 4, 3, 0, state, np.array([[1], [0], [1]]), None)
        >>> window.tolist(), table.number.tolist(), start.tolist(), number.tolist()
        ([[0, 1, 3]], [0, 1], [4], [1])
    """
    start, episode_start, episode_number = state
    num_envs = blocks.rewards.shape[1]
    # Rows before every env's start were handed out already (calls append to the same blocks):
    # only rows lo:rows are looked at; ``local`` arrays count from lo.
    lo = int(start.min()) if num_envs else 0
    span = rows - lo
    columns = np.arange(num_envs)
    done_local = blocks.terminated[lo:rows] | blocks.truncated[lo:rows]
    if span == num_steps and (start == lo).all() and not blocks.dead[lo:rows].any():
        # Every env's window is the same T rows (same-step mode, nothing carried beyond
        # them): no count of each env's cells, the done flags are their transposed copy.
        window = np.empty((num_envs, num_steps), np.int64)
        window[...] = np.arange(lo, rows)
        done_em = np.ascontiguousarray(done_local.T)
    else:
        real = ~blocks.dead[lo:rows] & (np.arange(lo, rows)[:, None] >= start)
        in_window = real & (_running_count(real) <= num_steps)
        # Row of every in-window cell, env by env (a flat nonzero of the transposed copy is
        # about twice as fast as a 2-D nonzero here).
        flat = np.flatnonzero(np.ascontiguousarray(in_window.T)).reshape(num_envs, num_steps)
        # Env-major positions: the done flags are read at them in their transposed copy, then
        # a subtraction in place finds the row (cheaper than a modulo; no second [N, T] array).
        done_em = np.take(np.ascontiguousarray(done_local.T).reshape(-1), flat)
        window = flat
        window -= (columns * span - lo)[:, None]

    ends = done_em.copy()
    ends[:, -1] = True
    # Flat env-major cells: every env's last cell ends a chunk, so the cell after each ending
    # is the first of the next chunk, the next env's too (1-d takes, no 2-d fancy indexing).
    end_cell = np.flatnonzero(ends)
    first_cell = np.empty_like(end_cell)
    first_cell[:1] = 0
    first_cell[1:] = end_cell[:-1] + 1
    env = end_cell // num_steps
    t_end = end_cell - env * num_steps
    is_first = first_cell == env * num_steps
    cells = window.reshape(-1)
    first = cells[first_cell]
    stop = cells[end_cell] + 1
    previous_end = cells[np.maximum(first_cell - 1, 0)]
    # The numbers of the episodes that endings start, looked up among the endings (a dense
    # [rows, N] int64 array of them was the table's largest temporary).
    number = episode_number[env]
    later = np.flatnonzero(~is_first)
    if len(later):
        number[later] = _numbers_after(events, previous_end[later], env[later], num_envs)
    started = np.where(is_first, episode_start[env], first)
    table = _table(blocks, finals, rows + 1, lookback, env, first, stop, started, number, t_end)
    last = np.flatnonzero(t_end == num_steps - 1)  # every env's last chunk, env by env
    last_row = window[:, -1]
    last_done = done_em[:, -1]
    gap = 2 if finals is None else 1  # next-step: the reset step's dead row comes first
    next_start = np.where(last_done, last_row + gap, last_row + 1)
    numbers = number[last]
    ending = np.flatnonzero(last_done)
    if len(ending):
        numbers[ending] = _numbers_after(events, last_row[ending], ending, num_envs)
    next_state = (next_start, np.where(last_done, next_start, started[last]), numbers)
    return table, window, next_state


def _numbers_after(
    events: np.ndarray, rows: np.ndarray, envs: np.ndarray, num_envs: int
) -> np.ndarray:
    """The number of the episode that follows each ending ``(row, env)`` (all recorded).

    Looked up by row-major cell: the events come in row order (the carried ones first),
    sub-envs in order within a row, so their cells need no sort (checked; sorted if not).

    Example:
        >>> _numbers_after(np.array([[1, 3, 3], [1, 0, 1], [7, 8, 9]]), np.array([3, 1]),
        ...                np.array([1, 1]), num_envs=2).tolist()
        [9, 7]
    """
    keys, numbers = events[0] * num_envs + events[1], events[2]
    if (keys[1:] < keys[:-1]).any():  # not in order after all: sorted first
        order = np.argsort(keys, kind="stable")
        keys, numbers = keys[order], numbers[order]
    wanted = rows * num_envs + envs
    found = np.searchsorted(keys, wanted)
    assert (keys[np.minimum(found, len(keys) - 1)] == wanted).all()
    return numbers[found]


def _running_count(flags: np.ndarray) -> np.ndarray:
    """``np.cumsum(flags, axis=0)``; a loop over the (few) rows is many times faster here."""
    out = np.empty(flags.shape, np.int32)
    count = np.zeros(flags.shape[1:], np.int32)
    for here, total in zip(flags, out):
        count += here
        total[...] = count
    return out


def vector_chunk_table(
    blocks: Blocks,
    first: int,
    num_steps: int,
    lookback: int,
    state: State,
    events: np.ndarray,
    finals: Finals | None,
) -> tuple[ChunkTable, np.ndarray, State]:
    """The chunks of a window of ``num_steps`` vector steps from row ``first``, for every env.

    Every env's window is the same rows ``first:first + num_steps``; a next-step reset step
    in it (a dead row) holds no transition, so an env's chunks cover the window's rows less
    its reset steps. Arguments and results are those of :func:`chunk_table`.

    Example:
        >>> blocks = Blocks.allocate(np.zeros((1, 1)), rows=4)
        >>> blocks.terminated[1, 0] = True  # next-step mode: row 2 is the reset step
        >>> blocks.dead[2, 0] = True
        >>> state = (np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64))
        >>> table, window, (start, _, number) = vector_chunk_table(
        ...     blocks, 0, 4, 0, state, np.array([[1], [0], [1]]), None)
        >>> table.first.tolist(), table.stop.tolist(), table.number.tolist()
        ([0, 3], [2, 4], [0, 1])
        >>> window.tolist(), start.tolist(), number.tolist()
        ([[0, 1, 2, 3]], [4], [1])
    """
    start, episode_start, episode_number = state
    num_envs = blocks.rewards.shape[1]
    stop_row = first + num_steps
    here = np.arange(first, stop_row)
    live = ~blocks.dead[first:stop_row] & (here[:, None] >= start)
    done = (blocks.terminated[first:stop_row] | blocks.truncated[first:stop_row]) & live
    # The live cells env by env, in time order; a chunk ends at an ending or its env's last cell.
    cells = np.flatnonzero(np.ascontiguousarray(live.T))
    cell_env, cell_t = np.divmod(cells, num_steps)
    ends = np.ascontiguousarray(done.T).reshape(-1)[cells]
    if len(cells):
        ends[-1] = True
        ends[:-1] |= cell_env[1:] != cell_env[:-1]
    last_cell = np.flatnonzero(ends)
    first_cell = np.zeros_like(last_cell)
    first_cell[1:] = last_cell[:-1] + 1
    env = cell_env[last_cell]
    chunk_first = first + cell_t[first_cell]
    chunk_stop = first + cell_t[last_cell] + 1
    is_first = np.ones(len(env), bool)
    is_first[1:] = env[1:] != env[:-1]
    number = episode_number[env]
    started = episode_start[env]
    later = np.flatnonzero(~is_first)
    if len(later):
        # A later chunk starts the episode that the ending of the chunk before it numbered.
        number[later] = _numbers_after(events, chunk_stop[later - 1] - 1, env[later], num_envs)
        started[later] = chunk_first[later]
    table = _table(
        blocks,
        finals,
        stop_row + 1,
        lookback,
        env,
        chunk_first,
        chunk_stop,
        started,
        number,
        cell_t[last_cell],
    )
    window = np.repeat(here[None, :], num_envs, axis=0)
    # Each env's latest ending in the window starts the episode the next call continues.
    gap = 2 if finals is None else 1  # next-step: the reset step's dead row comes first
    any_done = done.any(axis=0)
    done_row = stop_row - 1 - np.argmax(done[::-1], axis=0)
    numbers = episode_number.copy()
    ending = np.flatnonzero(any_done)
    if len(ending):
        numbers[ending] = _numbers_after(events, done_row[ending], ending, num_envs)
    next_state = (
        np.where(any_done, np.maximum(stop_row, done_row + gap), np.maximum(stop_row, start)),
        np.where(any_done, done_row + gap, episode_start),
        numbers,
    )
    return table, window, next_state


def _table(
    blocks: Blocks,
    finals: Finals | None,
    width: int,
    lookback: int,
    env: np.ndarray,
    first: np.ndarray,
    stop: np.ndarray,
    started: np.ndarray,
    number: np.ndarray,
    last_step: np.ndarray,
) -> ChunkTable:
    """The table of chunks given by env, rows, episode start row and number, last step.

    The end flags are read at each chunk's last row; ``width`` exceeds every row (for looking
    up the final observations kept apart).
    """
    t_started = first - started
    terminated = blocks.terminated[stop - 1, env]
    truncated = blocks.truncated[stop - 1, env]
    final = np.full(len(env), -1, np.int64)
    ended = terminated | truncated
    if finals is not None and ended.any():
        final[ended] = finals.index_of(stop[ended] - 1, env[ended], width)
    start_time, last_step_time = chunk_times(blocks.times, first, stop, t_started)
    return ChunkTable(
        env=env,
        first=first,
        stop=stop,
        lookback=np.minimum(lookback, t_started),
        number=number,
        t_started=t_started,
        terminated=terminated,
        truncated=truncated,
        final=final,
        last_step=last_step,
        start_time=start_time,
        last_step_time=last_step_time,
    )
