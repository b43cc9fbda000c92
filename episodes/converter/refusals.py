"""What the rollout converter refuses, and why: checks kept apart from the layout code.

Example:
    >>> import torch
    >>> flat_actions(torch.zeros(2, 3)).shape
    torch.Size([2, 3])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from episodes.runner import SampledChunks


def flat_actions(actions: Any) -> torch.Tensor:
    """The actions as one tensor, or a clear error for Dict/Tuple actions.

    Example:
        >>> flat_actions({"move": torch.zeros(2)})
        Traceback (most recent call last):
        ...
        ValueError: RolloutStorage holds one action tensor per step, but these chunks' ...
    """
    if isinstance(actions, torch.Tensor):
        return actions
    raise ValueError(
        "RolloutStorage holds one action tensor per step, but these chunks' actions are a "
        f"{type(actions).__name__} of leaves: flatten them into one array per step first "
        "(e.g. gymnasium.spaces.flatten), or use episodes_to_batch"
    )


def refuse_masked_windows(samples: Sequence[Any], wanted: list[str]) -> None:
    """A vector-step window with reset steps is only laid out from the runner's blocks.

    ``wanted`` are the extra outputs the keys ask for: the usual reason the fast path stepped
    aside is that the policy did not record one of them, which is what the error then says.

    Example:
        >>> refuse_masked_windows([], ["vf_preds"])  # nothing sampled with reset steps: fine
    """
    masked = [
        sample
        for sample in samples
        if isinstance(sample, SampledChunks)
        and sample.recording.vector_steps
        and sample.recording.dead_cells() is not None
    ]
    for sample in masked:
        recorded = sorted(sample.recording.blocks.extras)
        missing = [key for key in wanted if key not in recorded]
        if missing:
            raise KeyError(
                f"the policy recorded no extra output {missing[0]!r}; it records {recorded} "
                "(configure ColumnKeys)"
            )
    if masked:
        raise ValueError(
            "these chunks come from a runner recording vector steps, and their window holds "
            "reset steps: only the fast path lays it out (the chunks' lengths differ per "
            "env). It needs value_fn for training_type 'rl' and chunks left as sampled (no "
            "append, concat, pop or replaced column); copy the chunks you want to change, or "
            "use layout='per_chunk'"
        )


def check_storage_size(storage: Any, num_steps: int, num_envs: int) -> None:
    """Refuses a given storage that is not ``num_steps`` x ``num_envs`` transitions.

    A longer storage would keep an earlier rollout's rows past ``num_steps`` and hand them
    to the generators as if they were this rollout's.

    Example:
        >>> from episodes.rollout import RolloutStorage
        >>> storage = RolloutStorage("rl", 2, 5, [3], [1])
        >>> check_storage_size(storage, 5, 2)
        >>> check_storage_size(storage, 3, 2)
        Traceback (most recent call last):
        ...
        ValueError: the given storage holds T=5 x N=2 transitions, but these chunks make T=3 x N=2
    """
    have = (storage.num_transitions_per_env, storage.num_envs)
    if have != (num_steps, num_envs):
        raise ValueError(
            f"the given storage holds T={have[0]} x N={have[1]} transitions, but these chunks "
            f"make T={num_steps} x N={num_envs}"
        )
