"""A store that fails under a live run stops it; the program never sees the error.

Real processes on a real full disk (a small tmpfs) and a store made unwritable mid-run
(``chattr +i``: root ignores permission bits), with a program that wraps every await in
``try/except Exception`` as generated code often does: the run stops ``interrupted`` with
exit 75 and the reason, nothing of it runs while the store still fails, and once the store
works `resume` finishes it with every effect booked once (the effect in flight when the
store failed may be booked again, under the same idempotency key, as after a kill).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from tests.crash.damage import POSTGRES_URL, REDIS_URL, SITES
from tests.crash.harness import resumable, start

STATEMENTS = 40


def _program(statements: int, block: int) -> str:
    lines = [
        "import asyncio, os",
        "import resumable",
        "LEDGER = os.environ['LEDGER']",
        "",
        "@resumable.step",
        "async def book(i):",
        "    await asyncio.sleep(float(os.environ.get('BOOK_DELAY', '0')))",
        "    with open(LEDGER, 'a') as ledger:",
        "        ledger.write(f'{resumable.idempotency_key()} {i}\\n')",
        "    return i",
        "",
        "done = []",
        "blocks = []",
    ]
    for i in range(statements):
        lines += [
            "try:",
            f"    done.append(await book({i}))",
            "except Exception as exc:",
            "    print('the program caught', type(exc).__name__, exc)",
            f"blocks.append(os.urandom({block}))",
        ]
    lines.append("print('done', len(done), sum(done), len(blocks))")
    return "\n".join(lines) + "\n"


def _env(work: Path, kind: str, store: Path, **extra: str) -> dict[str, str]:
    env = {"LEDGER": str(work / "ledger.txt"), **extra}
    if kind == "sqlite":
        return {
            **env,
            "RESUMABLE_DURABILITY_STORE": "sqlite",
            "RESUMABLE_DURABILITY_PATH": str(store / "runs.db"),
        }
    return {**env, "RESUMABLE_DURABILITY_PATH": str(store)}


def _sh(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=False)


@contextlib.contextmanager
def _tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    mounted = _sh("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where))
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}); needs root")
    try:
        yield where
    finally:
        _sh("umount", "-l", str(where))


def _status(work: Path, env: dict[str, str], run_id: str) -> str:
    listed = resumable(["runs", "--json"], work, env=env)
    assert listed.code == 0, listed.stderr
    (row,) = [r for r in json.loads(listed.stdout) if r["run_id"] == run_id]
    return str(row["status"])


def _booked_once(work: Path, statements: int) -> None:
    """Every effect booked, each once; a repeat only of the same line (same key)."""
    lines = (work / "ledger.txt").read_text().splitlines()
    keys = {line.split()[0]: line.split()[1] for line in lines}
    assert sorted(int(i) for i in keys.values()) == list(range(statements))
    assert len(lines) - len(set(lines)) <= 1, lines


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_a_full_disk_stops_the_run_and_resume_finishes_it(tmp_path: Path, kind: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "fill.py").write_text(_program(STATEMENTS, 30_000))
    with _tmpfs(tmp_path / "store", "1m") as store:
        env = _env(work, kind, store)
        stopped = resumable(["exec", "fill.py", "--run-id", "full"], work, env=env)
        assert stopped.code == 75, stopped.stderr
        assert "the program caught" not in stopped.stdout  # the store's error never reached it
        assert "run full interrupted: the store's disk is full:" in stopped.stderr
        assert "free space and `resumable resume full`" in stopped.stderr
        assert _status(work, env, "full") == "interrupted"
        booked = (work / "ledger.txt").read_text()

        again = resumable(["resume", "full"], work, env=env)  # the disk is still full
        assert again.code == 75, again.stderr
        assert "the store's disk is full" in again.stderr
        assert (work / "ledger.txt").read_text() == booked  # nothing ran that it cannot record

        assert _sh("mount", "-o", "remount,size=1g", str(store)).returncode == 0
        done = resumable(["resume", "full"], work, env=env)
        assert done.code == 0, done.stderr
        assert f"done {STATEMENTS} {sum(range(STATEMENTS))} {STATEMENTS}" in done.stdout
        assert "the program caught" not in done.stdout
        assert _status(work, env, "full") == "completed"
    _booked_once(work, STATEMENTS)


def _immutable(store: Path, on: bool) -> None:
    """Everything of the store unwritable, but SQLite's shared-memory file: it is mapped,
    and a mapped write to an immutable file kills the process with SIGBUS."""
    flag = "+i" if on else "-i"
    paths = [p for p in store.rglob("*") if not p.name.endswith("-shm")] + [store]
    changed = _sh("chattr", flag, *map(str, paths))
    if changed.returncode != 0:
        pytest.skip(f"cannot make {store} unwritable with chattr ({changed.stderr.strip()})")


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_a_store_made_unwritable_mid_run_stops_it_until_it_is_writable(
    tmp_path: Path, kind: str
) -> None:
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    work = tmp_path / "work"
    work.mkdir()
    (work / "slow.py").write_text(_program(12, 70_000))
    store = tmp_path / "store"
    env = _env(work, kind, store, BOOK_DELAY="0.3")
    process = start(["exec", "slow.py", "--run-id", "ro"], work, env=env)
    ledger = work / "ledger.txt"
    try:
        deadline = time.monotonic() + 60
        while not ledger.exists() or len(ledger.read_text().splitlines()) < 3:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the run never booked 3 effects"
            time.sleep(0.02)
        _immutable(store, True)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        _immutable(store, False) if store.exists() else None
    assert process.returncode == 75, stderr
    assert "the program caught" not in stdout
    if kind == "file":
        assert "run ro interrupted: the store cannot be written:" in stderr
        assert "make it writable and `resumable resume ro`" in stderr
    else:  # SQLite says only "disk I/O error" of a write the system refused
        assert "run ro interrupted: the store failed:" in stderr
        assert "disk I/O error; fix it and `resumable resume ro`" in stderr
    # the store took no note of the stop: listed as a run whose process went away
    assert _status(work, env, "ro") in ("interrupted", "crashed")

    done = resumable(["resume", "ro"], work, env=env)
    assert done.code == 0, done.stderr
    assert "done 12 66 12" in done.stdout
    _booked_once(work, 12)


class _Proxy:
    """A TCP forwarder to a server: stopping it cuts every connection and refuses new ones
    (a server gone away, as the run sees it); it starts again on the same port."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._listener: socket.socket | None = None
        self._open: list[socket.socket] = []

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen()
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):  # wakes the accept() blocked on it
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        for sock in self._open:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self._open.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            self._open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ],
)
def test_a_server_that_goes_away_stops_the_run_until_it_is_back(tmp_path: Path, kind: str) -> None:
    site = SITES[kind]()
    real = urlsplit(POSTGRES_URL if kind == "postgres" else REDIS_URL)
    proxy = _Proxy((real.hostname or "127.0.0.1", real.port or 0))
    proxy.start()
    config = site.config().replace(f"{real.hostname}:{real.port}", f"127.0.0.1:{proxy.port}")
    assert str(proxy.port) in config
    work = tmp_path / "work"
    work.mkdir()
    (work / "playbooks.toml").write_text(config)
    (work / "slow.py").write_text(_program(12, 1000))
    env = {"LEDGER": str(work / "ledger.txt"), "BOOK_DELAY": "0.3"}
    process = start(["exec", "slow.py", "--run-id", "gone"], work, env=env)
    ledger = work / "ledger.txt"
    try:
        deadline = time.monotonic() + 60
        while not ledger.exists() or len(ledger.read_text().splitlines()) < 3:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the run never booked 3 effects"
            time.sleep(0.02)
        proxy.stop()
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 75, stderr
        assert "the program caught" not in stdout
        assert "run gone interrupted: the store cannot be reached:" in stderr
        assert "bring it back and `resumable resume gone`" in stderr
        booked = ledger.read_text()
        again = resumable(["resume", "gone"], work, env=env)  # still gone: nothing runs
        assert again.code != 0
        assert ledger.read_text() == booked
        proxy.start()
        done = resumable(["resume", "gone"], work, env=env, timeout=120)
        assert done.code == 0, done.stderr
        assert "done 12 66 12" in done.stdout
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        proxy.stop()
        asyncio.run(site.cleanup())
    _booked_once(work, 12)
