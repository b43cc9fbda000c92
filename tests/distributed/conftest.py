"""One local Ray instance for the whole directory (starting one costs seconds on 2 cores)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="package")
def ray_local():
    ray = pytest.importorskip("ray")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        ignore_reinit_error=True,
    )  # the docstring examples may have started it
    yield ray
    ray.shutdown()


@pytest.fixture
def reported(monkeypatch) -> list[str]:
    """What Ray reports as unhandled errors (the "Unhandled error" lines of stderr)."""
    ray = pytest.importorskip("ray")
    texts: list[str] = []
    monkeypatch.setattr(
        ray._private.worker, "_unhandled_error_handler", lambda err: texts.append(str(err))
    )
    return texts
