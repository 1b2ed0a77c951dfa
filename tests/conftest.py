"""In-process tests fsync inline unless they start an fsync helper themselves
(``tests.fsync_helper.own_helper``): a helper started once a test's run reached its
boundaries would serve the tests after it, whose ``os.fsync`` it does not see."""

from __future__ import annotations

import sys

import pytest

from resumable.store.filesystem import background_fsync


@pytest.fixture(autouse=True)
def _no_shared_fsync_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(background_fsync, "START_AFTER", sys.maxsize)
