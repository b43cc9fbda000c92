"""What cells that hold no transition hold: 0 in the policy's outputs.

``compute_returns`` sets the values of such cells to 0 (:func:`clear_unheld_values`); the
converter sets the policy's other float outputs there to 0 (:func:`clear_unheld_outputs`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .storage import RolloutStorage

__all__ = ["clear_unheld_outputs", "clear_unheld_values"]


def clear_unheld_values(storage: RolloutStorage) -> None:
    """Writes 0 into ``storage.values`` outside ``storage.valid`` (nothing without one).

    Such a cell holds no transition, but may hold a value: the converter stores the policy's
    value of a next-step reset step, NaN or inf for a diverged state. A recurrent batch
    hands it out with ``valid`` False, and a loss weighted with ``valid`` multiplies it by
    0: NaN. Its advantage is 0 already; with its value 0 its return is 0 too. A values
    tensor taken from a caller (``storage.shared``, as ``write_block(share=True)`` takes
    it) is not written: it is replaced by a copy. No value is read on the host. The mask's
    shape is the caller's to check (``compute_gae`` does).

    Example:
        >>> from episodes.rollout import RolloutStorage
        >>> st = RolloutStorage("rl", 2, 1, (1,), (1,))
        >>> _ = st.values.fill_(float("nan"))
        >>> st.valid = torch.tensor([[True, False]])
        >>> clear_unheld_values(st)
        >>> st.values.flatten().tolist()[1]
        0.0
    """
    valid, values = storage.valid, storage.values
    if valid is None or values is None:
        return
    if _zero_cells(storage, "values", torch.logical_not(valid)):
        storage._bind_fields()


#: The fields the policy writes besides the values (float ones are cleared).
_OUTPUTS = ("actions", "actions_log_prob", "distribution_params", "privileged_actions")


def clear_unheld_outputs(storage: RolloutStorage, *, write_shared: bool = False) -> None:
    """Writes 0 outside ``storage.valid`` into the policy's float outputs but the values.

    These are the float actions, log-probs, distribution parameters and teacher actions
    (int actions are left alone), and the hidden states: at a next-step reset step the
    converter stores what the policy gave for the terminal observation, NaN for a diverged
    state, and a recurrent batch hands it out with ``valid`` False, where a loss weighted
    with ``valid`` makes ``NaN * 0 = NaN``. The valid cells keep their bits. On the CPU only
    the unheld cells are written (few: one scan of the ``[T, N]`` mask); on an accelerator
    one ``masked_fill_`` per tensor, nothing read on the host. A tensor taken from a caller
    (``storage.shared``) is replaced by a copy, unless ``write_shared``: the converter
    passes it for a runner's blocks, whose unheld cells belong to no chunk. The values are
    left to :func:`clear_unheld_values` (``compute_returns``).

    Example:
        >>> from episodes.rollout import RolloutStorage
        >>> st = RolloutStorage("rl", 2, 1, (1,), (1,))
        >>> _ = st.actions_log_prob.fill_(float("nan"))
        >>> st.valid = torch.tensor([[True, False]])
        >>> clear_unheld_outputs(st)
        >>> st.actions_log_prob.flatten().tolist()[1]
        0.0
    """
    valid = storage.valid
    if valid is None:
        return
    empty = torch.logical_not(valid)
    # On the host the few unheld cells are found once and written alone: a masked_fill
    # would read and write every byte of every output (a third of a large rollout's time).
    cells = empty.nonzero(as_tuple=True) if empty.device.type == "cpu" else None
    if cells is not None and cells[0].numel() == 0:
        return
    rebind = False
    for field in _OUTPUTS:
        names = storage.field_names.get(field)
        for name in (names,) if isinstance(names, str) else names or ():
            tensor = storage._tensors[name]
            if not tensor.is_floating_point():
                continue
            if name in storage._shared and not write_shared:
                rebind = _zero_cells(storage, name, empty) or rebind
            elif cells is not None:
                tensor[cells] = 0.0
            else:
                tensor.masked_fill_(_leading(empty, tensor), 0.0)
    t, n = storage.num_transitions_per_env, storage.num_envs
    for saved in (storage.saved_hidden_states_actor, storage.saved_hidden_states_critic):
        for state in saved or ():  # [T, num_layers, N, hidden], never shared
            if cells is not None:
                state[cells[0], :, cells[1]] = 0.0
            else:
                state.masked_fill_(empty.reshape(t, 1, n, 1), 0.0)
    if rebind:
        storage._bind_fields()


def _leading(empty: torch.Tensor, tensor: torch.Tensor) -> torch.Tensor:
    """The ``[T, N]`` mask shaped to broadcast over ``tensor``'s trailing axes."""
    return empty.reshape(*tensor.shape[:2], *[1] * (tensor.dim() - 2))


def _zero_cells(storage: RolloutStorage, name: str, empty: torch.Tensor) -> bool:
    """0 into tensor ``name`` at the ``[T, N]`` cells ``empty``; True if it was replaced."""
    tensor = storage._tensors[name]
    cells = _leading(empty, tensor)
    if name not in storage._shared:
        tensor.masked_fill_(cells, 0.0)
        return False
    # Its own copy, as a later write_block would make it (RolloutStorage._write).
    storage._tensors[name] = tensor.masked_fill(cells, 0.0)
    storage._shared.discard(name)
    return True
