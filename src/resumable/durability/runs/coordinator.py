"""RecoveryCoordinator: a run loaded, verified and folded (:mod:`.recovery`), then resumed.

The loading is :class:`~.recovery.RunLoader`'s, below the session; resuming opens a
:class:`~.session.RunSession` on the run and drives it with its kind's driver.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from resumable.config import Config
from resumable.durability.runs.kinds import resume_session as drive
from resumable.durability.runs.recovery import RunLoader
from resumable.durability.runs.session import RunOutcome, RunSession


class RecoveryCoordinator(RunLoader):
    """Load, verify and fold a run; restore and resume it."""

    async def resume(
        self,
        run_id: str,
        config: Config,
        *,
        env: Mapping[str, str],
        force: bool = False,
        accept_loss: bool = False,
        **options: Any,
    ) -> RunOutcome:
        """Continue a run from its latest checkpoint until it ends or waits again.

        ``force`` gives one more attempt to a run that used its ``max_attempts``.
        """
        session = await RunSession.attach(
            self.store, config, run_id, env=env, force=force, accept_loss=accept_loss
        )
        try:
            return await drive(session, config, env=env, **options)
        finally:
            await session.close()
