"""The store a crash test's runs live in: each test that asks for ``site`` runs on all four
(a grid of cases takes its stores from ``tests.crash.damage.across_stores`` instead)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from tests.crash.damage import KINDS, SITES, Site


@pytest.fixture(params=KINDS)
async def site(request: pytest.FixtureRequest) -> AsyncIterator[Site]:
    """A folder whose ``playbooks.toml`` points at the store (a fresh schema or key prefix
    on a server), removed afterwards."""
    made: Site = SITES[request.param]()
    yield made
    await made.cleanup()
