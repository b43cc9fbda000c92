"""What a dataset is: env id and spec, seeds, policy, algorithm, free-form user metadata.

Stored in the v2 manifest's header line next to the library version and the wall-clock
creation time. Every value must be JSON (checked when the writer is created, and again,
type by type, when a reader parses it).

Example:
    >>> meta = DatasetMetadata(env_id="CartPole-v1", seeds=[1, 2], policy="random")
    >>> DatasetMetadata.from_json(meta.to_json(), "x") == meta
    True
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from typing import Any

from episodes.io.errors import CorruptDatasetError, UnstorableValueError

__all__ = ["DatasetMetadata"]

_STR_FIELDS = ("env_id", "policy", "policy_version", "algorithm", "algorithm_version")


@dataclass
class DatasetMetadata:
    """Describes how a dataset was made (all optional).

    Attributes:
        env_id: The gymnasium env id, e.g. ``"CartPole-v1"``.
        env_spec: The env's ``EnvSpec`` as JSON (``json.loads(env.spec.to_json())``).
        seeds: Seeds used for envs or the policy.
        policy: Name of the policy that acted.
        policy_version: Its version (a checkpoint name, a git hash...).
        algorithm: Name of the training algorithm, if any.
        algorithm_version: Its version.
        user: Free-form JSON metadata.

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter, dataset_info
        >>> path = tempfile.mkdtemp()
        >>> DatasetWriter(path, metadata=DatasetMetadata(env_id="Toy-v0", seeds=[7])).close()
        >>> stored = dataset_info(path).metadata
        >>> stored["env_id"], stored["seeds"]
        ('Toy-v0', [7])
    """

    env_id: str | None = None
    env_spec: dict[str, Any] | None = None
    seeds: list[int] | None = None
    policy: str | None = None
    policy_version: str | None = None
    algorithm: str | None = None
    algorithm_version: str | None = None
    user: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Any, **kwargs: Any) -> DatasetMetadata:
        """Fills ``env_id`` and ``env_spec`` from a gymnasium env (vector envs too).

        Example:
            >>> import gymnasium as gym
            >>> DatasetMetadata.from_env(gym.make("CartPole-v1")).env_id
            'CartPole-v1'
        """
        spec = getattr(env, "spec", None)
        spec_json: dict[str, Any] | None = None
        if spec is not None:
            try:
                spec_json = json.loads(spec.to_json())
            except (TypeError, ValueError, AssertionError):
                spec_json = None  # kwargs that are not JSON: the id alone still says a lot
        if spec_json is not None and hasattr(env, "num_envs"):
            # gym.make_vec puts its own arguments into the spec's kwargs; the stored spec is
            # the single env's, which gym.make(EnvSpec.from_json(...)) must rebuild.
            for key in ("num_envs", "vectorization_mode", "vector_kwargs", "wrappers"):
                spec_json.get("kwargs", {}).pop(key, None)
        return cls(env_id=getattr(spec, "id", None), env_spec=spec_json, **kwargs)

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict (raises :class:`UnstorableValueError` for non-JSON values).

        Example:
            >>> DatasetMetadata(user={"run": 3}).to_json()["user"]
            {'run': 3}
        """
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        # json.dumps would quietly turn keys into strings (1 and "1" collapse), tuples into
        # lists and numpy floats into floats: only values that come back as they are pass.
        problem = _json_problem(out)
        if problem:
            raise UnstorableValueError(f"dataset metadata must be plain JSON: {problem}")
        self._check(out, "dataset metadata", UnstorableValueError)
        return out

    @classmethod
    def from_json(cls, obj: Any, where: str) -> DatasetMetadata:
        """Parses and checks stored metadata.

        The writer's own check runs too: metadata it would refuse to write (a NaN, which
        ``json.loads`` takes) is damage when read.

        Example:
            >>> DatasetMetadata.from_json({"seeds": [True]}, "x")
            Traceback (most recent call last):
            ...
            episodes.io.errors.CorruptDatasetError: x: 'seeds' must be a list of ints or null
            >>> DatasetMetadata.from_json({"user": {"x": float("nan")}}, "x")
            Traceback (most recent call last):
            ...
            episodes.io.errors.CorruptDatasetError: x: metadata is not plain JSON: \
metadata['user']['x'] is nan
        """
        if not isinstance(obj, dict):
            raise CorruptDatasetError(f"{where}: metadata must be an object")
        problem = _json_problem(obj)
        if problem:
            raise CorruptDatasetError(f"{where}: metadata is not plain JSON: {problem}")
        known = {f.name for f in fields(cls)}
        cls._check(obj, where, CorruptDatasetError)
        return cls(**{k: v for k, v in obj.items() if k in known})

    @staticmethod
    def _check(obj: dict[str, Any], where: str, error: type[Exception]) -> None:
        for key in _STR_FIELDS:
            if obj.get(key) is not None and not isinstance(obj[key], str):
                raise error(f"{where}: {key!r} must be a str or null")
        seeds = obj.get("seeds")
        if seeds is not None and not (
            isinstance(seeds, list)
            and all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
        ):
            raise error(f"{where}: 'seeds' must be a list of ints or null")
        if obj.get("env_spec") is not None and not isinstance(obj["env_spec"], dict):
            raise error(f"{where}: 'env_spec' must be an object or null")
        if not isinstance(obj.get("user", {}), dict):
            raise error(f"{where}: 'user' must be an object")


def given_metadata(value: Any) -> DatasetMetadata | None:
    """A ``metadata=`` argument, checked: a :class:`DatasetMetadata` or None.

    Raises:
        TypeError: Anything else (a dict, say), saying how to make one of it.

    Example:
        >>> given_metadata(None) is None
        True
        >>> given_metadata({"run": 3})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        TypeError: metadata must be a DatasetMetadata, not a dict: make one with \
episodes.io.DatasetMetadata(user={...}) ...
    """
    if value is None or isinstance(value, DatasetMetadata):
        return value
    names = [f.name for f in fields(DatasetMetadata)]
    how = f"episodes.io.DatasetMetadata(...) (its fields: {', '.join(names)})"
    if isinstance(value, dict) and value and all(key in names for key in value):
        how = "episodes.io.DatasetMetadata(**metadata): its keys are all DatasetMetadata fields"
    elif isinstance(value, dict):
        how = (
            "episodes.io.DatasetMetadata(user={...}) (free-form JSON goes in user=; the other "
            f"fields are {', '.join(n for n in names if n != 'user')})"
        )
    kind = type(value).__name__
    raise TypeError(f"metadata must be a DatasetMetadata, not a {kind}: make one with {how}")


def _json_problem(obj: dict[str, Any]) -> str | None:
    """Why ``obj`` would not be written as it is (None: it would)."""
    try:
        problem = _not_plain_json(obj, "metadata")
        if not problem:  # what only writing finds: an int too long for text
            json.dumps(obj, allow_nan=False)
    except (ValueError, RecursionError) as err:
        problem = f"it cannot be written as JSON ({type(err).__name__}: {err})"
    return problem


def _not_plain_json(value: Any, where: str) -> str | None:
    """Where ``value`` holds something JSON would not give back as it is (None: nowhere)."""
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return None
    if kind is float:
        return None if math.isfinite(value) else f"{where} is {value!r}"
    if kind is list:
        for i, item in enumerate(value):
            found = _not_plain_json(item, f"{where}[{i}]")
            if found:
                return found
        return None
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return f"{where} has the key {key!r} (keys must be str)"
            found = _not_plain_json(item, f"{where}[{key!r}]")
            if found:
                return found
        return None
    return f"{where} is a {kind.__name__}"
