"""What Ray reports as unhandled errors, for the tests that check the group reads every reply.

Ray reports an error it never handed to anyone when the reference goes away: a canary dropped
unread after everything the test did tells when all earlier reports are in.
"""

from __future__ import annotations

import gc
import time
from typing import Any

import pytest

ray = pytest.importorskip("ray")


@ray.remote(num_cpus=0)
class Canary:
    def fail(self) -> None:
        raise ValueError("canary")

    def ping(self) -> None:
        pass


def reported_besides_a_canary(reported: list[str], canary: Any = None) -> list[str]:
    """Ray's reports once a canary dropped unread after everything before was reported.

    (Waiting on a reference counts as reading it: the actor's next call tells the canary's is
    done.) ``canary``: an actor to reuse, else one made and killed here.
    """
    gc.collect()
    own = canary is None
    actor = Canary.remote() if own else canary
    for _ in range(60):
        ref = actor.fail.remote()
        ray.get(actor.ping.remote())
        del ref
        for _ in range(5):
            if any("canary" in text for text in reported):
                break
            time.sleep(0.1)
        if any("canary" in text for text in reported):
            break
    if own:
        ray.kill(actor)
    assert any("canary" in text for text in reported)  # the reports were captured
    return [text for text in reported if "canary" not in text]
