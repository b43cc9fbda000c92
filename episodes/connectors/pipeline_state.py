"""A pipeline's state: the states of its stateful connectors, to checkpoint and restore.

:class:`PipelineState` gives :class:`~episodes.connectors.ConnectorPipeline` its
``get_state``/``set_state``. A connector is stateful when it has a ``get_state()`` method (a
filter's running statistics, say); the shipped ones have none, being functions of the
episodes. A pipeline inside a pipeline is a stateful connector too.

Example:
    >>> from episodes.connectors import ConnectorPipeline
    >>> class Count:
    ...     def __init__(self):
    ...         self.calls = 0
    ...     def __call__(self, episodes, batch):
    ...         self.calls += 1
    ...         return batch
    ...     def get_state(self):
    ...         return {"calls": self.calls}
    ...     def set_state(self, state):
    ...         self.calls = state["calls"]
    >>> pipe = ConnectorPipeline([lambda eps, b: b, Count()])
    >>> _ = pipe([]), pipe([])
    >>> pipe.get_state()
    {'1:Count': {'calls': 2}}
    >>> fresh = ConnectorPipeline([lambda eps, b: b, Count()])
    >>> fresh.set_state(pipe.get_state())
    >>> fresh[1].calls
    2
"""

from __future__ import annotations

import copy
import reprlib
from collections.abc import Mapping
from typing import Any

__all__ = ["PipelineState"]


class PipelineState:
    """``get_state``/``set_state`` for a pipeline of ``connectors`` (RLlib's pipelines have them).

    The state is a dict with one entry per connector that has a ``get_state`` method, keyed
    ``"<position>:<class name>"`` (``"2:MeanStdFilter"``); connectors without one are skipped.
    A state fits only a pipeline with stateful connectors of the same classes at the same
    positions (a stateless connector added or removed before them moves their positions).
    The values are what the connectors' own ``get_state`` returns, not copied.

    Example:
        >>> from episodes.connectors import ConnectorPipeline, FrameStack
        >>> ConnectorPipeline([FrameStack(2)]).get_state()  # the shipped ones hold no state
        {}
    """

    connectors: list[Any]

    def get_state(self) -> dict[str, Any]:
        """Each stateful connector's ``get_state()``, keyed by its position and class name.

        Example:
            >>> from episodes.connectors import ConnectorPipeline
            >>> class Scale:
            ...     def __init__(self, k):
            ...         self.k = k
            ...     def __call__(self, episodes, batch):
            ...         return {**batch, "k": self.k}
            ...     def get_state(self):
            ...         return {"k": self.k}
            ...     def set_state(self, state):
            ...         self.k = state["k"]
            >>> ConnectorPipeline([Scale(2), lambda eps, b: b, Scale(3)]).get_state()
            {'0:Scale': {'k': 2}, '2:Scale': {'k': 3}}
        """
        return {key: connector.get_state() for key, connector in _stateful(self.connectors)}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Hands each stateful connector its entry of ``state`` (what :meth:`get_state` gave).

        Everything is checked before any connector is set: a ``state`` of another pipeline
        (other keys: stateful connectors of other classes or at other positions) is refused
        with every connector left as it was. Where a connector's own ``set_state`` refuses
        its entry, it and the connectors before it get back the states their ``get_state``
        gave before, and its error is raised.

        Raises:
            TypeError: ``state`` is not a mapping.
            ValueError: ``state``'s keys are not this pipeline's (the message names the keys
                missing and those it does not know), or a stateful connector has no
                ``set_state`` to take its entry.

        Example:
            >>> from episodes.connectors import ConnectorPipeline
            >>> class Count:
            ...     calls = 0
            ...     def __call__(self, episodes, batch):
            ...         return batch
            ...     def get_state(self):
            ...         return {"calls": self.calls}
            ...     def set_state(self, state):
            ...         self.calls = state["calls"]
            >>> pipe = ConnectorPipeline([Count()])
            >>> pipe.set_state({"0:Count": {"calls": 5}})
            >>> pipe[0].calls
            5
            >>> pipe.set_state({"1:Count": {"calls": 7}})  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ValueError: ConnectorPipeline.set_state: the state is not this pipeline's: ...
            >>> pipe[0].calls
            5
        """
        if not isinstance(state, Mapping):
            raise TypeError(
                "ConnectorPipeline.set_state takes a dict as get_state gives it, got "
                f"{reprlib.repr(state)} ({type(state).__name__})"
            )
        stateful = _stateful(self.connectors)
        keys = [key for key, _ in stateful]
        missing = [key for key in keys if key not in state]
        unknown = [key for key in state if key not in keys]
        if missing or unknown:
            odd = [f"it lacks {missing}"] if missing else []
            odd += [f"it holds {unknown}, which this pipeline does not"] if unknown else []
            raise ValueError(
                f"ConnectorPipeline.set_state: the state is not this pipeline's: {', '.join(odd)}"
                f" (this pipeline's keys: {keys}, a stateful connector's position and class "
                "name each); no connector was changed"
            )
        for key, connector in stateful:
            if not callable(getattr(connector, "set_state", None)):
                raise ValueError(
                    f"ConnectorPipeline.set_state: connector {key} has get_state but no "
                    "set_state, so its state cannot be restored; no connector was changed"
                )
        before: list[tuple[Any, Any]] = []
        key = ""
        try:
            for key, connector in stateful:
                # Copied: a connector may hand out its own arrays and later set them in place.
                before.append((connector, copy.deepcopy(connector.get_state())))
                connector.set_state(state[key])
        except BaseException as err:
            for connector, previous in reversed(before):  # the refusing one too: it may be
                try:  # half set; a failing restore must not stop the others'
                    connector.set_state(previous)
                except Exception:  # the first error is the one to report
                    continue
            nested = isinstance(dict(stateful).get(key), PipelineState)
            if nested and isinstance(err, ValueError):  # say which pipeline's state it was
                raise ValueError(f"in connector {key}: {err}") from err
            raise


def _stateful(connectors: list[Any]) -> list[tuple[str, Any]]:
    # Position and class name: two filters of one class stay apart, and a state of a pipeline
    # whose stateful connectors sit elsewhere or are of other classes does not fit.
    return [
        (f"{i}:{type(connector).__name__}", connector)
        for i, connector in enumerate(connectors)
        if callable(getattr(connector, "get_state", None))
    ]
