"""The bridge from episodes to training data: flat batches and torch rollout storages.

``episodes_to_rollout`` needs torch (it imports ``episodes.rollout``); ``episodes_to_batch`` and
the column helpers do not, but live here because they share the layout rules.
"""

from episodes.converter.bootstrap import bootstrap_truncated_rewards
from episodes.converter.columns import ColumnKeys, time_major
from episodes.converter.groups import group_by_env
from episodes.converter.to_batch import episodes_to_batch
from episodes.converter.to_rollout import Rollout, bootstrap_values, episodes_to_rollout

__all__ = [
    "ColumnKeys",
    "Rollout",
    "bootstrap_truncated_rewards",
    "bootstrap_values",
    "episodes_to_batch",
    "episodes_to_rollout",
    "group_by_env",
    "time_major",
]
