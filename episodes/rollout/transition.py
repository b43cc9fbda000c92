"""The per-step record that an on-policy algorithm fills and hands to the storage."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import torch

__all__ = ["HiddenState", "Observation", "Transition"]

#: A recurrent state: ``None``, a GRU tensor ``[num_layers, N, hidden]`` or an LSTM ``(h, c)``.
HiddenState: TypeAlias = torch.Tensor | tuple[torch.Tensor, ...] | None
#: Observations: a ``[N, ...]`` tensor or a (nested) mapping of them.
Observation: TypeAlias = torch.Tensor | Mapping[str, Any]


@dataclass(eq=False)
class Transition:
    """One environment step for all ``N`` envs.

    Filled incrementally (policy outputs in ``act``, rewards and dones after ``env.step``), then
    passed to :meth:`RolloutStorage.add_transition` and :meth:`clear` is called.

    Attributes:
        observations: observations before the action, ``[N, ...]`` or a nested dict of them.
        privileged_observations: optional extra observations (e.g. for an asymmetric critic).
        actions: ``[N, *action_shape]``.
        privileged_actions: teacher actions (distillation).
        rewards: ``[N]`` or ``[N, 1]``.
        dones: ``[N]`` or ``[N, 1]``.
        values: ``[N, 1]`` value estimates (RL).
        actions_log_prob: ``[N]`` or ``[N, 1]`` (RL).
        distribution_params: tuple of ``[N, ...]`` tensors, e.g. ``(mean, std)`` (RL).
        hidden_states: ``(actor, critic)`` recurrent states at this step, before the action.
        time_outs: ``[N]`` truncation flags; not stored, see :func:`bootstrap_time_outs`.

    Example:
        >>> t = Transition(rewards=torch.zeros(4))
        >>> t.clear()
        >>> t.rewards is None
        True
    """

    observations: Observation | None = None
    privileged_observations: Observation | None = None
    actions: torch.Tensor | None = None
    privileged_actions: torch.Tensor | None = None
    rewards: torch.Tensor | None = None
    dones: torch.Tensor | None = None
    values: torch.Tensor | None = None
    actions_log_prob: torch.Tensor | None = None
    distribution_params: tuple[torch.Tensor, ...] | None = None
    hidden_states: tuple[HiddenState, HiddenState] = field(default=(None, None))
    time_outs: torch.Tensor | None = None

    def clear(self) -> None:
        """Reset every field to its default (``None``; hidden states ``(None, None)``).

        Example:
            >>> t = Transition(actions=torch.ones(2, 1), hidden_states=(torch.zeros(1, 2, 4), None))
            >>> t.clear()
            >>> t.actions, t.hidden_states
            (None, (None, None))
        """
        for f in dataclasses.fields(self):
            setattr(self, f.name, f.default)
