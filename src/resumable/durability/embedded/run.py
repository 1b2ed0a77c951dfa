"""Open a run by id from any program: start it, or attach to it where it stopped.

``open_run("r1", store=".resumable", program="my-agent")`` starts run ``r1`` if the
store has none, attaches to it (taking its lease, folding its log) if it exists
unfinished, and reports it without running anything if it already finished. The run
belongs to ``program``: opening it under another name is refused, naming both.

Everything the run writes goes through one :class:`~resumable.durability.embedded.loop.LoopThread`
(the store is async; the embedding program need not be), and is durable before the
call that wrote it returns.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

from resumable.config import Config, load_config
from resumable.durability.capture.snapshot import Snapshotter
from resumable.durability.embedded.boundary import host_facing
from resumable.durability.embedded.executor import DurableExecutor
from resumable.durability.embedded.journal import HostJournal
from resumable.durability.embedded.llm import DurableLLM, DurableStream
from resumable.durability.embedded.loop import LoopThread
from resumable.durability.log import hashseed
from resumable.durability.log.run_state import FrameState, RunState
from resumable.durability.runs.coordinator import RecoveryCoordinator
from resumable.durability.runs.kinds import register_driver
from resumable.durability.runs.owners import dead_here, owner_name
from resumable.durability.runs.session import RunOutcome, RunSession, codec_for, store_for
from resumable.errors import RunBusyError, RunNotFoundError, UsageError
from resumable.store.base import CheckpointStore, RunMeta
from resumable.store.common import check_run_id
from resumable.store.urls import parse_store_url

_log = logging.getLogger("resumable")
_SETS_MOVED = "may iterate in another order than before the resume"
"""How set_order's warning starts (a set restored with another table than it had)."""

R = TypeVar("R")

KIND = "embedded"
"""The kind of runs opened through this API (``resumable runs`` shows it)."""


@dataclass(frozen=True, slots=True)
class RunInfo:
    """Where a run stands: ``status`` is running, completed or failed."""

    run_id: str
    program: str
    status: str
    result: Any = None
    error: str | None = None
    resumed: bool = False


def store_settings(store: str | os.PathLike[str]) -> dict[str, str]:
    """The ``[durability]`` settings naming a store: a folder, ``sqlite:``, postgres, redis."""
    kind, options = parse_store_url(os.fspath(store))
    if kind == "file":
        return {"store": kind, "path": str(Path(options["path"]).absolute()), "url": ""}
    if kind == "sqlite":  # the file, absolute: a relative setting would resolve elsewhere
        parts = urlsplit(options["url"])
        path = unquote(parts.netloc + parts.path)
        path = path[1:] if path.startswith("//") else path
        return {"store": kind, "path": str(Path(path).absolute()), "url": ""}
    return {"store": kind, "path": "", "url": options["url"]}


@host_facing
def open_run(
    run_id: str,
    *,
    store: str | os.PathLike[str] = ".resumable",
    program: str = "embedded",
    config: Config | None = None,
    env: Mapping[str, str] | None = None,
    create: bool = True,
) -> DurableRun:
    """Start run ``run_id``, or attach to it if it exists unfinished (see the module doc).

    ``create=False`` only attaches: an unknown run id raises RunNotFoundError.
    """
    if not run_id or not isinstance(run_id, str):
        raise UsageError(f"run id {run_id!r} is not a run id: give a non-empty string")
    check_run_id(run_id)  # a line break or a control character: refused before any store
    environ = dict(os.environ if env is None else env)
    base = config if config is not None else load_config(env=environ)
    settings = dataclasses.replace(base.durability, **store_settings(store))  # type: ignore[arg-type]
    config = dataclasses.replace(base, durability=settings)
    run = DurableRun(run_id, program, config, environ, create=create)
    try:
        run.loop.call(run._open())
    except BaseException:
        run.loop.call(run._close_store())
        run.loop.stop()
        raise
    return run


