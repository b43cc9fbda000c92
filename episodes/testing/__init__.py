"""Testing toolkit for users of ``episodes``: hypothesis strategies and connector contracts.

Needs ``hypothesis`` (not a dependency of ``import episodes``). The strategies live in
:mod:`episodes.testing.strategies`, the contract tests in :mod:`episodes.testing.contracts`
(one at a time) and :mod:`episodes.testing.suite` (all at once, on drawn episodes).
See ``docs/testing.md`` for a worked example.

Example:
    >>> from episodes.testing import check_connector
    >>> check_connector(lambda episodes, batch: dict(batch), max_examples=2)
"""

from episodes.testing.contracts import (
    ConnectorContractError,
    check_deterministic,
    check_does_not_mutate,
    check_handles_empty_and_reset,
    check_list_numpy_agree,
    check_lookback_across_cuts,
    outputs_equal,
)
from episodes.testing.suite import ConnectorContract, check_connector

__all__ = [
    "ConnectorContract",
    "ConnectorContractError",
    "check_connector",
    "check_deterministic",
    "check_does_not_mutate",
    "check_handles_empty_and_reset",
    "check_list_numpy_agree",
    "check_lookback_across_cuts",
    "outputs_equal",
]
