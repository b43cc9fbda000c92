"""Transition batches: ``(o_t, a_t, R^n_t, o_{t+m})`` with n-step returns, as numpy columns."""

from __future__ import annotations

import numpy as np

from episodes.replay.nested import is_records, take_rows, unpack_batch
from episodes.replay.nstep import (
    gathers_leaves,
    n_step_returns,
    nest,
    next_leaves,
    next_observations,
    take_leaves,
)
from episodes.replay.sampling import add_extras
from episodes.replay.store import StepStore, fresh_infos
from episodes.replay.table import EpisodeTable

__all__ = ["transition_batch"]


def transition_batch(
    store: StepStore,
    table: EpisodeTable,
    slots: np.ndarray,
    n: np.ndarray,
    gamma: float,
    include_infos: bool,
    include_extra_model_outputs: bool,
) -> dict[str, np.ndarray]:
    """The batch of the given slots.

    Columns: ``obs``, ``actions``, ``rewards`` (the discounted sum over the ``n_step`` steps
    taken), ``next_obs`` (the observation after them), ``terminateds``, ``truncateds``,
    ``n_step`` (steps taken: fewer than asked where the stored episode ends first),
    ``discounts`` (``gamma ** n_step``; the bootstrap target is
    ``rewards + discounts * ~terminateds * V(next_obs)``: ``1 - terminateds`` fails on a torch
    bool tensor and is float64 in numpy) and ``indices`` (stable item
    ids for ``update_priorities``); ``infos`` (of ``next_obs``) and every extra-model-output
    (at ``o_t``) on request.

    Example:
        >>> from episodes.replay.table import EpisodeTable
        >>> store, table = StepStore(), EpisodeTable()
        >>> row = table.open("a", t_begin=0, final_obs=np.full((1, 1), 3.0), final_info={})
        >>> table.terminated[row] = True
        >>> store.reserve(3)
        >>> rows = {"obs": np.arange(3.0)[:, None], "actions": np.zeros(3), "rewards": np.ones(3)}
        >>> _ = store.append(rows, {}, [{}] * 3, ep_row=row, t0=0, prev_slot=-1)
        >>> b = transition_batch(store, table, np.array([1]), np.array([3]), 0.5, False, False)
        >>> b["rewards"].tolist(), b["n_step"].tolist(), b["terminateds"].tolist()
        ([1.5], [2], [True])
    """
    if store.obs is None or store.actions is None:  # callers check: this is no user error
        raise RuntimeError("transition_batch needs a store with columns")
    res = n_step_returns(store, table, slots, n, gamma)
    with np.errstate(over="ignore", under="ignore"):  # past float32 max: inf, quietly
        rewards = res.rewards.astype(np.float32)
        discounts = np.power(gamma, res.steps).astype(np.float32)  # below float32's range: 0
    dtype = store.obs.data.dtype
    if gathers_leaves(store, table):  # big records (images): each leaf gathered once
        obs = nest(dtype, take_leaves(store.obs.data, slots))
        next_obs = nest(dtype, next_leaves(store, table, res.last))
    else:
        obs, next_obs = take_rows(store.obs.data, slots), next_observations(store, table, res.last)
    batch: dict[str, np.ndarray] = {
        "obs": obs,
        "actions": take_rows(store.actions.data, slots),
        "rewards": rewards,
        "next_obs": next_obs,
        "terminateds": res.terminated,
        "truncateds": res.truncated,
        "n_step": res.steps,
        "discounts": discounts,
        "indices": store.uid[slots],
    }
    if include_infos:
        nxt = store.nxt[res.last]
        infos = store.read_infos(np.maximum(nxt, 0))
        ends = nxt < 0
        infos[ends] = table.final_info[store.ep[res.last[ends]]]
        batch["infos"] = fresh_infos(infos)
    nested = dtype.names is not None or store.actions.data.dtype.names is not None
    if include_extra_model_outputs:
        extras = {key: take_rows(column.data, slots) for key, column in store.extras.items()}
        add_extras(batch, extras, reserved=("weights",))
        nested = nested or any(is_records(values) for values in extras.values())
    if nested:  # nested observations, actions or extras: given back nested
        unpack_batch(batch)
    return batch