class DurableRun:
    """A run opened by :func:`open_run`; close it (or use ``with``) when done."""

    def __init__(
        self, run_id: str, program: str, config: Config, env: dict[str, str], *, create: bool = True
    ) -> None:
        self.run_id = run_id
        self._create = create
        self.program = program
        self.config = config
        self.env = env
        self.loop = LoopThread(f"resumable {run_id}")
        self.session: RunSession | None = None
        self.state = RunState()
        self.resumed = False
        self._store: CheckpointStore | None = None
        self._snapshotter = Snapshotter(blob_threshold=config.durability.blob_threshold_bytes)
        self._blobs: dict[str, bytes] = {}
        self._journals: dict[str, HostJournal] = {}
        self._closed = False
        self._executor: DurableExecutor | None = None

    # -- opening ---------------------------------------------------------------------------
    async def _open(self) -> None:
        store = store_for(self.config.durability, self.config)
        await store.__aenter__()
        self._store = store
        try:
            meta: RunMeta | None = await store.get_meta(self.run_id)
        except RunNotFoundError:
            if not self._create:
                raise
            meta = None
        settings = self.config.durability
        if meta is None:
            first = {"program": self.program, "kind": KIND, "source": ""}
            new = RunMeta(self.run_id, program=self.program, kind=KIND)
            try:
                self.session = await RunSession.create(store, self.config, new, first, env=self.env)
            except UsageError:
                await self._refuse_if_opened_meanwhile(store)
                raise
            self.state = self.session.state
            return
        if meta.kind != KIND or meta.program != self.program:
            raise UsageError(
                f"run {self.run_id} belongs to {meta.kind} program {meta.program!r}, not to "
                f"{self.program!r}; open it from {meta.program!r} or choose another run id",
                run_id=self.run_id,
            )
        self.resumed = True
        if meta.status in ("completed", "failed"):
            codec = await codec_for(store, settings, self.env)
            self.state = (await RecoveryCoordinator(store, codec).load(self.run_id)).state
            await self._preload(lambda d: store.get_blob(self.run_id, d), codec.open_blob)
            return
        try:
            # Warned about only if the restored state holds a set the seed orders (see restore).
            session = await RunSession.attach(
                store, self.config, self.run_id, env=self.env, hash_warning=False
            )
        except UsageError:
            await self._refuse_if_opened_meanwhile(store, meta)
            raise
        self.session, self.state = session, session.state
        if session.state.status in ("completed", "failed"):  # only the meta missed it
            await session.set_status(session.state.status, session.state.detail)  # type: ignore[arg-type]
        for frame in list(session.state.frames.values()):
            if frame.frame_id.startswith("host:"):
                await session.restore_frame(frame, {})

    async def _refuse_if_opened_meanwhile(
        self, store: CheckpointStore, meta: RunMeta | None = None
    ) -> None:
        """Two processes opening one new id at once: the one that did not create the run
        is told it is busy (RunBusyError), never that it exists or has no records."""
        try:
            meta = await store.get_meta(self.run_id) if meta is None else meta
        except RunNotFoundError:
            return
        live = meta.owner and meta.owner != owner_name() and not dead_here(meta.owner)
        if live and meta.status in ("waiting", "running"):
            raise RunBusyError(
                f"run {self.run_id} is being opened by {meta.owner}; open it again once that "
                "process is done with it",
                run_id=self.run_id,
                owner=meta.owner,
            ) from None

    async def _preload(self, get: Any, open_blob: Callable[[str, str, bytes], bytes]) -> None:
        for frame in self.state.frames.values():
            for digest in frame.journal_blobs():
                self._blobs[digest] = open_blob(self.run_id, digest, await get(digest))

    # -- where it stands -------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        """True once the run completed or failed: nothing of it runs again."""
        return self.state.status in ("completed", "failed")

    @property
    def status(self) -> str:
        return self.state.status

    @property
    def result(self) -> Any:
        """What :meth:`complete` recorded (None until then)."""
        entry = self.state.frames.get("host:result")
        if entry is None or 0 not in entry.journal:
            return None
        return self.load_value(entry.journal[0].value, {})  # type: ignore[arg-type]

    @property
    def error(self) -> str | None:
        """What :meth:`fail` recorded."""
        if self.state.status != "failed":
            return None
        return str(self.state.detail.get("error", ""))

    def info(self) -> RunInfo:
        return RunInfo(
            self.run_id, self.program, self.status, self.result, self.error, self.resumed
        )

    # -- what the run does -----------------------------------------------------------------
    def executor(self, *, tools: Mapping[str, Callable[..., Any]] | None = None) -> DurableExecutor:
        """The run's code executor (frame ``main``), with ``tools`` bound as steps."""
        if self._executor is not None:
            raise UsageError(
                f"run {self.run_id} has its executor already: keep the first one "
                "(a second would feed the same frame from the start)",
                run_id=self.run_id,
            )
        self._executor = DurableExecutor(self, tools=tools)
        return self._executor

    def llm(self, call: Callable[..., R], *, name: str = "llm") -> DurableLLM[R]:
        """``call`` (any function or client method returning a whole response), journaled."""
        return DurableLLM(self, call, name=name)

    def llm_stream(self, call: Callable[..., Iterable[str]], *, name: str = "llm") -> DurableStream:
        """A streaming ``call`` (it takes ``prefix=``), journaled chunk by chunk."""
        return DurableStream(self, call, name=name)

    def journal(self, kind: str) -> HostJournal:
        """The journal of the embedding program's calls of one kind (one per run and kind)."""
        journal = self._journals.get(kind)
        if journal is None:
            journal = self._journals[kind] = HostJournal(self, kind)
        return journal

    @host_facing
    def complete(self, result: Any = None) -> None:
        """Record the run's result and mark it completed."""
        session = self.session_or_fail()
        body, blobs = self.journal("result").body("result", result, {})
        self.write([("await", "host:result", body)], blobs)
        self.loop.call(session.set_status("completed", {"result": repr(result)[:2000]}))

    @host_facing
    def fail(self, message: str) -> None:
        """Mark the run failed with ``message``; a failed run is never run again."""
        self.loop.call(self.session_or_fail().set_status("failed", {"error": message}))

    # -- plumbing for journals and executors ---------------------------------------------------
    def session_or_fail(self) -> RunSession:
        if self.session is None or self.finished:
            raise UsageError(
                f"run {self.run_id} is {self.status}: nothing of it runs again; "
                "read its result, or open a new run id",
                run_id=self.run_id,
            )
        return self.session

    def state_frame(self, frame_id: str) -> FrameState | None:
        return self.state.frames.get(frame_id)

    def write(
        self, records: list[tuple[str, str, dict[str, Any]]], blobs: Mapping[str, bytes]
    ) -> None:
        """Make ``records`` durable together (after ``blobs``); returns once they are."""
        manager = self.session_or_fail().manager

        async def write() -> None:
            await manager.put_blobs(blobs)
            await manager.write_together(records)

        self.loop.call(write())

    def load_value(self, data: bytes, ns: dict[str, Any]) -> Any:
        if self.session is not None:
            load: Callable[[str], bytes] = self.session.manager.load_blob_sync
            return self.session.snapshotter.loads_value(data, load_blob=load, ns=ns)
        return self._snapshotter.loads_value(data, load_blob=self._blobs.__getitem__, ns=ns)

    def restore(self, frame: FrameState, into: dict[str, Any]) -> None:
        """Fill ``into`` with a code frame's namespace at its last finished statement."""
        session = self.session_or_fail()
        if session.hash_mismatch is None:
            self.loop.call(session.restore_frame(frame, into))
            return
        # This process hashes strings otherwise: a set of them may iterate in another order,
        # which the seed explains. Said once, in one line with the fix (how the program is
        # started), and only when the state holds such a set.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.loop.call(session.restore_frame(frame, into))
        for found in caught:
            if _SETS_MOVED not in str(found.message):
                warnings.warn_explicit(found.message, found.category, found.filename, found.lineno)
        if hashseed.holds_hashed_set(into.values()):
            _log.warning("resumable: run %s: %s", self.run_id, session.hash_mismatch)
            session.hash_mismatch = None

    # -- closing -------------------------------------------------------------------------------
    @host_facing
    def close(self) -> None:
        """Flush, give the run up (it stays resumable unless it finished) and stop the loop."""
        if self._closed:
            return
        self._closed = True
        if self._executor is not None:
            self._executor.close()  # its loop: the code's tasks end with the run's process
        try:
            if self.session is not None:
                self.loop.call(self.session.close())
        finally:
            self.loop.call(self._close_store())
            self.loop.stop()

    async def _close_store(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            await store.__aexit__(None, None, None)

    def __enter__(self) -> DurableRun:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


async def resume_embedded(
    session: RunSession, config: Config, *, env: Mapping[str, str], **_: Any
) -> RunOutcome:
    """``resumable resume`` of an embedded run: finished, it is reported; else refused.

    Its code needs the tools and the model of the program that opened it, so only that
    program can continue it - by opening the same run id again.
    """
    state = session.state
    if state.status in ("completed", "failed"):
        await session.set_status(state.status, state.detail)  # type: ignore[arg-type]
        code = 0 if state.status == "completed" else 1
        return RunOutcome(session.run_id, state.status, code, str(state.detail.get("error", "")))
    raise UsageError(
        f"run {session.run_id} belongs to program {state.program!r}, which runs it through "
        f"resumable.open_run: run that program again with run id {session.run_id!r} to resume "
        "it (this command cannot supply its tools and model); nothing was changed",
        run_id=session.run_id,
    )


register_driver(KIND, resume_embedded)
