"""The values of cells that hold no transition, which ``compute_returns`` sets to 0."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .storage import RolloutStorage

__all__ = ["clear_unheld_values"]


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
    empty = torch.logical_not(valid).reshape(values.shape)
    if "values" not in storage.shared:
        values.masked_fill_(empty, 0.0)
        return
    # Its own copy, as a later write_block would make it (RolloutStorage._write).
    storage._tensors["values"] = values.masked_fill(empty, 0.0)
    storage._shared.discard("values")
    storage._bind_fields()
