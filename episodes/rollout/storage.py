"""On-policy rollout storage in ``[T, N, ...]`` layout.

Every public field is a view of its own contiguous ``[T, N, F]`` buffer, so whole-column
writes (``compute_returns``, ``write_block``) never stride, and the flat mini-batch generator
gathers each buffer with one ``index_select`` (1-wide buffers through a 1-D view, which is
several times cheaper than gathering ``[T * N, 1]`` rows).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, NamedTuple, TypeAlias

import torch

from .gae import compute_gae
from .generators import (
    DistillationBatch,
    RLBatch,
    distillation_generator,
    mini_batch_generator,
    recurrent_mini_batch_generator,
)
from .transition import HiddenState
from .transition import Transition as _Transition

__all__ = ["RolloutStorage"]

TRAINING_TYPES = ("rl", "distillation")
Shape: TypeAlias = Sequence[int] | torch.Size
#: A leaf: a shape (``float`` dtype of the storage), ``(shape, dtype)`` or an example
#: ``[N, ...]`` tensor; or a (nested) mapping of those.
ObsSpec: TypeAlias = Shape | tuple[Shape, torch.dtype] | torch.Tensor | Mapping[str, Any]
#: A hidden state spec: an example ``[num_layers, N, hidden]`` tensor or a
#: ``(num_layers, hidden)`` shape, or a tuple of those (LSTM ``(h, c)``).
HiddenSpec: TypeAlias = torch.Tensor | Sequence[Any] | None


_Key = tuple[str, torch.dtype]


class _Leaf(NamedTuple):
    shape: tuple[int, ...]
    dtype: torch.dtype


class _Slot(NamedTuple):
    key: tuple[str, torch.dtype]
    offset: int
    numel: int
    shape: tuple[int, ...]


def _is_shape(x: Any) -> bool:
    return isinstance(x, (tuple, list, torch.Size)) and all(isinstance(i, int) for i in x)


def _parse_obs(spec: Any, num_envs: int, dtype: torch.dtype) -> Any:
    if isinstance(spec, torch.Tensor):
        if spec.dim() == 0 or spec.shape[0] != num_envs:
            raise ValueError(
                f"example tensors must be [num_envs={num_envs}, ...], got {tuple(spec.shape)}"
            )
        return _Leaf(tuple(spec.shape[1:]), spec.dtype)
    if isinstance(spec, Mapping):
        return {str(k): _parse_obs(v, num_envs, dtype) for k, v in spec.items()}
    if _is_shape(spec):
        return _Leaf(tuple(spec), dtype)
    if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[1], torch.dtype):
        return _Leaf(tuple(spec[0]), spec[1])
    raise TypeError(f"cannot interpret observation spec {spec!r}")


def _map_tree(tree: Any, fn: Callable[[Any], Any]) -> Any:
    if isinstance(tree, Mapping):
        return {k: _map_tree(v, fn) for k, v in tree.items()}
    return fn(tree)


def _zip_copy(dst: Any, src: Any, name: str) -> None:
    """Copy a tensor tree ``src`` into the matching views ``dst`` (same keys required)."""
    if isinstance(dst, Mapping):
        if not isinstance(src, Mapping) or set(src) != set(dst):
            got = sorted(src) if isinstance(src, Mapping) else type(src).__name__
            raise KeyError(f"{name}: expected keys {sorted(dst)}, got {got}")
        for k in dst:
            _zip_copy(dst[k], src[k], f"{name}[{k!r}]")
        return
    dst.copy_(src.reshape(dst.shape))


def _parse_hidden(spec: HiddenSpec, num_envs: int) -> list[_Leaf] | None:
    """Return one ``_Leaf((num_layers, hidden), dtype)`` per state component."""
    if spec is None:
        return None
    comps = [spec] if isinstance(spec, torch.Tensor) or _is_shape(spec) else list(spec)
    out = []
    for c in comps:
        if isinstance(c, torch.Tensor):
            if c.dim() != 3 or c.shape[1] != num_envs:
                raise ValueError(
                    f"hidden states must be [num_layers, {num_envs}, hidden], got {tuple(c.shape)}"
                )
            out.append(_Leaf((c.shape[0], c.shape[2]), c.dtype))
        elif _is_shape(c) and len(c) == 2:
            out.append(_Leaf(tuple(c), torch.float32))
        else:
            raise TypeError(f"cannot interpret hidden-state spec {c!r}")
    return out


class _Packer:
    """Packs ``[T, N, *shape]`` fields into one ``[T, N, F]`` buffer per (group, dtype)."""

    def __init__(self) -> None:
        self._widths: dict[tuple[str, torch.dtype], int] = {}
        self.buffers: dict[tuple[str, torch.dtype], torch.Tensor] = {}

    def add(self, group: str, leaf: _Leaf) -> _Slot:
        key = (group, leaf.dtype)
        numel = 1
        for s in leaf.shape:
            numel *= s
        offset = self._widths.get(key, 0)
        self._widths[key] = offset + numel
        return _Slot(key, offset, numel, leaf.shape)

    def allocate(self, num_steps: int, num_envs: int, device: torch.device) -> None:
        self.buffers = {
            key: torch.zeros(num_steps, num_envs, width, dtype=key[1], device=device)
            for key, width in self._widths.items()
        }

    def view(self, slot: _Slot) -> torch.Tensor:
        buf = self.buffers[slot.key]
        return buf[..., slot.offset : slot.offset + slot.numel].view(*buf.shape[:2], *slot.shape)

    def gather(self, group: str, index: torch.Tensor) -> dict[_Key, torch.Tensor]:
        """Gather flat ``[T * N]`` rows of every buffer whose group starts with ``group``."""
        # A 1-wide buffer gathers through a 1-D view: several times cheaper than [T * N, 1].
        return {
            key: (
                buf.view(-1).index_select(0, index).unsqueeze(-1)
                if buf.shape[-1] == 1
                else buf.view(-1, buf.shape[-1]).index_select(0, index)
            )
            for key, buf in self.buffers.items()
            if key[0].startswith(group)
        }

    @staticmethod
    def field(gathered: dict[_Key, torch.Tensor], slot: _Slot) -> torch.Tensor:
        rows = gathered[slot.key]
        return rows[:, slot.offset : slot.offset + slot.numel].view(rows.shape[0], *slot.shape)


class RolloutStorage:
    """Storage for one on-policy rollout of ``T`` steps of ``N`` envs.

    Args:
        training_type: ``"rl"`` (values, log-probs, distribution parameters, returns,
            advantages) or ``"distillation"`` (privileged actions).
        num_envs: ``N``.
        num_transitions_per_env: ``T``.
        observations: an observation shape, ``(shape, dtype)``, an example ``[N, ...]`` tensor,
            or a (nested) mapping of those.
        actions_shape: shape of one env's action.
        device: where every tensor lives.
        privileged_observations: optional spec (like ``observations``) of extra observations.
        distribution_params: shapes of the action-distribution parameters (RL); default
            ``(actions_shape, actions_shape)`` for a Gaussian's mean and std.
        actor_hidden_state: recurrent actor state spec: an example ``[num_layers, N, hidden]``
            tensor or ``(num_layers, hidden)`` shape, or a tuple of those for LSTM ``(h, c)``.
            If omitted, allocated on the first transition that carries one.
        critic_hidden_state: the same for the critic.
        dtype: dtype of rewards, values, log-probs, distribution parameters, returns,
            advantages and of observations given as bare shapes.
        actions_dtype: dtype of actions and privileged actions (default ``dtype``).
        normalize_advantage_per_mini_batch: default for the generators' per-mini-batch
            advantage normalisation.

    Example:
        >>> st = RolloutStorage("rl", num_envs=2, num_transitions_per_env=3,
        ...                     observations=(4,), actions_shape=(1,))
        >>> st.observations.shape, st.distribution_params[0].shape
        (torch.Size([3, 2, 4]), torch.Size([3, 2, 1]))
    """

    Transition: ClassVar[type[_Transition]] = _Transition

    def __init__(
        self,
        training_type: str,
        num_envs: int,
        num_transitions_per_env: int,
        observations: ObsSpec,
        actions_shape: Shape,
        device: str | torch.device = "cpu",
        *,
        privileged_observations: ObsSpec | None = None,
        distribution_params: Sequence[Shape] | None = None,
        actor_hidden_state: HiddenSpec = None,
        critic_hidden_state: HiddenSpec = None,
        dtype: torch.dtype = torch.float32,
        actions_dtype: torch.dtype | None = None,
        normalize_advantage_per_mini_batch: bool = False,
    ) -> None:
        if training_type not in TRAINING_TYPES:
            raise ValueError(
                f"training_type must be one of {TRAINING_TYPES}, got {training_type!r}"
            )
        if num_envs <= 0 or num_transitions_per_env <= 0:
            raise ValueError("num_envs and num_transitions_per_env must be positive")
        self.training_type = training_type
        self.num_envs = num_envs
        self.num_transitions_per_env = num_transitions_per_env
        self.device = torch.device(device)
        self.actions_shape = tuple(actions_shape)
        self.normalize_advantage_per_mini_batch = normalize_advantage_per_mini_batch
        self.step = 0
        n, t = num_envs, num_transitions_per_env
        act_dtype = actions_dtype or dtype
        scalar = _Leaf((1,), dtype)
        p = self._packer = _Packer()
        rl = training_type == "rl"
        # Groups starting with "batch" are gathered by the flat generator; every field has its
        # own contiguous buffer.
        prefix = "batch" if rl else "aux"  # distillation never gathers flat mini-batches
        counter = iter(range(1 << 30))

        def own(leaf: _Leaf) -> _Slot:
            return p.add(f"{prefix}:{next(counter)}", leaf)

        obs_slots = _map_tree(_parse_obs(observations, n, dtype), own)
        priv_slots = None
        if privileged_observations is not None:
            priv_slots = _map_tree(_parse_obs(privileged_observations, n, dtype), own)
        slots: dict[str, _Slot] = {
            "actions": own(_Leaf(self.actions_shape, act_dtype)),
            "rewards": p.add("aux:rewards", scalar),
            "dones": p.add("aux:dones", _Leaf((1,), torch.bool)),
        }
        dist_slots: list[_Slot] = []
        if rl:
            # Each scalar gets its own contiguous buffer: compute_returns writes whole columns
            # (strided writes cost several contiguous passes), and a 1-wide buffer is gathered
            # through a 1-D view, which is cheaper than one gather of a packed [T, N, 4] buffer.
            for name in ("values", "actions_log_prob", "returns", "advantages"):
                slots[name] = own(scalar)
            shapes = distribution_params
            if shapes is None:
                shapes = (self.actions_shape, self.actions_shape)
            dist_slots = [own(_Leaf(tuple(s), dtype)) for s in shapes]
        else:
            slots["privileged_actions"] = own(_Leaf(self.actions_shape, act_dtype))
        p.allocate(t, n, self.device)

        self._obs_slots, self._priv_slots, self._dist_slots = obs_slots, priv_slots, dist_slots
        self._slots = slots
        self.observations: Any = _map_tree(obs_slots, p.view)
        self.privileged_observations: Any = (
            None if priv_slots is None else _map_tree(priv_slots, p.view)
        )
        self.actions = p.view(slots["actions"])
        self.rewards = p.view(slots["rewards"])
        self.dones = p.view(slots["dones"])
        self.values: torch.Tensor | None = None
        self.actions_log_prob: torch.Tensor | None = None
        self.returns: torch.Tensor | None = None
        self.advantages: torch.Tensor | None = None
        self.distribution_params: tuple[torch.Tensor, ...] | None = None
        self.privileged_actions: torch.Tensor | None = None
        if rl:
            self.values = p.view(slots["values"])
            self.actions_log_prob = p.view(slots["actions_log_prob"])
            self.returns = p.view(slots["returns"])
            self.advantages = p.view(slots["advantages"])
            self.distribution_params = tuple(p.view(s) for s in dist_slots)
        else:
            self.privileged_actions = p.view(slots["privileged_actions"])
        #: Per state component ``[T, num_layers, N, hidden]`` tensors (GRU: 1, LSTM: 2).
        self.saved_hidden_states_actor = self._alloc_hidden(actor_hidden_state)
        self.saved_hidden_states_critic = self._alloc_hidden(critic_hidden_state)

    # ------------------------------------------------------------------ writing
    def _alloc_hidden(self, spec: HiddenSpec) -> list[torch.Tensor] | None:
        leaves = _parse_hidden(spec, self.num_envs)
        if leaves is None:
            return None
        t, n = self.num_transitions_per_env, self.num_envs
        return [
            torch.zeros(t, leaf.shape[0], n, leaf.shape[1], dtype=leaf.dtype, device=self.device)
            for leaf in leaves
        ]

    def _write_hidden(self, which: str, state: HiddenState, rows: slice | int) -> None:
        if state is None:
            return
        attr = f"saved_hidden_states_{which}"
        comps = state if isinstance(state, (tuple, list)) else (state,)
        if getattr(self, attr) is None:  # lazy allocation from the first state seen
            example = comps[0] if isinstance(rows, int) else comps[0][0]
            setattr(self, attr, self._alloc_hidden(tuple(example for _ in comps)))
        saved: list[torch.Tensor] = getattr(self, attr)
        if len(comps) != len(saved):
            raise ValueError(
                f"{which} hidden state has {len(comps)} components, expected {len(saved)}"
            )
        for dst, src in zip(saved, comps, strict=True):
            dst[rows].copy_(src)

    def _write(self, rows: slice | int, fields: dict[str, Any]) -> None:
        for name, value in fields.items():
            if value is None:
                continue
            if name == "observations":
                _zip_copy(_map_tree(self.observations, lambda v: v[rows]), value, name)
            elif name == "privileged_observations":
                if self.privileged_observations is None:
                    raise ValueError("this storage was built without privileged_observations")
                dst = _map_tree(self.privileged_observations, lambda v: v[rows])
                _zip_copy(dst, value, name)
            elif name == "distribution_params":
                if self.distribution_params is None:
                    raise ValueError("distribution_params are only stored for training_type 'rl'")
                if len(value) != len(self.distribution_params):
                    raise ValueError(
                        f"expected {len(self.distribution_params)} distribution params, "
                        f"got {len(value)}"
                    )
                for dst_p, src_p in zip(self.distribution_params, value, strict=True):
                    dst_p[rows].copy_(src_p.reshape(dst_p[rows].shape))
            elif name == "hidden_states":
                self._write_hidden("actor", value[0], rows)
                self._write_hidden("critic", value[1], rows)
            else:
                dst_t = getattr(self, name)
                if dst_t is None:
                    raise ValueError(
                        f"{name} is not stored for training_type {self.training_type!r}"
                    )
                dst_t[rows].copy_(value.reshape(dst_t[rows].shape))

    def _fields_of(self, t: _Transition) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "observations": t.observations,
            "actions": t.actions,
            "rewards": t.rewards,
            "dones": t.dones,
            "hidden_states": t.hidden_states,
        }
        if self.privileged_observations is not None:
            fields["privileged_observations"] = t.privileged_observations
        if self.training_type == "rl":
            fields.update(
                values=t.values,
                actions_log_prob=t.actions_log_prob,
                distribution_params=t.distribution_params,
            )
        else:
            fields["privileged_actions"] = t.privileged_actions
        return fields

    def add_transition(self, transition: _Transition) -> None:
        """Copy one step into slot ``step`` and advance it.

        Fields of ``transition`` that are ``None`` are skipped; fields the training type does not
        store (e.g. ``values`` for distillation) are ignored; ``time_outs`` is not stored.

        Raises:
            OverflowError: if all ``T`` slots are already written (call :meth:`clear`).
        """
        if self.step >= self.num_transitions_per_env:
            raise OverflowError(
                f"rollout storage is full ({self.num_transitions_per_env} steps); "
                "call clear() first"
            )
        self._write(self.step, self._fields_of(transition))
        self.step += 1

    def write_block(self, start: int, **fields: Any) -> int:
        """Write whole ``[k, N, ...]`` blocks at time steps ``start:start + k`` in one copy each.

        Accepts the :class:`Transition` field names (``observations``, ``actions``, ``rewards``,
        ``dones``, ``values``, ``actions_log_prob``, ``distribution_params``,
        ``privileged_actions``, ``privileged_observations``, ``hidden_states=(actor, critic)``
        with ``[k, num_layers, N, hidden]`` components). The copies are exact, so the result is
        bit-identical to ``k`` calls of :meth:`add_transition`. ``step`` becomes
        ``max(step, start + k)``.

        Returns:
            ``k``, the number of steps written.

        Raises:
            OverflowError: if ``start + k > T``.
            ValueError: on a negative ``start``, unknown field names or mismatched ``k``.

        Example:
            >>> st = RolloutStorage("rl", 2, 4, (3,), (1,))
            >>> st.write_block(0, rewards=torch.ones(4, 2), dones=torch.zeros(4, 2))
            4
        """
        allowed = set(self._fields_of(_Transition()))
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"unknown fields {sorted(unknown)}; accepted: {sorted(allowed)}")
        lengths = set()
        for value in fields.values():
            if value is None:
                continue
            leaf = value
            while isinstance(leaf, (Mapping, tuple, list)):
                leaf = next(iter(leaf.values())) if isinstance(leaf, Mapping) else leaf[0]
            if leaf is not None:
                lengths.add(int(leaf.shape[0]))
        if len(lengths) != 1:
            raise ValueError(f"all blocks must have the same leading length, got {sorted(lengths)}")
        k = lengths.pop()
        if start < 0:
            raise ValueError(f"start must be >= 0, got {start}")
        if start + k > self.num_transitions_per_env:
            raise OverflowError(
                f"block [{start}, {start + k}) exceeds the {self.num_transitions_per_env} steps"
            )
        self._write(slice(start, start + k), fields)
        self.step = max(self.step, start + k)
        return k

    def clear(self) -> None:
        """Reset the write cursor; the next rollout overwrites the old data."""
        self.step = 0

    # ------------------------------------------------------------------ returns
    def compute_returns(
        self,
        last_values: torch.Tensor,
        gamma: float,
        lam: float,
        normalize_advantage: bool = True,
    ) -> None:
        """Fill ``advantages`` (GAE over all ``T`` steps) and ``returns = advantages + values``.

        Args:
            last_values: ``[N]`` or ``[N, 1]`` values of the states after the last step.
            gamma: discount factor.
            lam: GAE lambda.
            normalize_advantage: normalise advantages over the whole batch (zero mean, unit
                std, ``+1e-8``). Pass ``False`` when normalising per mini-batch instead.
        """
        if self.values is None or self.returns is None or self.advantages is None:
            raise ValueError("compute_returns is only available for training_type 'rl'")
        values = self.values
        adv = compute_gae(self.rewards, values, self.dones, last_values, gamma, lam)
        torch.add(adv, values, out=self.returns)
        if normalize_advantage:
            # Two-pass unbiased std (as torch.std), with the sum of squares as one BLAS dot.
            centered = adv.sub_(adv.mean()).view(-1)
            std = torch.dot(centered, centered).div_(max(centered.numel() - 1, 0)).sqrt_()
            torch.div(adv, std.add_(1e-8), out=self.advantages)
        else:
            self.advantages.copy_(adv)

    # ------------------------------------------------------------------ reading
    def mini_batch_generator(
        self,
        num_mini_batches: int,
        num_epochs: int = 8,
        *,
        generator: torch.Generator | None = None,
        normalize_advantage_per_mini_batch: bool | None = None,
    ) -> Iterator[RLBatch]:
        """Shuffled flat mini-batches; see :func:`.generators.mini_batch_generator`."""
        return mini_batch_generator(
            self,
            num_mini_batches,
            num_epochs,
            generator=generator,
            normalize_advantage_per_mini_batch=normalize_advantage_per_mini_batch,
        )

    def recurrent_mini_batch_generator(
        self,
        num_mini_batches: int,
        num_epochs: int = 8,
        *,
        normalize_advantage_per_mini_batch: bool | None = None,
    ) -> Iterator[RLBatch]:
        """Padded trajectories; see :func:`.generators.recurrent_mini_batch_generator`."""
        return recurrent_mini_batch_generator(
            self,
            num_mini_batches,
            num_epochs,
            normalize_advantage_per_mini_batch=normalize_advantage_per_mini_batch,
        )

    def generator(self) -> Iterator[DistillationBatch]:
        """One batch per time step; see :func:`.generators.distillation_generator`."""
        return distillation_generator(self)
