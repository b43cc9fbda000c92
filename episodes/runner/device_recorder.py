"""Batched recording for vector envs that yield torch tensors, without a host sync per step.

A vector step only queues writes on the env's device (one slice assignment per field into
:class:`~episodes.runner.device_blocks.DeviceBlocks`). Everything that needs to know which
sub-env did what (episode ends, returns, ids, infos, final observations) is worked out once
per ``sample()`` call, after the last step: the flags and rewards come to the host in one copy
and the bookkeeping of :class:`~episodes.runner.recorder.BatchedRecorder` runs over the rows,
so the chunks are exactly those the numpy path records for the same env.

What a step may not do without the host is decide when the call is over in next-step mode
(reset steps record nothing, so some sub-envs need extra steps): the recorder counts without
looking until enough steps were taken for every sub-env to be done in the best case, then
reads the fewest transitions any sub-env holds and looks again only once that many more steps
could have filled the call (2-4 looks a call at T = 24..384). Same-step envs never make it
look.

Supported autoreset modes: next-step and same-step (``infos["final_obs"]`` a batched tensor).
In disabled mode the runner would have to ask, every step, which sub-envs to reset: not
supported on this path (ValueError).

Infos are kept as the env returned them (the dicts and their tensors are not copied) and read
at the end of the call: an env that writes its info tensors in place must hand out new ones.
There each row's infos come to the host and are stored batched, as the host path stores them
(:class:`~episodes.runner.row_infos.RowInfos`): split per sub-env only when a chunk's are read.

Example:
    >>> import torch
    >>> from gymnasium.vector import AutoresetMode
    >>> from episodes.runner.metrics import RunnerMetrics
    >>> rec = DeviceRecorder(2, AutoresetMode.SAME_STEP, 0, RunnerMetrics())
    >>> rec.begin(3, torch.zeros(2, 4))
    >>> while not rec.full():
    ...     ends = torch.tensor([False, True])  # sub-env 1 terminates every step
    ...     infos = {"final_obs": torch.ones(2, 4)}
    ...     _ = rec.step(torch.zeros(2), {}, torch.zeros(2, 4), torch.ones(2), ends, ends & False,
    ...                  infos, reset=None)
    >>> recording = rec.finish()
    >>> recording.chunk_lengths(), recording.finals.leaves[0].shape
    ([3, 1, 1, 1], (3, 4))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from episodes.buffer.plain_arrays import check_unmasked
from episodes.runner.blocks import Blocks
from episodes.runner.device_blocks import DeviceBlocks, _normal_tensors
from episodes.runner.device_values import as_device_batch, as_host_typed, check_env_flags
from episodes.runner.finals import Finals
from episodes.runner.host_copies import to_host, to_host_all
from episodes.runner.metrics import RunnerMetrics
from episodes.runner.nesting import _mapping_refused
from episodes.runner.policy import check_env_holds_data, check_outputs_hold_data
from episodes.runner.recorder import BatchedRecorder, Reset
from episodes.runner.rewards import refused_rewards
from episodes.runner.row_infos import owned_copy
from episodes.runner.table import Recording
from episodes.runner.timing import now
from episodes.structs import flatten, map_batch

__all__ = ["DeviceRecorder"]

_FINAL_OBS = ("final_obs", "_final_obs")


class DeviceRecorder(BatchedRecorder):
    """A :class:`~episodes.runner.recorder.BatchedRecorder` whose blocks live on a torch device.

    Args:
        num_envs: Sub-envs of the vector env.
        mode: Its autoreset mode (next-step or same-step).
        lookback: ``len_lookback_buffer`` of the chunks.
        metrics: Where finished episodes are counted.
        vector_steps: A call is ``num_steps`` vector steps rather than ``num_steps``
            transitions per env, as for :class:`~episodes.runner.recorder.BatchedRecorder`.

    Raises:
        ValueError: ``mode`` is disabled.

    Example:
        >>> DeviceRecorder(2, AutoresetMode.DISABLED, 0, RunnerMetrics())  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: vector envs yielding torch tensors are recorded in next-step or same-step ...
    """

    BEGUN = (
        *BatchedRecorder.BEGUN,
        "device_blocks", "_next_device", "_awaiting_device", "_synced_row", "_have_device",
    )  # fmt: skip

    def __init__(
        self,
        num_envs: int,
        mode: AutoresetMode,
        lookback: int,
        metrics: RunnerMetrics,
        *,
        vector_steps: bool = False,
    ):
        if mode is AutoresetMode.DISABLED:
            raise ValueError(
                "vector envs yielding torch tensors are recorded in next-step or same-step "
                "autoreset mode; disabled mode would need the host every step to pick the "
                "sub-envs to reset"
            )
        super().__init__(num_envs, mode, lookback, metrics, vector_steps=vector_steps)
        self.device_blocks: DeviceBlocks | None = None
        self._next_device: DeviceBlocks | None = None
        self._carried_dead = np.zeros((0, num_envs), bool)
        self._awaiting_device: torch.Tensor | None = None
        self._pending: dict[int, dict[str, Any]] = {}
        self._final_rows: set[int] = set()
        self._final_rows_envs: list[tuple[int, np.ndarray]] = []
        self._begin_row = 0
        self._synced_row = 0
        self._have_device: torch.Tensor | None = None

    # ------------------------------------------------------------------------------ a call
    @torch.no_grad()  # the blocks are data: no graph of an env or policy
    def begin(self, num_steps: int, obs: Any, reset_infos: dict[str, Any] | None = None) -> None:
        """Allocates (or takes over) the call's device blocks.

        Example:
            >>> rec = DeviceRecorder(2, AutoresetMode.SAME_STEP, 0, RunnerMetrics())
            >>> rec.begin(4, torch.zeros(2, 3))
            >>> rec.device_blocks.step_rows, tuple(rec.device_blocks.finals.leaves[0].shape)
            (4, (4, 2, 3))
        """
        carried = self.row
        rows = carried + num_steps + self._slack(num_steps)
        if self._next_device is None:
            # The first reset's, once: meta ones would put the blocks on no real device.
            check_env_holds_data(obs, obs_name="the env's reset observations")
            blocks = DeviceBlocks.allocate(
                obs, rows, with_finals=self.mode is AutoresetMode.SAME_STEP
            )
            blocks.obs.put(0, obs)
            blocks.times[0] = now()
            self._store_infos(to_host(reset_infos or {}, "the env's reset infos"), None, 0)
        elif self._next_device.step_rows >= rows:
            blocks = self._next_device.sharing()  # as ``BatchedRecorder.begin`` says
        else:
            blocks = self._next_device.resized(rows)
        self.device_blocks, self._next_device = blocks, None
        if self.finals is None:
            self.finals = Finals(blocks.obs.structure)
        if self._awaiting_device is None:  # later ones are made per step, never written into
            with _normal_tensors():
                self._awaiting_device = torch.zeros(
                    self.num_envs, dtype=torch.bool, device=blocks.device
                )
        self.num_steps = num_steps
        self.recorded = 0
        held = np.arange(carried)[:, None]
        self._have = ((held >= self.start) & ~self._carried_dead[:carried]).sum(axis=0)
        self._least = int(self._have.min()) if self.num_envs else num_steps
        self._begin_row = self._synced_row = carried
        self._have_device = None

    def full(self) -> bool:
        """True once every sub-env recorded ``num_steps`` transitions for this call.

        Without a look at the device while even the best case falls short; in next-step mode
        (reset steps record nothing) a look reads the fewest transitions any sub-env holds, and
        the next comes only once the steps since could have made up the difference.

        Example:
            >>> rec = DeviceRecorder(1, AutoresetMode.NEXT_STEP, 0, RunnerMetrics())
            >>> rec.begin(2, torch.zeros(1, 2))
            >>> act, obs, one = torch.zeros(1), torch.ones(1, 2), torch.ones(1)
            >>> done, no = torch.tensor([True]), torch.tensor([False])
            >>> _ = rec.step(act, {}, obs, one, done, no, {}, reset=None)
            >>> _ = rec.step(act, {}, obs, one, no, no, {}, reset=None)
            >>> rec.full()  # the second step was the reset step: it recorded nothing
            False
        """
        if self.vector_steps:
            return self.row - self._begin_row >= self.num_steps
        if self._least + (self.row - self._synced_row) < self.num_steps:
            return False
        if self.mode is AutoresetMode.SAME_STEP:
            return True
        blocks = self.device_blocks
        assert blocks is not None
        live: torch.Tensor = ~blocks.dead[self._synced_row : self.row]
        if self._have_device is None:
            self._have_device = torch.as_tensor(self._have, device=blocks.device)
        self._have_device = self._have_device + live.sum(dim=0)
        self._synced_row = self.row
        self._least = int(self._have_device.min())
        return self._least >= self.num_steps

    @torch.no_grad()  # the blocks are data: no graph of an env or policy
    def step(
        self,
        actions: Any,
        extras: dict[str, Any],
        obs: Any,
        rewards: Any,
        terminateds: Any,
        truncateds: Any,
        infos: dict[str, Any],
        *,
        reset: Reset | None,
    ) -> tuple[Any, Any]:
        """Queues one vector step's writes on the device; returns ``(obs, started mask)``.

        :meth:`put_outputs` then :meth:`env_step` (the runner calls them on either side of
        ``env.step``). The started mask is a bool tensor on the device (all False when no
        sub-env started an episode): which sub-envs' recurrent state to reset.

        Example:
            >>> rec = DeviceRecorder(2, AutoresetMode.NEXT_STEP, 0, RunnerMetrics())
            >>> rec.begin(2, torch.zeros(2, 3))
            >>> act, obs, one = torch.zeros(2), torch.ones(2, 3), torch.ones(2)
            >>> no, ends = torch.tensor([False, False]), torch.tensor([False, True])
            >>> rec.step(act, {}, obs, one, ends, no, {}, reset=None)[1].tolist()
            [False, False]
            >>> rec.step(act, {}, obs, one, no, no, {}, reset=None)[1].tolist()  # env 1 resets
            [False, True]
        """
        self.put_outputs(actions, extras)
        return self.env_step(obs, rewards, terminateds, truncateds, infos, reset=reset)

    @torch.no_grad()
    def put_outputs(self, actions: Any, extras: dict[str, Any]) -> Any:
        """Queues the policy's outputs for the next vector step, before the env steps.

        As ``BatchedRecorder.put_outputs``: outputs that are views of the observations an env
        overwrites in place, or actions it clips in place, are copied first.

        Example:
            >>> rec = DeviceRecorder(2, AutoresetMode.SAME_STEP, 0, RunnerMetrics())
            >>> rec.begin(2, torch.zeros(2, 3))
            >>> obs = torch.ones(2, 3)
            >>> rec.put_outputs(torch.zeros(2), {"first": obs[:, 0]})  # handed to the env as is
            tensor([0., 0.])
            >>> _ = obs.fill_(7.0)  # the env reuses its buffer
            >>> no = torch.tensor([False, False])
            >>> _ = rec.env_step(obs, torch.ones(2), no, no, {}, reset=None)
            >>> rec.device_blocks.extras["first"].leaves[0][0].tolist()
            [1.0, 1.0]
        """
        blocks = self.device_blocks
        assert blocks is not None, "begin() first"
        if self.row >= blocks.step_rows:
            blocks = self.device_blocks = blocks.resized(2 * blocks.step_rows)
        device = blocks.device
        try:
            device_actions = as_device_batch(actions, device, "the policy's actions")
            device_extras = {
                key: as_device_batch(value, device, f"the policy's extra output {key!r}")
                for key, value in extras.items()
            }
        except NotImplementedError:
            # A meta tensor (no data), in torch's words that name no field: the policy's
            # outputs are written before env.step, so this names the output before it steps.
            check_outputs_hold_data(actions, extras)
            raise
        blocks.put_outputs(self.row, device_actions, device_extras)
        return actions  # a torch env takes them as the policy gave them

    @torch.no_grad()
    def env_step(
        self,
        obs: Any,
        rewards: Any,
        terminateds: Any,
        truncateds: Any,
        infos: dict[str, Any],
        *,
        reset: Reset | None,
    ) -> tuple[Any, Any]:
        """Queues what ``env.step`` returned after :meth:`put_outputs`; as :meth:`step`.

        Example:
            >>> rec = DeviceRecorder(1, AutoresetMode.SAME_STEP, 0, RunnerMetrics())
            >>> rec.begin(1, torch.zeros(1, 2))
            >>> _ = rec.put_outputs(torch.zeros(1), {})
            >>> no = torch.tensor([False])
            >>> rec.env_step(torch.ones(1, 2), torch.ones(1), no, no, {}, reset=None)[1].tolist()
            [False]
        """
        del reset  # disabled mode is refused at construction
        blocks = self.device_blocks
        assert blocks is not None, "begin() first"
        device = blocks.device
        r = self.row
        for value, name in (
            (rewards, "rewards"),
            (terminateds, "terminated"),
            (truncateds, "truncated"),
        ):
            if value.__class__ is not torch.Tensor:  # a masked array's mask would be dropped
                check_unmasked(value, f"the env's {name}")
        try:  # free while they convert; else a ValueError naming the field, not torch's
            # Not a tensor (a list of Python floats): typed as numpy types it, float64; a
            # read-only array copied (torch would warn).
            device_rewards = torch.as_tensor(as_host_typed(rewards), device=device)
            ends, cuts = as_host_typed(terminateds), as_host_typed(truncateds)
            terminateds = torch.as_tensor(ends, dtype=torch.bool, device=device)
            truncateds = torch.as_tensor(cuts, dtype=torch.bool, device=device)
        except (TypeError, ValueError, RuntimeError, NotImplementedError):
            check_env_holds_data(None, rewards, terminateds, truncateds)  # a meta tensor
            check_env_flags(rewards, terminateds, truncateds, device)
            raise
        if device_rewards.dtype.is_complex:  # the float64 row would drop the imaginary part
            raise refused_rewards(device_rewards.dtype)
        flags = (device_rewards, terminateds, truncateds)
        try:
            blocks.put_env_step(r, obs, *flags)
        except TypeError:  # torch's row write takes no numpy observations: moved, then again
            if not any(isinstance(leaf, np.ndarray) for leaf in flatten(obs)[0]):
                raise
            device_obs = as_device_batch(obs, device, "the env's observations")
            blocks.put_env_step(r, device_obs, *flags)
        except NotImplementedError:  # a meta tensor, in torch's words that name no field
            check_env_holds_data(obs)
            raise
        blocks.times[r + 1] = now()  # a host clock: no wait for the device
        done = terminateds | truncateds
        if self.mode is AutoresetMode.NEXT_STEP:
            waiting = self._awaiting_device
            assert waiting is not None
            blocks.dead[r] = waiting
            self._awaiting_device = done & ~waiting
            started = waiting
        else:
            final_obs = infos.get("final_obs")
            if final_obs is not None:
                assert blocks.finals is not None
                finals = blocks.finals
                name = "the env's infos['final_obs']"
                if not isinstance(final_obs, torch.Tensor):  # the usual batch: no walk
                    final_obs = _device_final_obs(final_obs, device, name)
                try:
                    finals.put_leaves(r, finals.leaves_of(final_obs, name), name)
                except NotImplementedError:  # a meta tensor, in torch's words
                    check_env_holds_data(final_obs, obs_name=name)
                    raise
                self._final_rows.add(r)
            blocks.match_finals()  # either may have widened: a final joins its observations
            started = done
        rest = {key: value for key, value in infos.items() if key not in _FINAL_OBS}
        if rest:
            # Copied now (tensors cloned on the device, no wait): a simulator writes its info
            # buffers in place every step, and the host reads them once the call is done.
            self._pending[r] = owned_copy(rest)
        self.row = r + 1
        return obs, started

    # --------------------------------------------------------------------------- the end
    @torch.no_grad()  # the blocks are data: no graph of an env or policy
    def finish(self) -> Recording:
        """Brings flags and rewards to the host once, does the call's bookkeeping, records.

        Example:
            >>> rec = DeviceRecorder(1, AutoresetMode.NEXT_STEP, 0, RunnerMetrics())
            >>> rec.begin(2, torch.zeros(1, 2))
            >>> act, obs, one = torch.zeros(1), torch.ones(1, 2), torch.ones(1)
            >>> no = torch.tensor([False])
            >>> for ends in ([True], [False], [False]):  # row 1 is the reset step
            ...     _ = rec.step(act, {}, obs, one, torch.tensor(ends), no, {}, reset=None)
            >>> recording = rec.finish()
            >>> recording.chunk_lengths(), recording.window.tolist(), recording.device.device.type
            ([1, 1], [[0, 2]], 'cpu')
        """
        device = self.device_blocks
        assert device is not None
        host = device.host()
        self.blocks = host
        rows = range(self._begin_row, self.row)
        pending = [self._pending.pop(r, {}) for r in rows]
        hosted = to_host_all(pending, "the env's infos")  # a copy per dtype
        for r, infos in zip(rows, hosted):
            self._account(
                r, None, host.rewards[r], host.terminated[r], host.truncated[r], infos, None
            )
        self._collect_finals(device)
        recording = super().finish()
        self.device_blocks = None
        self._final_rows = set()
        return dataclasses.replace(recording, device=device)

    def _final_leaves(self, infos: dict[str, Any], ended: np.ndarray) -> list[np.ndarray]:
        return []  # read from the device's finals block, all endings at once

    def _add_finals(self, row: int, ended: np.ndarray, leaves: list[np.ndarray]) -> None:
        if row not in self._final_rows:
            raise ValueError(
                f"sub-envs {ended.tolist()} finished in a same-step vector step whose infos "
                "hold no 'final_obs': a same-step env yielding tensors must report the final "
                "observations as a batched tensor infos['final_obs']"
            )
        self._final_rows_envs.append((row, ended))

    def _collect_finals(self, device: DeviceBlocks) -> None:
        """Copies the final observations of the call's endings to the host in one gather."""
        if not self._final_rows_envs:
            return
        assert device.finals is not None and self.finals is not None
        rows = np.concatenate([np.full(len(e), r, np.int64) for r, e in self._final_rows_envs])
        envs = np.concatenate([e for _, e in self._final_rows_envs]).astype(np.int64)
        self._final_rows_envs = []
        where_rows = torch.as_tensor(rows, device=device.device)
        where_envs = torch.as_tensor(envs, device=device.device)
        leaves = [leaf[where_rows, where_envs].cpu().numpy() for leaf in device.finals.leaves]
        self.finals.add(rows, envs, leaves)

    def _append_in_place(self, blocks: Blocks, room: int) -> bool:
        return False  # device blocks are copied on the device, where that is cheap

    def _keep_rows(self, blocks: Blocks, keep: int, capacity: int) -> None:
        device = self.device_blocks
        assert device is not None
        self._next_device = device.successor(keep, self.row, capacity)
        self._carried_dead = np.array(blocks.dead[keep : self.row])


