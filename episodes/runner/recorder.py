"""Batched recording of vector-env steps into time-major blocks, in every autoreset mode.

Vector step ``r`` of a call writes row ``r`` of every block with one slice assignment per field
(see :mod:`episodes.runner.blocks`); ``obs[r + 1]`` gets the observations the step returned.
Python work per sub-env happens only at episode boundaries (final observations, metrics): a
step's infos are stored batched (:class:`~episodes.runner.row_infos.RowInfos`) and split per
sub-env only when a chunk's infos are read.

Where an episode's final observation goes depends on the autoreset mode:

* next-step: the step returns it, so it stays in place (``obs[k + 1, i]`` for an episode ending
  in row ``k``). Row ``k + 1`` is the reset step: it records no transition (``dead``), and
  ``obs[k + 2, i]`` is the next episode's first observation.
* same-step and disabled: ``obs[k + 1, i]`` is the next episode's first observation (the
  step's, or the runner's ``env.reset``), the final observation is kept apart in
  :class:`~episodes.runner.finals.Finals`.

Each sub-env's window is its first ``num_steps`` recorded transitions (dead rows skipped) from
where the previous call left off; in next-step mode a sub-env may record more (the others wait
for the ones that lost rows to reset steps): those rows are carried over to the next call.

Example:
    >>> import gymnasium as gym
    >>> from episodes.runner.metrics import RunnerMetrics
    >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    >>> obs, infos = env.reset(seed=0)
    >>> rec = BatchedRecorder(2, autoreset_mode_of(env), 1, RunnerMetrics())
    >>> rec.begin(3, obs, infos)
    >>> while not rec.full():
    ...     actions = np.zeros(2, np.int64)
    ...     obs = rec.step(actions, {}, *env.step(actions), reset=env.reset)[0]
    >>> sum(rec.finish().chunk_lengths())
    6
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from episodes.buffer.plain_arrays import check_unmasked
from episodes.runner.blocks import Blocks
from episodes.runner.finals import Finals
from episodes.runner.host_values import env_actions, host_outputs
from episodes.runner.infos import FINAL_KEYS, reported
from episodes.runner.metrics import RunnerMetrics
from episodes.runner.modes import autoreset_mode_of, doubt_next_step
from episodes.runner.nesting import check_env_rows, env_flags, stacked_finals
from episodes.runner.policy import (
    check_env_holds_data,
    check_outputs_hold_data,
)
from episodes.runner.rewards import REAL_KINDS, refused_rewards
from episodes.runner.row_infos import RowInfos
from episodes.runner.table import Recording, chunk_table, vector_chunk_table
from episodes.runner.timing import now

__all__ = ["BatchedRecorder", "autoreset_mode_of", "reported"]

Reset = Callable[..., tuple[Any, dict[str, Any]]]


class BatchedRecorder:
    """The blocks, per-env episode state and sparse side stores of a runner's recording.

    Args:
        num_envs: Sub-envs of the vector env.
        mode: Its autoreset mode.
        lookback: ``len_lookback_buffer`` of the chunks.
        metrics: Where finished episodes are counted.
        vector_steps: A call is ``num_steps`` vector steps, every env's window the same rows
            (next-step reset steps in it hold no transition), instead of ``num_steps``
            transitions per env.

    Example:
        >>> rec = BatchedRecorder(2, AutoresetMode.NEXT_STEP, 1, RunnerMetrics())
        >>> rec.episode_number.tolist(), rec.next_number, rec.blocks is None  # begin() allocates
        ([0, 1], 2, True)
    """

    #: The attributes :meth:`begin` rebinds (see :meth:`saved`).
    BEGUN: tuple[str, ...] = (
        "blocks", "_next", "finals", "num_steps", "recorded", "_begin_row", "_have", "_least",
    )  # fmt: skip
    #: Evidence that a next-step env is same-step (modes.doubt_next_step) for sample's warning.
    doubt: str | None = None
    doubted = False

    def __init__(
        self,
        num_envs: int,
        mode: AutoresetMode,
        lookback: int,
        metrics: RunnerMetrics,
        *,
        vector_steps: bool = False,
    ):
        n = num_envs
        self.num_envs, self.mode, self.lookback, self.metrics = n, mode, lookback, metrics
        self.vector_steps = vector_steps
        self.waiting = 0  # rows recorded and not handed out yet (episodes.runner.backlog)
        self.uid = uuid.uuid4().hex[:24]
        self.returns = np.zeros(n, np.float64)
        self.lengths = np.zeros(n, np.int64)
        self.awaiting = np.zeros(n, bool)
        # Per env: the first row not yet handed out, and the start row and number of the
        # episode holding it (rows of the current blocks; the start may be negative).
        self.start = np.zeros(n, np.int64)
        self.episode_start = np.zeros(n, np.int64)
        self.episode_number = np.arange(n, dtype=np.int64)
        self.next_number = n
        self.infos = RowInfos()
        self.final_infos = RowInfos()
        self.finals: Finals | None = None
        self.events: list[np.ndarray] = []  # [3, k]: done row, env, the next episode's number
        # This call's endings so far: (row, envs, their returns, their lengths).
        self._endings: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
        self.blocks: Blocks | None = None
        # The rows the next call continues from (copied by finish()).
        self._next: Blocks | None = None
        self.row = 0
        self.num_steps = self.recorded = 0
        self._have = np.zeros(n, np.int64)
        self._least = self._begin_row = 0

    # ------------------------------------------------------------------------------ a call
    def saved(self) -> dict[str, Any]:
        """What :meth:`restore` needs to undo a :meth:`begin` that no step followed.

        ``begin`` only rebinds the attributes named in ``BEGUN`` (new blocks, counts) and adds
        the first call's reset infos to ``infos``: their values, and a copy of ``infos``. Read
        by name: ``vars(self)`` would make CPython keep the attributes in a real dict, and
        every later access at each step slower.

        Example:
            >>> rec = BatchedRecorder(2, AutoresetMode.NEXT_STEP, 0, RunnerMetrics())
            >>> before = rec.saved()
            >>> rec.begin(4, np.zeros((2, 3)), {"seed": np.array([5, 6])})
            >>> rec.restore(before); rec.blocks is None, rec.infos
            (True, {})
        """
        saved = {name: getattr(self, name) for name in self.BEGUN}
        saved["infos"] = self.infos.copy()
        return saved

    def restore(self, saved: dict[str, Any]) -> None:
        """Puts back the state :meth:`saved` returned (see there).

        Example:
            >>> rec = BatchedRecorder(1, AutoresetMode.SAME_STEP, 0, RunnerMetrics())
            >>> before = rec.saved(); rec.begin(3, np.zeros((1, 2))); rec.restore(before)
            >>> rec.num_steps, rec.blocks is None
            (0, True)
        """
        for name, value in saved.items():
            setattr(self, name, value)

    def begin(self, num_steps: int, obs: Any, reset_infos: dict[str, Any] | None = None) -> None:
        """Allocates the call's blocks; ``reset_infos`` (first call only) go with ``obs``.

        Raises:
            ValueError: The first call's ``obs`` do not hold one item per sub-env in every leaf
                (``check_env_rows``); nothing is changed.

        Example:
            >>> rec = BatchedRecorder(2, AutoresetMode.NEXT_STEP, 0, RunnerMetrics())
            >>> rec.begin(4, np.zeros((2, 3)), {"seed": np.array([5, 6])})
            >>> rec.blocks.step_rows, rec.blocks.obs.rows  # 2 spare rows for reset steps
            (6, 7)
            >>> sorted(rec.infos), int(rec.infos[(0, 1)]["seed"])  # keyed by (row, env)
            ([(0, 0), (0, 1)], 6)
        """
        carried = self.row
        rows = carried + num_steps + self._slack(num_steps)
        if self._next is None:
            check_env_rows(obs, self.num_envs, "the env's reset observations")
            try:
                self.blocks = Blocks.allocate(obs, rows)
                self.blocks.obs.put(0, obs)
            except TypeError:  # a meta tensor, in torch's words that name no field
                check_env_holds_data(obs, obs_name="the env's reset observations")
                raise
            self.blocks.times[0] = now()  # the reset observations' (``start_time``)
            self._store_infos(reset_infos or {}, None, 0)
        elif self._next.step_rows >= rows:
            # Columns of its own: the policy's outputs are written before the env steps, and
            # a refusal then restores ``_next``, which a widened leaf must not have changed.
            self.blocks = self._next.sharing()
        else:
            self.blocks = self._next.resized(rows)
        self._next = None
        if self.finals is None:
            self.finals = Finals(self.blocks.obs.structure)
        self.num_steps = num_steps
        self.recorded = 0
        self._begin_row = carried
        if self.vector_steps:
            return  # a call is num_steps vector steps: nothing to count per env
        # Transitions each env already holds for this call (carried next-step rows).
        lo = min(int(self.start.min()), carried) if self.num_envs else carried
        held = np.arange(lo, carried)[:, None]
        mine = (held >= self.start) & ~self.blocks.dead[lo:carried]
        self._have = mine.sum(axis=0)
        self._least = int(self._have.min()) if self.num_envs else num_steps

    def full(self) -> bool:
        """True once every sub-env recorded ``num_steps`` transitions for this call.

        Example:
            >>> rec = BatchedRecorder(1, AutoresetMode.SAME_STEP, 0, RunnerMetrics())
            >>> rec.begin(1, np.zeros((1, 2)))
            >>> no = np.zeros(1, bool)
            >>> rec.full(), rec.step(np.zeros(1), {}, np.ones((1, 2)), np.ones(1), no, no, {},
            ...                      reset=None)[1], rec.full()
            (False, None, True)
        """
        if self.vector_steps:
            return self.row - self._begin_row >= self.num_steps
        return self._least >= self.num_steps

    def step(
        self,
        actions: Any,
        extras: dict[str, np.ndarray],
        obs: Any,
        rewards: Any,
        terminateds: Any,
        truncateds: Any,
        infos: dict[str, Any],
        *,
        reset: Reset,
    ) -> tuple[Any, np.ndarray | None]:
        """Records one vector step; returns the policy's next observation and the started mask.

        :meth:`put_outputs` then :meth:`env_step` (the runner calls them around ``env.step``).
        ``reset`` resets sub-envs in disabled mode (``reset(options={"reset_mask": ...})``).
        The started mask (None: no sub-env started an episode) says whose state to reset.

        Example:
            >>> rec = BatchedRecorder(2, AutoresetMode.NEXT_STEP, 0, RunnerMetrics())
            >>> rec.begin(2, np.zeros((2, 3)))
            >>> act, obs, one, no = np.zeros(2), np.ones((2, 3)), np.ones(2), np.zeros(2, bool)
            >>> ends = np.array([False, True])
            >>> rec.step(act, {}, obs, one, ends, no, {}, reset=None)[1] is None
            True
            >>> rec.step(act, {}, obs, one, no, no, {}, reset=None)[1].tolist()  # env 1 resets
            [False, True]
        """
        self.put_outputs(actions, extras)
        return self.env_step(obs, rewards, terminateds, truncateds, infos, reset=reset)

    def put_outputs(self, actions: Any, extras: dict[str, np.ndarray]) -> Any:
        """Writes the policy's outputs for the next vector step; returns the env's actions.

        Outputs viewing a buffer the env writes in place (its observations, the actions it
        clips) are copied first (``Blocks.put_outputs``); recorded at :meth:`env_step`. Torch
        and JAX actions go to the env as their host arrays (``host_values.env_actions``).

        Example:
            >>> rec = BatchedRecorder(2, AutoresetMode.SAME_STEP, 0, RunnerMetrics())
            >>> rec.begin(1, np.zeros((2, 3)))
            >>> obs = np.ones((2, 3))
            >>> import torch
            >>> rec.put_outputs(torch.zeros(2), {"first": obs[:, 0]})  # to hand the env
            array([0., 0.], dtype=float32)
            >>> obs[:] = 7.0  # the env reuses its buffer
            >>> no = np.zeros(2, bool)
            >>> _ = rec.env_step(obs, np.ones(2), no, no, {}, reset=None)
            >>> rec.finish().blocks.extras["first"].leaves[0][0].tolist()
            [1.0, 1.0]
        """
        assert self.blocks is not None, "begin() first"
        try:  # a masked array with masked entries is refused, naming the output
            host, extras = host_outputs(actions, extras)
        except NotImplementedError:
            # A meta tensor (no data), in torch's words: named here, before env.step.
            check_outputs_hold_data(actions, extras)
            raise
        if self.row >= self.blocks.step_rows:
            self.blocks = self.blocks.resized(2 * self.blocks.step_rows)
        self.blocks.put_outputs(self.row, host, extras)
        return env_actions(actions, host)

    def env_step(
        self,
        obs: Any,
        rewards: Any,
        terminateds: Any,
        truncateds: Any,
        infos: dict[str, Any],
        *,
        reset: Reset,
    ) -> tuple[Any, np.ndarray | None]:
        """Records what ``env.step`` returned after :meth:`put_outputs`; as :meth:`step`.

        Example:
            >>> rec = BatchedRecorder(1, AutoresetMode.SAME_STEP, 0, RunnerMetrics())
            >>> rec.begin(1, np.zeros((1, 2)))
            >>> _ = rec.put_outputs(np.zeros(1), {})
            >>> no = np.zeros(1, bool)
            >>> rec.env_step(np.ones((1, 2)), np.ones(1), no, no, {}, reset=None)[0].tolist()
            [[1.0, 1.0]]
        """
        assert self.blocks is not None, "begin() first"
        # Not cast to float64: the block row and running returns are (numpy widens exactly).
        try:
            if rewards.__class__ is not np.ndarray:  # a masked array's mask would be dropped
                check_unmasked(rewards, "the env's rewards")
            rewards = np.asarray(rewards)
            if rewards.dtype.kind not in REAL_KINDS:  # before anything is written (complex)
                raise refused_rewards(rewards.dtype)
            terminateds = env_flags(terminateds, "terminated")
            truncateds = env_flags(truncateds, "truncated")
        except TypeError:  # a meta tensor, in torch's words that name no field
            check_env_holds_data(None, rewards, terminateds, truncateds)
            raise
        r = self.row
        try:
            self.blocks.put_env_step(r, obs, rewards, terminateds, truncateds)
        except TypeError:  # as above
            check_env_holds_data(obs)
            raise
        self.blocks.times[r + 1] = now()  # one clock read per vector step, not per sub-env
        self.row = r + 1
        return self._account(r, obs, rewards, terminateds, truncateds, infos, reset)

    def _account(
        self,
        r: int,
        obs: Any,
        rewards: np.ndarray,
        terminateds: np.ndarray,
        truncateds: np.ndarray,
        infos: dict[str, Any],
        reset: Reset | None,
    ) -> tuple[Any, np.ndarray | None]:
        """The bookkeeping of row ``r`` (written already): endings, dead rows, infos, finals."""
        assert self.blocks is not None
        blocks = self.blocks
        try:  # no errstate: it would cost a step 0.8 us, where a try costs nothing
            self.returns += rewards
        except RuntimeWarning:  # an error filter on inf, -inf or 1e308 rewards: summed already
            pass
        self.lengths += 1
        done = terminateds | truncateds
        waiting = self.awaiting if self.mode is AutoresetMode.NEXT_STEP else None
        resetting = 0 if waiting is None else np.count_nonzero(waiting)
        if resetting:
            assert waiting is not None
            # The reset step of these envs: no transition, its observation starts an episode.
            blocks.dead[r] = waiting
            done &= ~waiting
            self.returns[waiting] = 0.0
            self.lengths[waiting] = 0
            self._have += ~waiting
            self.recorded += self.num_envs - resetting
            self._least = int(self._have.min())
            started: np.ndarray | None = waiting.copy()
        else:
            waiting = None
            blocks.dead[r] = False
            self._have += 1
            self._least += 1
            self.recorded += self.num_envs
            started = None
        ended = done.nonzero()[0]
        policy_obs = obs
        if self.mode is AutoresetMode.NEXT_STEP:
            if infos:
                self._store_infos(infos, None, r + 1)
            self.awaiting = done
        elif self.mode is AutoresetMode.SAME_STEP:
            # Every sub-env's step infos in one store (a shared value is one object); the
            # final keys are the ended envs': their final infos.
            self._store_infos(infos, None, r + 1, drop=FINAL_KEYS)
            if ended.size:
                self._add_finals(r, ended, self._final_leaves(infos, ended))
                self._store_infos(infos.get("final_info", {}), done, r, self.final_infos)
                started = done
        else:
            self._store_infos(infos, ~done, r + 1)
            if ended.size:
                assert reset is not None
                self._add_finals(r, ended, [leaf[r + 1, ended] for leaf in blocks.obs.leaves])
                self._store_infos(infos, done, r, self.final_infos)
                policy_obs, reset_infos = reset(options={"reset_mask": done.copy()})
                blocks.obs.put_rows(
                    np.full(len(ended), r + 1), ended, policy_obs, "the env's reset observations"
                )
                self._store_infos(reset_infos, done, r + 1)
                started = done
        if ended.size:
            self._end_episodes(r, ended)
        return policy_obs, started

    def _final_leaves(self, infos: dict[str, Any], ended: np.ndarray) -> list[np.ndarray]:
        """Same-step final observations of the ``ended`` envs as ``[k, ...]`` leaves.

        In the observation block's dtypes (rounded, or the block widened: ``Column.fitted``), so
        that the final observation joins its episode's others; gymnasium's vector envs pass
        ``final_obs`` through as the sub-env gave it, not cast into the batched space.
        """
        assert self.blocks is not None
        column = self.blocks.obs
        leaves = stacked_finals(infos, ended, column.structure, column.shapes)
        return column.fitted(leaves, "the env's final observations")

    def _add_finals(self, row: int, ended: np.ndarray, leaves: list[np.ndarray]) -> None:
        assert self.finals is not None
        self.finals.add(np.full(len(ended), row, np.int64), ended, leaves)

    def _end_episodes(self, row: int, ended: np.ndarray) -> None:
        # Numbered and counted once per call (_number_endings): a stack per step costs more.
        self._endings.append((row, ended, self.returns[ended], self.lengths[ended]))
        self.returns[ended] = 0.0
        self.lengths[ended] = 0

    def _number_endings(self) -> None:
        """Numbers the call's endings in order (the next episodes' ids) and counts them."""
        if not self._endings:
            return
        endings, self._endings = self._endings, []
        rows = np.repeat([r for r, _, _, _ in endings], [len(e) for _, e, _, _ in endings])
        envs = np.concatenate([e for _, e, _, _ in endings]).astype(np.int64)
        self.metrics.add_episodes(
            np.concatenate([x for _, _, x, _ in endings]),
            np.concatenate([x for _, _, _, x in endings]),
        )
        numbers = self.next_number + np.arange(len(envs), dtype=np.int64)
        self.next_number += len(envs)
        self.events.append(np.stack([rows, envs, numbers]))

    def _store_infos(
        self,
        infos: dict[str, Any],
        where: np.ndarray | None,
        row: int,
        into: RowInfos | None = None,
        drop: tuple[str, ...] = (),
    ) -> None:
        """Stores the infos of the envs in ``where`` that reported one, at ``row`` (batched)."""
        mask = reported(infos, self.num_envs, drop)
        if mask is None:
            return
        if where is not None:
            mask &= where
        (self.infos if into is None else into).add(row, infos, mask, drop)

    def _slack(self, num_steps: int) -> int:
        # Next-step sub-envs need a few extra vector steps (their reset steps); blocks that
        # still run out of rows are doubled.
        if self.vector_steps or self.mode is not AutoresetMode.NEXT_STEP:
            return 0
        return num_steps // 16 + 2

    # --------------------------------------------------------------------------- the end
    def finish(self) -> Recording:
        """The call's recording; carries lookback and leftover rows over to the next call.

        Example:
            >>> rec = BatchedRecorder(1, AutoresetMode.NEXT_STEP, 0, RunnerMetrics())
            >>> rec.begin(3, np.zeros((1, 2)))
            >>> act, obs, one, no = np.zeros(1), np.ones((1, 2)), np.ones(1), np.zeros(1, bool)
            >>> for ends in ([True], [False], [False], [False]):  # row 1 is the reset step
            ...     _ = rec.step(act, {}, obs, one, np.array(ends), no, {}, reset=None)
            >>> recording = rec.finish()
            >>> recording.chunk_lengths(), recording.window.tolist(), rec.metrics.episode_returns
            ([1, 2], [[0, 2, 3]], [1.0])
        """
        blocks, finals = self.blocks, self.finals
        assert blocks is not None and finals is not None
        self._number_endings()
        finals.freeze()
        if self.mode is AutoresetMode.NEXT_STEP and not self.doubted:
            self.doubt = doubt_next_step(blocks, self._begin_row, self.row)
            self.doubted = self.doubt is not None
        events = np.concatenate(self.events, axis=1) if self.events else np.zeros((3, 0), int)
        state = (self.start, self.episode_start, self.episode_number)
        apart = finals if self.mode is not AutoresetMode.NEXT_STEP else None
        if self.vector_steps:
            table, window, state = vector_chunk_table(
                blocks, self._begin_row, self.num_steps, self.lookback, state, events, apart
            )
        else:
            table, window, state = chunk_table(
                blocks, self.row, self.num_steps, self.lookback, state, events, apart
            )
        recording = Recording(
            blocks=blocks,
            lookback=self.lookback,
            num_steps=self.num_steps,
            table=table,
            window=window,
            infos=self.infos,
            finals=finals,
            final_infos=self.final_infos,
            uid=self.uid,
            # Only next-step windows can hold reset steps; the others are transitions only.
            vector_steps=self.vector_steps and self.mode is AutoresetMode.NEXT_STEP,
        )
        self._carry_over(blocks, finals, events, window[:, -1] + 1, state)
        return recording

    def _keep_rows(self, blocks: Blocks, keep: int, capacity: int) -> None:
        """Copies rows ``keep:row`` into the blocks the next call starts with."""
        self._next = blocks.successor(keep, self.row, capacity)

    def _append_in_place(self, blocks: Blocks, room: int) -> bool:
        """Whether the next call records into these blocks, after the rows of this one."""
        return blocks.step_rows - self.row >= room

    def _carry_over(
        self,
        blocks: Blocks,
        finals: Finals,
        events: np.ndarray,
        end: np.ndarray,
        state: tuple[np.ndarray, np.ndarray, np.ndarray],
    ) -> None:
        """Keeps the rows the next call needs: each env's lookback and leftover rows.

        The next call appends after this call's rows while the blocks have room for it: chunks
        copy a column before they write to it, so no chunk writes into a block, and the rows a
        call hands out are never written again. Only when the room runs out are the rows still
        needed copied into new blocks: room for one call, and, once more rows are carried than
        a call records, room for as many rows again as were carried. The leftover rows of
        next-step mode grow like the square root of the number of calls; copying them every
        call would make every call cost more than the one before, and this way a call copies
        at most about one call's rows on average, however many are carried, while shorter
        carries keep the blocks (and the memory a call allocates) one call long.
        """
        start, episode_start, episode_number = state
        age = start - episode_start
        keep = int(min(self.row, (start - np.minimum(self.lookback, age)).min()))
        carried = self.row - keep
        if self.mode is AutoresetMode.NEXT_STEP and not self.vector_steps:
            # Lookback rows are no backlog; EnvRunner.sample warns of it once the call is done.
            self.waiting = self.row - int(start.min())
        room = self.num_steps + self._slack(self.num_steps)
        if self._append_in_place(blocks, room):
            shift = 0
            # The same arrays under new columns: a leaf widened to a later dtype changes the
            # next call's blocks only, not the ones this call's recording (and its chunks) read.
            self._next = blocks.sharing()
        else:
            shift = keep
            # Room for the next call, plus as many rows again as are carried once they are
            # many: then a copy serves several calls (see the docstring).
            extra = carried if carried > room else 0
            self._keep_rows(blocks, keep, carried + room + extra)
        self.row -= shift
        self.start, self.episode_start = start - shift, episode_start - shift
        self.episode_number = episode_number

        def later(rows: np.ndarray, envs: np.ndarray) -> np.ndarray:
            return rows >= end[envs]

        self.infos = self.infos.moved(keep, None, -shift)
        self.final_infos = self.final_infos.ending_from(end, -shift)
        self.finals = finals.kept(later(finals.rows, finals.envs), -shift)
        late = later(events[0], events[1])
        moved = np.array([[shift], [0], [0]])
        self.events = [events[:, late] - moved] if late.any() else []
        self.blocks = None
