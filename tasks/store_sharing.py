"""The Store's records of how a pool is shared between batches and teams (tasks/fair_share.py,
docs/architecture.md "Sharing"): the chunks of each batch not yet given to the broker, the
chunks given out and not finished, the pools' running batches and their passes, and the worker
slots each pool has."""

from __future__ import annotations

from tasks.store_base import StoreBase


class Sharing(StoreBase):
    pass
