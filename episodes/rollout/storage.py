"""On-policy rollout storage in ``[T, N, ...]`` layout.

The storage is a plain mapping of named tensors (:attr:`RolloutStorage.tensors`): one
contiguous ``[T, N, ...]`` tensor per stored leaf, named by its path (``"actions"``,
``"observations/policy"``, ``"distribution_params/0"``). The public attributes
(``observations``, ``actions``, ``values``, ...) are those very tensors, so whole-column writes
(``compute_returns``, ``write_block``) never stride, and the flat mini-batch generator gathers
each tensor with one ``index_select`` (:meth:`RolloutStorage.gather`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from functools import partial
from types import MappingProxyType
from typing import Any, ClassVar, SupportsIndex

import torch

from episodes.indexing import as_flag

from .aliasing import unalias
from .devices import checked_device
from .fast_rows import bind_fields, step_fields, write_row
from .fields import FIELDS, REFILLS, _pickled_state, _restore_state, adopted, storage_repr
from .gae import compute_gae
from .generators import (
    DistillationBatch,
    RLBatch,
    _check_filled,
    distillation_generator,
    mini_batch_generator,
    normalize_into,
    recurrent_mini_batch_generator,
)
from .held import clear_unheld_values
from .leaves import block_rows, checked_rows, copy_rows, hidden_writes, paired, put_leaf
from .select import select_rows
from .specs import (
    HiddenSpec,
    Leaf,
    ObsSpec,
    Shape,
    _field_specs,
    allocation_of,
    check_dtypes,
    check_sizes,
    distribution_remedy,
    hidden_pair,
    hidden_tensors,
    name_leaves,
    normal_tensors,
    shape_of,
)
from .transition import Transition as _Transition

__all__ = ["RolloutStorage"]


class RolloutStorage:
    """Storage for one on-policy rollout of ``T`` steps of ``N`` envs.

    Every stored leaf is one contiguous ``[T, N, ...]`` tensor in :attr:`tensors`; the public
    fields are the same tensors (nested dicts of them for dict observations), and
    :attr:`field_names` says which names make up each field. Recurrent states are kept apart,
    as ``[T, num_layers, N, hidden]`` tensors in ``saved_hidden_states_actor`` / ``_critic``.

    Args:
        training_type: ``"rl"`` (values, log-probs, distribution parameters, returns,
            advantages) or ``"distillation"`` (privileged actions).
        num_envs: ``N``.
        num_transitions_per_env: ``T``.
        observations: an observation shape, ``(shape, dtype)``, an example ``[N, ...]`` tensor,
            or a (nested) mapping of those.
        actions_shape: shape of one env's action.
        device: where every tensor lives (a ``torch.device``, name or index; None: the CPU).
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

    Raises:
        ValueError: an unknown ``training_type``, non-positive sizes, a non-float ``dtype``,
            an example tensor of the wrong size, or two observation leaves whose names collide.
        TypeError: a spec that is neither a shape, ``(shape, dtype)``, tensor nor mapping
            with str keys, ``distribution_params`` that are no shapes, or no ``device``.
        DeviceError: a ``device`` torch does not know, not available here (``"cuda"`` without
            one) or ``"meta"`` (:func:`~episodes.rollout.devices.checked_device`).

    Example:
        >>> st = RolloutStorage("rl", num_envs=2, num_transitions_per_env=3,
        ...                     observations=(4,), actions_shape=(1,))
        >>> st.observations.shape, st.distribution_params[0].shape
        (torch.Size([3, 2, 4]), torch.Size([3, 2, 1]))
        >>> st.tensors["actions"] is st.actions, st.field_names["distribution_params"]
        (True, ('distribution_params/0', 'distribution_params/1'))
    """

    Transition: ClassVar[type[_Transition]] = _Transition
    # The public fields: the tensors of :attr:`tensors` (``episodes.rollout.fields``); an
    # assigned tensor becomes the field's tensor there.
    observations: Any
    privileged_observations: Any
    actions: torch.Tensor
    rewards: torch.Tensor
    dones: torch.Tensor
    values: torch.Tensor | None
    actions_log_prob: torch.Tensor | None
    returns: torch.Tensor | None
    advantages: torch.Tensor | None
    privileged_actions: torch.Tensor | None
    distribution_params: tuple[torch.Tensor, ...] | None
    # Refills so far (``fields.REFILLS``): a generator made before one refuses its next batch.
    _refills = 0
    _default_params = False  # made without distribution_params (a storage pickled before)

    def __init__(
        self,
        training_type: str,
        num_envs: int,
        num_transitions_per_env: int,
        observations: ObsSpec,
        actions_shape: Shape,
        device: str | int | torch.device | None = "cpu",
        *,
        privileged_observations: ObsSpec | None = None,
        distribution_params: Sequence[Shape] | None = None,
        actor_hidden_state: HiddenSpec = None,
        critic_hidden_state: HiddenSpec = None,
        dtype: torch.dtype = torch.float32,
        actions_dtype: torch.dtype | None = None,
        normalize_advantage_per_mini_batch: bool = False,
    ) -> None:
        check_sizes(training_type, num_envs, num_transitions_per_env)
        check_dtypes(dtype, actions_dtype)
        self.training_type = training_type
        self.num_envs, self.num_transitions_per_env = num_envs, num_transitions_per_env
        unfilled = self.__dict__.pop("_unfilled", None)  # set by _unzeroed alone
        # The meta device only for _unzeroed: the converter's storages of shapes alone.
        self.device = checked_device(device, meta=unfilled is not None)
        self.actions_shape = shape_of(actions_shape)
        self.normalize_advantage_per_mini_batch = as_flag(
            normalize_advantage_per_mini_batch, "normalize_advantage_per_mini_batch"
        )
        self.step = 0
        self._default_params = distribution_params is None  # its errors say so (specs)
        specs = _field_specs(
            training_type,
            num_envs,
            self.actions_shape,
            observations,
            privileged_observations,
            distribution_params,
            dtype,
            actions_dtype,
        )
        unfilled = unfilled or frozenset()
        hidden = partial(self._alloc_hidden, dtype=dtype, zeroed="hidden_states" not in unfilled)
        sizes = f"num_envs={num_envs}, num_transitions_per_env={num_transitions_per_env}"
        with allocation_of(sizes):  # named, where torch's errors name no argument
            self._allocate(specs, unfilled)
            self._bind_fields()
            #: Per state component ``[T, num_layers, N, hidden]`` (GRU: 1, LSTM: 2), in dtype.
            self.saved_hidden_states_actor = hidden(actor_hidden_state, label="actor")
            self.saved_hidden_states_critic = hidden(critic_hidden_state, label="critic")
        #: ``[T, N]`` bool, False on cells that hold no transition (padding, a next-step
        #: reset step); None when every cell holds one. The generators hand out only valid
        #: cells (flat) or the mask with the batch (recurrent, distillation), and the
        #: advantages are normalised over valid cells. ``clear`` resets it.
        self.valid: torch.Tensor | None = None
        self._shared: set[str] = set()  # tensors taken from a caller: never written here

    @classmethod
    def _unzeroed(cls, written: Collection[str], *args: Any, **kwargs: Any) -> RolloutStorage:
        """``cls(*args, **kwargs)``, but the fields ``written`` are allocated, not zeroed.

        For a caller that writes all of them (or has them taken) before anything reads them.
        """
        storage = cls.__new__(cls)
        storage.__dict__["_unfilled"] = frozenset(written)
        cls.__init__(storage, *args, **kwargs)
        return storage

    # ------------------------------------------------------------------ layout
    def _allocate(self, specs: dict[str, Any], unfilled: Collection[str] = ()) -> None:
        leaves: dict[str, Leaf] = {}
        #: Public field -> the name (or dict / tuple of names) of its tensors in :attr:`tensors`.
        self.field_names: Mapping[str, Any] = MappingProxyType(
            {field: name_leaves(field, spec, leaves) for field, spec in specs.items()}
        )
        t, n = self.num_transitions_per_env, self.num_envs
        with normal_tensors():  # kept across rollouts: normal tensors, inside inference mode too
            self._tensors = {  # the fields ``unfilled`` are left as allocated (_unzeroed)
                name: (torch.empty if name.split("/")[0] in unfilled else torch.zeros)(
                    t, n, *leaf.shape, dtype=leaf.dtype, device=self.device
                )
                for name, leaf in leaves.items()
            }
        #: Name -> contiguous ``[T, N, ...]`` tensor; read-only (write into the tensors).
        self.tensors: Mapping[str, torch.Tensor] = MappingProxyType(self._tensors)

    def _bind_fields(self) -> None:
        bind_fields(self)

    def __setattr__(self, name: str, value: Any) -> None:
        # An assigned field becomes its tensor in ``tensors``, read by every generator.
        if name in FIELDS and "_tensors" in self.__dict__:
            value = adopted(self, name, value)
        if name in REFILLS:  # counted once accepted: a refused field changes nothing
            object.__setattr__(self, "_refills", self._refills + 1)
        object.__setattr__(self, name, value)

    def _alloc_hidden(
        self, spec: HiddenSpec, label: str, dtype: torch.dtype = torch.float32, **how: bool
    ) -> list[torch.Tensor] | None:
        size, name = (self.num_transitions_per_env, self.num_envs), f"{label}_hidden_state"
        if how.get("written"):  # named as the writes into allocated states name it
            name = f"{label} hidden state"
        return hidden_tensors(spec, size, dtype, self.device, name, **how)

    # ------------------------------------------------------------------ flat access
    def _names(self, names: str | Iterable[str] | None) -> list[str]:
        if names is None:
            return list(self._tensors)
        wanted = [names] if isinstance(names, str) else list(names)
        unknown = [name for name in wanted if name not in self._tensors]
        if unknown:
            raise KeyError(f"no stored tensors {unknown}; stored: {list(self._tensors)}")
        return wanted

    def flat(self, names: str | Iterable[str] | None = None) -> dict[str, torch.Tensor]:
        """``[T * N, ...]`` views of the named tensors (all by default); row ``t * N + n``.

        Raises:
            KeyError: a name that is not in :attr:`tensors`.

        Example:
            >>> st = RolloutStorage("rl", 2, 3, (4,), (1,))
            >>> {k: tuple(v.shape) for k, v in st.flat(["observations", "values"]).items()}
            {'observations': (6, 4), 'values': (6, 1)}
        """
        rows = self.num_transitions_per_env * self.num_envs
        out = {}
        for name in self._names(names):
            tensor = self._tensors[name]
            out[name] = tensor.view(rows, *tensor.shape[2:])
        return out

    def gather(
        self, index: torch.Tensor, names: str | Iterable[str] | None = None
    ) -> dict[str, torch.Tensor]:
        """Rows ``index`` (flat ``t * N + n``, a 1-D tensor) of the named tensors, ``[B, ...]``.

        Each tensor is gathered with one ``index_select`` (:func:`select_rows`: rows of one
        element or of 2 to 16 bytes move as single elements, several times cheaper).

        Raises:
            KeyError: a name that is not in :attr:`tensors`.

        Example:
            >>> st = RolloutStorage("rl", 2, 3, (4,), (1,))
            >>> _ = st.rewards.view(-1).copy_(torch.arange(6.0))
            >>> st.gather(torch.tensor([5, 0]), "rewards")["rewards"].tolist()
            [[5.0], [0.0]]
        """
        rows = self.num_transitions_per_env * self.num_envs
        out = {}
        for name in self._names(names):
            tensor = self._tensors[name]
            out[name] = select_rows(tensor.view(rows, *tensor.shape[2:]), index)
        return out

    # ------------------------------------------------------------------ writing
    def _write(self, rows: slice | int, fields: dict[str, Any], share: bool = False) -> None:
        # Every leaf is checked before any is written, so a refused call changes nothing.
        share = share and rows == slice(0, self.num_transitions_per_env)  # whole tensors only
        shared = self._shared
        copies: list[tuple[torch.Tensor, Any]] = []  # (rows of an own tensor, leaf)
        puts: list[tuple[str, Any]] = []  # (tensor name, leaf): maybe taken or shared
        hidden: dict[str, list[torch.Tensor]] = {}
        for name, value in fields.items():
            if value is None:
                continue
            dst = self._tensors.get(name)
            if dst is not None and not share and name not in shared:
                copies.append((checked_rows(dst[rows], value, name), value))  # the hot case
                continue
            if name == "hidden_states":
                for which, state in zip(("actor", "critic"), hidden_pair(value)):
                    if state is not None:
                        saved, comps = hidden_writes(
                            getattr(self, f"saved_hidden_states_{which}"),
                            state,
                            partial(self._alloc_hidden, label=which, written=True),
                            which,
                            isinstance(rows, int),
                        )
                        hidden[which] = saved
                        copies.extend(
                            (checked_rows(d[rows], c, f"{which} hidden state"), c)
                            for d, c in zip(saved, comps)
                        )
                continue
            # Every name is the storage's: write_block and add_transition pass only those.
            with distribution_remedy(self, name, value, isinstance(rows, int)):
                for tensor_name, leaf in paired(self.field_names[name], value, name):
                    checked_rows(self._tensors[tensor_name][rows], leaf, tensor_name)
                    puts.append((tensor_name, leaf))
        # With share, a source in the hidden states is the storage's too: copied, not taken.
        own = [*(self.saved_hidden_states_actor or ()), *(self.saved_hidden_states_critic or ())]
        one = isinstance(rows, int)
        copies, writes = unalias(
            copies, puts, self._tensors, shared, one, share=share, also_own=own
        )
        for which, saved in hidden.items():
            setattr(self, f"saved_hidden_states_{which}", saved)
        for dst, leaf in copies:
            copy_rows(dst, leaf)
        rebind = any([put_leaf(self._tensors, shared, n, rows, x, share=y) for n, x, y in writes])
        if rebind:  # a tensor was taken or replaced: the fields must name the new ones
            self._bind_fields()

    def _fields_of(self, t: _Transition) -> dict[str, Any]:
        return step_fields(self, t)

    def add_transition(self, transition: _Transition) -> None:
        """Copy one step into slot ``step`` and advance it.

        Fields of ``transition`` that are ``None`` are skipped; fields the training type does not
        store (e.g. ``values`` for distillation) are ignored; ``time_outs`` is not stored.

        Raises:
            OverflowError: if all ``T`` slots are already written (call :meth:`clear`).

        Example:
            >>> st = RolloutStorage("rl", 2, 3, (4,), (1,))
            >>> st.add_transition(RolloutStorage.Transition(rewards=torch.tensor([1.0, 2.0])))
            >>> st.step, st.rewards[0].tolist()
            (1, [[1.0], [2.0]])
        """
        if self.step >= self.num_transitions_per_env:
            raise OverflowError(
                f"rollout storage is full ({self.num_transitions_per_env} steps); "
                "call clear() first"
            )
        write_row(self, self.step, step_fields(self, transition))  # plain tensors: copied at once
        self.step += 1

    def write_block(self, start: SupportsIndex, *, share: bool = False, **fields: Any) -> int:
        """Write whole ``[k, N, ...]`` blocks at time steps ``start:start + k`` in one copy each.

        Accepts the :class:`Transition` field names (``observations``, ``actions``, ``rewards``,
        ``dones``, ``values``, ``actions_log_prob``, ``distribution_params``,
        ``privileged_actions``, ``privileged_observations``, ``hidden_states=(actor, critic)``
        with ``[k, num_layers, N, hidden]`` components). The copies are exact, so the result is
        bit-identical to ``k`` calls of :meth:`add_transition`. ``step`` becomes
        ``max(step, start + k)``.

        With ``share=True`` a block covering all ``T`` steps whose dtype and device match and
        which is contiguous (after dropping a trailing 1: ``[T, N]`` for ``[T, N, 1]``) is
        taken as the storage's tensor instead of copied: the field then shares memory with
        the caller's tensor (see :attr:`shared`). The storage never writes into a taken tensor
        (a later write replaces it with a copy first); writing into it from outside changes
        both. A block in memory another field holds or takes (even shared) is copied instead,
        and so is an inference tensor (made under ``torch.inference_mode``), which a loss
        outside inference mode could not use: the storage's tensors are never such tensors.

        Returns:
            ``k``, the number of steps written.

        Raises:
            OverflowError: if ``start + k > T``.
            TypeError: a block that is not a tensor, a ``start`` that is no int (a bool), or
                a ``share`` that is no bool.
            ValueError: on a negative ``start``, unknown field names, mismatched ``k`` or a
                block whose shape or dtype does not fit its field (floats into int actions);
                every field is checked before any is written, so a refused call leaves the
                storage unchanged. A block viewing the storage's rows is read as given.

        Example:
            >>> st = RolloutStorage("rl", 2, 4, (3,), (1,))
            >>> st.write_block(0, rewards=torch.ones(4, 2), dones=torch.zeros(4, 2))
            4
            >>> values = torch.ones(4, 2)
            >>> _ = st.write_block(0, share=True, values=values)
            >>> st.values.data_ptr() == values.data_ptr(), sorted(st.shared)
            (True, ['values'])
            >>> with torch.inference_mode():
            ...     _ = st.write_block(0, share=True, rewards=torch.ones(4, 2))
            >>> st.rewards.is_inference(), sorted(st.shared)  # copied into its own tensor
            (False, ['values'])
        """
        share = as_flag(share, "share")  # "False" would share
        allowed = set(step_fields(self, _Transition()))
        rows = block_rows(start, fields, allowed, self.num_transitions_per_env)
        self._write(rows, fields, share)
        self.step = max(self.step, rows.stop)
        return rows.stop - rows.start

    @property
    def shared(self) -> frozenset[str]:
        """Names (as in :attr:`tensors`) of the tensors taken by ``write_block(share=True)``.

        Example:
            >>> st = RolloutStorage("rl", 2, 3, (4,), (1,))
            >>> _ = st.write_block(0, share=True, observations=torch.zeros(3, 2, 4))
            >>> sorted(st.shared)
            ['observations']
            >>> st.own(); sorted(st.shared)
            []
        """
        return frozenset(self._shared)

    def own(self) -> None:
        """Replaces every shared tensor with a copy, so writing into it changes only this storage.

        Example:
            >>> st = RolloutStorage("rl", 2, 3, (4,), (1,))
            >>> outside = torch.zeros(3, 2, 4)
            >>> _ = st.write_block(0, share=True, observations=outside)
            >>> st.own()
            >>> _ = st.observations.fill_(1.0)
            >>> float(outside.sum()), float(st.observations.sum())
            (0.0, 24.0)
        """
        if not self._shared:
            return
        with normal_tensors():  # never an inference tensor, which a loss could not use
            self._tensors.update({name: self._tensors[name].clone() for name in self._shared})
        self._shared.clear()
        self._bind_fields()

    def __repr__(self) -> str:
        return storage_repr(self)

    def __getstate__(self) -> dict[str, Any]:
        return _pickled_state(self)  # copies of shared tensors, which may view a bigger block

    def __setstate__(self, state: dict[str, Any]) -> None:
        _restore_state(self, state)

    def clear(self) -> None:
        """Reset the write cursor; the next rollout overwrites the old data.

        Example:
            >>> st = RolloutStorage("rl", 2, 1, (4,), (1,))
            >>> st.add_transition(RolloutStorage.Transition(rewards=torch.ones(2)))
            >>> st.clear()
            >>> st.step, st.rewards.flatten().tolist()
            (0, [1.0, 1.0])
        """
        self.step = 0
        self.valid = None

    # ------------------------------------------------------------------ returns
    def compute_returns(
        self,
        last_values: torch.Tensor,
        gamma: float,
        lam: float,
        normalize_advantage: bool = True,
    ) -> None:
        """Fill ``advantages`` (GAE over all ``T`` steps) and ``returns = advantages + values``.

        With :attr:`valid` set, cells outside it get value, advantage and return 0. Without,
        a storage written part-way (``0 < step < T``) is a ``ValueError``, nothing written.

        Args:
            last_values: ``[N]`` or ``[N, 1]`` values of the states after the last step.
            gamma: discount factor, in ``[0, 1]`` (else a ``ValueError``, nothing written).
            lam: GAE lambda, in ``[0, 1]`` (likewise).
            normalize_advantage: normalise advantages over the whole batch (zero mean, unit
                std, ``+1e-8``; over the valid cells when :attr:`valid` is set, the others
                never read and set to 0). Pass ``False`` to normalise per mini-batch instead.

        Example:
            >>> st = RolloutStorage("rl", 2, 3, (4,), (1,))
            >>> _ = st.rewards.fill_(1.0)
            >>> st.compute_returns(torch.zeros(2), gamma=1.0, lam=1.0, normalize_advantage=False)
            >>> st.returns[:, 0, 0].tolist()
            [3.0, 2.0, 1.0]
        """
        if self.values is None or self.returns is None or self.advantages is None:
            raise ValueError("compute_returns is only available for training_type 'rl'")
        normalize = as_flag(normalize_advantage, "normalize_advantage")  # before any write
        values, valid, adv = self.values, self.valid, self.advantages
        if 0 < self.step < self.num_transitions_per_env and valid is None:
            # The arguments' own refusals first (GAE into a new tensor), then this one.
            compute_gae(self.rewards, values, self.dones, last_values, gamma, lam)
            _check_filled(self, "compute_returns")
        compute_gae(self.rewards, values, self.dones, last_values, gamma, lam, out=adv, valid=valid)
        with normal_tensors():  # a shared values tensor it replaces: by a normal tensor
            clear_unheld_values(self)  # with ``valid``: values 0 where no transition is
        torch.add(adv, self.values, out=self.returns)
        if normalize:
            normalize_into(adv, adv, valid)

    # ------------------------------------------------------------------ reading
    def mini_batch_generator(
        self,
        num_mini_batches: int,
        num_epochs: int = 8,
        *,
        generator: torch.Generator | None = None,
        normalize_advantage_per_mini_batch: bool | None = None,
    ) -> Iterator[RLBatch]:
        """Shuffled flat mini-batches; see :func:`.generators.mini_batch_generator`.

        Example:
            >>> st = RolloutStorage("rl", 2, 3, (4,), (1,))
            >>> g = torch.Generator().manual_seed(0)
            >>> batches = list(st.mini_batch_generator(2, num_epochs=2, generator=g))
            >>> len(batches), tuple(batches[0].observations.shape)
            (4, (3, 4))
        """
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
        """Padded trajectories; see :func:`.generators.recurrent_mini_batch_generator`.

        Example:
            >>> st = RolloutStorage("rl", 2, 3, (4,), (1,))
            >>> st.dones[0, 0] = True  # env 0 splits into trajectories of 1 and 2 steps
            >>> (batch,) = st.recurrent_mini_batch_generator(1, num_epochs=1)
            >>> batch.masks.sum(0).tolist(), tuple(batch.actions.shape)
            ([1, 2, 3], (3, 2, 1))
        """
        return recurrent_mini_batch_generator(
            self,
            num_mini_batches,
            num_epochs,
            normalize_advantage_per_mini_batch=normalize_advantage_per_mini_batch,
        )

    def generator(self) -> Iterator[DistillationBatch]:
        """One batch per time step; see :func:`.generators.distillation_generator`.

        Example:
            >>> st = RolloutStorage("distillation", 2, 3, (4,), (1,))
            >>> _ = st.observations[:, :, 0].copy_(torch.arange(3.0).view(3, 1))
            >>> [b.observations[:, 0].tolist() for b in st.generator()]
            [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]
        """
        return distillation_generator(self)
