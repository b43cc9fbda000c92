"""Beyond one process: env runners as Ray actors and datasets as Ray Data pipelines.

Needs the optional extra: ``pip install 'episodes[ray]'`` (plain Ray core and Ray Data).
``import episodes`` never imports this package; importing it without Ray raises an
``ImportError`` that says how to install it.

- :class:`RunnerGroup`: runners as actors, each owning its vector env; synchronous and
  asynchronous sampling through the object store, weights broadcast once per update,
  dead runners replaced (their lost requests dropped whole and counted).
- :func:`read_steps`, :func:`read_transitions`, :func:`read_episodes`,
  :func:`write_episodes`: a dataset written by :mod:`episodes.io` as a ``ray.data.Dataset``
  of steps, n-step transitions or episodes (one read task per shard), and back.

Example:
    >>> from episodes.distributed import RunnerContext
    >>> RunnerContext.create(seed=0, index=2).seed  # 2 * 2**20
    2097152
"""

from episodes.distributed.require import INSTALL_HINT, require_ray

require_ray()

from episodes.distributed.actor import RunnerActor, WriterSpec  # noqa: E402
from episodes.distributed.context import (  # noqa: E402
    EnvFactory,
    PolicyFactory,
    RunnerContext,
    build_runner,
    runner_seed,
)
from episodes.distributed.data import (  # noqa: E402
    EpisodeDatasink,
    EpisodeDatasource,
    read_episodes,
    read_steps,
    read_transitions,
    write_episodes,
)
from episodes.distributed.group import RunnerGroup  # noqa: E402
from episodes.distributed.metrics import GroupMetrics  # noqa: E402
from episodes.distributed.rows import (  # noqa: E402
    episode_from_row,
    episode_row,
    nstep_columns,
    step_columns,
)
from episodes.distributed.sample import (  # noqa: E402
    GroupSample,
    LostSample,
    RunnerSample,
    merge_runner_metrics,
)

__all__ = [
    "INSTALL_HINT",
    "EnvFactory",
    "EpisodeDatasink",
    "EpisodeDatasource",
    "GroupMetrics",
    "GroupSample",
    "LostSample",
    "PolicyFactory",
    "RunnerActor",
    "RunnerContext",
    "RunnerGroup",
    "RunnerSample",
    "WriterSpec",
    "build_runner",
    "episode_from_row",
    "episode_row",
    "merge_runner_metrics",
    "nstep_columns",
    "read_episodes",
    "read_steps",
    "read_transitions",
    "runner_seed",
    "step_columns",
    "write_episodes",
]
