"""Attributes a runner is made with and cannot change afterwards: read freely, set refused."""

from __future__ import annotations

from typing import Any, Generic, TypeVar, overload

__all__ = ["Fixed"]

T = TypeVar("T")


class Fixed(Generic[T]):
    """A read-only attribute held as ``_name``; setting it is an ``AttributeError`` saying why.

    What the runner's recorder and its checks were made with (the env, its width, its autoreset
    mode, the window): changed afterwards they would disagree with what is recorded, silently.
    Typed by its parameter (``env: Fixed[VectorEnv] = Fixed(...)`` reads as a ``VectorEnv``);
    read before it is held (a subclass before ``__init__``), it is a missing attribute.

    Example:
        >>> class Runner:
        ...     window: Fixed[str] = Fixed("made with it: create a new one")
        ...     def __init__(self): self._window = "transitions"
        >>> runner = Runner()
        >>> runner.window, hasattr(Runner.__new__(Runner), "window")
        ('transitions', False)
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

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Fixed[T]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...
    def __get__(self, obj: object, owner: type | None = None) -> Any:
        if obj is None:
            return self
        try:
            return obj.__dict__[self.slot]
        except KeyError:  # not held yet: as a missing attribute, so hasattr and getattr work
            raise AttributeError(self.name) from None

    def __set__(self, obj: Any, value: Any) -> None:
        raise AttributeError(f"{type(obj).__name__}.{self.name} is read-only: {self.why}")
