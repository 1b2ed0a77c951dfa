"""The store a crash test's runs live in: each test that asks for ``site`` runs on all four."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from tests.crash.damage import SITES, Site

KINDS = [
    "file",
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]


@pytest.fixture(params=KINDS)
async def site(request: pytest.FixtureRequest) -> AsyncIterator[Site]:
    """A folder whose ``playbooks.toml`` points at the store (a fresh schema or key prefix
    on a server), removed afterwards."""
    made: Site = SITES[request.param]()
    yield made
    await made.cleanup()
