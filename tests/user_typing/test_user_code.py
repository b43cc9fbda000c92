"""``user_code.py`` passes ``mypy --strict`` and every function in it runs as documented."""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import pytest

from tests.user_typing import user_code

HERE = Path(__file__).parent
ROOT = HERE.parent.parent

# Strict for the user's file only: the package is checked with the project's own settings by
# `make lint`; here it is read for its annotations, its own findings silenced.
CONFIG = """\
[mypy]
strict = True
ignore_missing_imports = True
[mypy-episodes.*]
follow_imports = silent
"""


def test_user_code_passes_mypy_strict(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api")
    config = tmp_path / "mypy.ini"
    config.write_text(CONFIG)
    cwd = os.getcwd()
    os.chdir(ROOT)  # the package is found beside the tests, as the project checks it
    try:
        out, err, status = api.run(
            [
                "--config-file",
                str(config),
                "--cache-dir",
                str(tmp_path / "cache"),
                "--no-incremental",
                str(HERE / "user_code.py"),
            ]
        )
    finally:
        os.chdir(cwd)
    assert status == 0, out + err


EXPECTED = {
    "lazy_io_names_are_typed": 2,
    "connectors_take_any_sequence": 8,
    "index_arrays_and_numpy_ints": [[0.0, 2.0], 1, [1.0, 2.0], [10, 11], 11],
    "ids_of_any_type": [("run", 3), [0, 1], [0], [7]],
    "prioritized_seed_generator": 1.0,
    "rollout_shapes_and_keys": (8, 4, 3, 8, 4, 3),
    "policies_without_extras": 4,
    "runner_attributes": 2 + 11 - 2 + 2,
    "numpy_scalars_where_documented": True,
    "numpy_numbers_in_signatures": [4, 4, [1], [1.0, 5.0], 0, 4],
    "subclass_chunks_keep_their_type": ["mine"] * 5,
    "space_dicts_round_trip": True,
    "from_dataset_builds_its_class": [
        "PrioritizedEpisodeReplayBuffer",
        "MyBuffer",
        "EpisodeReplayBuffer",
        "mine",
    ],
}


def _plain(value: object) -> object:
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value.tolist() if hasattr(value, "tolist") else value


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_user_code_runs(name: str, tmp_path: Path) -> None:
    fn = getattr(user_code, name)
    result = fn(str(tmp_path)) if "folder" in inspect.signature(fn).parameters else fn()
    assert _plain(result) == EXPECTED[name]


def test_every_function_is_run() -> None:
    functions = {
        name
        for name, fn in inspect.getmembers(user_code, inspect.isfunction)
        if fn.__module__ == user_code.__name__ and not name.startswith("_")
    }
    assert functions - {"assert_type", "count_list", "count_sequence"} == set(EXPECTED)
