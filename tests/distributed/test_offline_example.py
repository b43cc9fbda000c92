"""examples/offline_ray_data.py in process: remote runners write one dataset, Ray Data trains."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("ray")
pytest.importorskip("torch")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example() -> ModuleType:
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    name = "_example_offline_ray_data"
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / "offline_ray_data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(module)  # the actors cannot import it by name
    return module


def test_runners_write_one_dataset_that_ray_data_trains_on(ray_local, tmp_path, capsys):
    from episodes.io import dataset_info, read_episodes

    example = load_example()
    path = str(tmp_path / "data")
    collected = example.collect(path, 1600, 4, seed=0)  # 2 runners x 2 envs x 200 steps x 2
    assert collected == 1600
    info = dataset_info(path)
    assert info.num_steps == collected == sum(len(c) for c in read_episodes(path))
    assert info.metadata is not None and info.metadata["env_id"] == "CartPole-v1"
    loss = example.train(path, epochs=2, batch_size=256, gamma=0.99, seed=0)
    assert math.isfinite(loss)
    assert capsys.readouterr().out.count("batches, mean TD loss") == 2