def _device_final_obs(final_obs: Any, device: torch.device, name: str) -> Any:
    """Same-step final observations as tensors on ``device``: numpy leaves are moved there.

    Any other leaf (a list of per-env tensors, gymnasium's object array of per-env items) is
    refused: a write would convert it element by element, or fail in torch's words.

    Example:
        >>> _device_final_obs({"a": np.zeros(2)}, torch.device("cpu"), "fo")["a"].dtype
        torch.float64
        >>> _device_final_obs([torch.zeros(3)], torch.device("cpu"), "fo")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: fo: got a list, expected a batched tensor [N, ...] ...
    """

    def leaf(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return value
        if isinstance(value, np.ndarray) and value.dtype != object:
            return as_device_batch(value, device, name)
        if isinstance(value, Mapping) or hasattr(value, "batch_size") and hasattr(value, "keys"):
            raise _mapping_refused(name, value)  # a TensorDict: its to_dict() is the batch
        what = f"a {type(value).__name__}"
        if isinstance(value, np.ndarray):
            what = f"an array of {value.dtype}"
        raise ValueError(
            f"{name}: got {what}, expected a batched tensor [N, ...] (one row per sub-env) "
            "for each leaf of the observations: a same-step env yielding tensors reports its "
            "final observations so"
        )

    return map_batch(leaf, final_obs)
