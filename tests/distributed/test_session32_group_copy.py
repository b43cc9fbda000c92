"""A RunnerGroup owns its actors: pickle, copy.copy and deepcopy refuse it with a clear error.

Pickling failed deep inside ("cannot pickle 'module' object"), and copy.copy made a second
owner whose stop() killed the original's actors.
"""

from __future__ import annotations

import copy
import pickle

import pytest

ray = pytest.importorskip("ray")

from episodes.distributed import RunnerGroup  # noqa: E402
from tests.distributed._envs import cartpole, random_policy  # noqa: E402

COPIES = {
    "pickle": pickle.dumps,
    "pickle_protocol_2": lambda group: pickle.dumps(group, protocol=2),
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
}


def test_a_group_refuses_every_copy_and_keeps_sampling(ray_local) -> None:
    group = RunnerGroup(cartpole, random_policy, num_runners=1, seed=0, num_cpus_per_runner=0.5)
    try:
        for name, make_copy in COPIES.items():
            with pytest.raises(TypeError, match="RunnerGroup owns its actors") as caught:
                make_copy(group)
            assert "cannot be pickled or copied" in str(caught.value), name
        assert group.sample(2).env_steps > 0  # the refusals changed nothing
        assert group.generations == [0]
        assert group.get_metrics()["num_restarts"] == 0
    finally:
        group.stop()
