"""Attributes a runner is made with and cannot change afterwards: read freely, set refused."""

from __future__ import annotations

from typing import Any

__all__ = ["Fixed"]


class Fixed:
    """A read-only attribute held as ``_name``; setting it is an ``AttributeError`` saying why.

    What the runner's recorder and its checks were made with (the env, its width, its autoreset
    mode, the window): changed afterwards they would disagree with what is recorded, silently.

    Example:
        >>> class Runner:
        ...     window = Fixed("made with it: create a new one")
        ...     def __init__(self): self._window = "transitions"
        >>> runner = Runner()
        >>> runner.window
        'transitions'
        >>> runner.window = "vector_steps"
        Traceback (most recent call last):
        ...
        AttributeError: Runner.window is read-only: made with it: create a new one
    """

    def __init__(self, why: str):
        self.why = why
        self.name = self.slot = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.slot = name, "_" + name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return obj.__dict__[self.slot]

    def __set__(self, obj: Any, value: Any) -> None:
        raise AttributeError(f"{type(obj).__name__}.{self.name} is read-only: {self.why}")
