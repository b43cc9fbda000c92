"""Gymnasium space helpers: serialization, one-hot encoding, filler items and batching."""

from episodes.spaces.batching import batch, is_flat, map_leaves, map_leaves_with_space, unbatch
from episodes.spaces.exact_keys import exact_key
from episodes.spaces.filler import filler_batch, filler_item
from episodes.spaces.one_hot import one_hot, one_hot_size
from episodes.spaces.serialization import space_from_dict, space_to_dict
from episodes.spaces.stacking import (
    UNSTACKABLE_SPACES,
    batch_in_space,
    batch_with_layout,
    equal_in_space,
    find_space_kind,
    nest_as_space,
    unstackable_space,
)

__all__ = [
    "UNSTACKABLE_SPACES",
    "batch",
    "batch_in_space",
    "batch_with_layout",
    "equal_in_space",
    "exact_key",
    "filler_batch",
    "filler_item",
    "find_space_kind",
    "is_flat",
    "map_leaves",
    "map_leaves_with_space",
    "nest_as_space",
    "one_hot",
    "one_hot_size",
    "space_from_dict",
    "space_to_dict",
    "unbatch",
    "unstackable_space",
]
