"""Encryption at rest, end to end, on every store.

With ``[durability] encrypt = true`` no plaintext of a secret the program holds may
reach the store's files, tables or keys; listing, show, fork, gc and resume must
behave exactly as on a plain run; a wrong or missing key is one clear line that
changes nothing; records and blobs moved between runs or positions are refused.
The commands run in this process (typer's runner): only the crash tests need a
process of their own.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import pytest
from typer.testing import CliRunner

from resumable.cli.commands import app
from resumable.config import load_config
from resumable.durability.log.crypto import generate_key
from resumable.durability.log.records import HEADER_BYTES, Record
from resumable.durability.runs.session import codec_for
from resumable.store import open_store
from resumable.store.base import CheckpointStore, RunMeta, StoredRecord

POSTGRES_URL = os.environ.get(
    "RESUMABLE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("RESUMABLE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
KINDS = [
    "file",
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

SECRET = "tr0ub4dor-" + "x" * 10
SECRET_SOURCE = '"tr0ub4dor-" + "x" * 10'
"""The secret as the program's source spells it: only the run's first record holds it."""
SECRET_SCRIPT = f"""\
import asyncio
import hashlib

SECRET = {SECRET_SOURCE}


async def vault(name):
    await asyncio.sleep(0)
    return "tok-" + hashlib.sha256((name + SECRET).encode()).hexdigest()[:24]


async def refuse(value):
    await asyncio.sleep(0)
    raise PermissionError("refused " + value)


token = await vault("db")
rows = "".join(f"{{i:06d}}:{{SECRET}}|" for i in range(4000))
keep = {{"password": SECRET, "token": token}}
try:
    await refuse(token)
except PermissionError as exc:
    why = str(exc)
checks = [await vault(str(i)) for i in range(3)]
print("stored", len(rows), len(keep), len(why), len(checks))
"""
TOKEN = "tok-" + hashlib.sha256(("db" + SECRET).encode()).hexdigest()[:24]
"""What the script's first awaited call returns (computed, never written in the source)."""
BLOB_ROW = f"003999:{SECRET}|"
"""Only in the string that is over the blob threshold, so only in its blob."""
SECRET_OUTPUT = f"stored {len(BLOB_ROW) * 4000} 2 {len('refused ' + TOKEN)} 3\n"
ANSWER = "a widget, code " + SECRET[::-1]
"""A human's answer to a waiting playbook: the ``answer`` record and what follows it."""

LEDGER_SCRIPT = """\
import asyncio


async def fetch(n):
    await asyncio.sleep(0)
    return {"n": n, "square": n * n}


squares = []
for i in range(4):
    item = await fetch(i)
    squares.append(item["square"])
    print("fetched", i, item["square"])
label = "sum=" + str(sum(squares))
print(label)
last = await fetch(9)
pair = (label, last["square"])
print("last", pair)
"""


# -- store locations ------------------------------------------------------------------


@dataclass
class Location:
    """One fresh store location, the environment that selects it, and a way to read it raw."""

    kind: str
    env: dict[str, str]
    folder: Path | None = None
    schema: str = ""
    prefix: str = ""

    def open(self) -> CheckpointStore:
        settings = load_config(None, env=self.env).durability
        return open_store(settings.store, path=settings.path, url=settings.url, sync="flush")

    def dump(self) -> list[tuple[str, bytes]]:
        """Every byte string the store holds: files, every column of every row, keys and values."""
        if self.folder is not None:
            return [
                (str(path), path.read_bytes())
                for path in sorted(self.folder.rglob("*"))
                if path.is_file()
            ]
        if self.schema:
            return asyncio.run(_dump_postgres(self.schema))
        return asyncio.run(_dump_redis(self.prefix))


async def _dump_postgres(schema: str) -> list[tuple[str, bytes]]:
    import asyncpg

    conn = await asyncpg.connect(POSTGRES_URL, timeout=10)
    try:
        tables = await conn.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", schema
        )
        found: list[tuple[str, bytes]] = []
        for (table,) in tables:
            for row in await conn.fetch(f'SELECT * FROM "{schema}"."{table}"'):
                for column, value in row.items():
                    data = value if isinstance(value, bytes) else str(value).encode()
                    found.append((f"{table}.{column}", data))
        assert {"runs", "records", "blobs", "snapshots"} <= {t for (t,) in tables}
        return found
    finally:
        await conn.close()


async def _dump_redis(prefix: str) -> list[tuple[str, bytes]]:
    import redis.asyncio as aioredis

    client: Any = aioredis.Redis.from_url(REDIS_URL)  # untyped here: values are bytes
    found: list[tuple[str, bytes]] = []
    try:
        async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            found.append(("key", key))
            kind = (await client.type(key)).decode()
            values: list[bytes]
            if kind == "string":
                values = [await client.get(key)]
            elif kind == "hash":
                values = [part for pair in (await client.hgetall(key)).items() for part in pair]
            elif kind == "list":
                values = await client.lrange(key, 0, -1)
            elif kind == "set":
                values = list(await client.smembers(key))
            elif kind == "zset":
                values = [member for member, _ in await client.zrange(key, 0, -1, withscores=True)]
            elif kind == "stream":
                values = [
                    part
                    for _, fields in await client.xrange(key)
                    for pair in fields.items()
                    for part in pair
                ]
            else:
                raise AssertionError(
                    f"Redis key {key!r} has a type this dump does not read: {kind}"
                )
            found.extend((key.decode(), value) for value in values)
        return found
    finally:
        await client.aclose()


async def _drop_postgres(schemas: list[str]) -> None:
    import asyncpg

    conn = await asyncpg.connect(POSTGRES_URL, timeout=10)
    try:
        for schema in schemas:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


async def _drop_redis(prefixes: list[str]) -> None:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        for prefix in prefixes:
            keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
            if keys:
                await client.delete(*keys)
    finally:
        await client.aclose()


@dataclass
class Locations:
    """Makes fresh locations of one store kind and removes the server-side ones afterwards."""

    kind: str
    root: Path
    made: list[Location] = field(default_factory=list)

    def new(self) -> Location:
        tag = secrets.token_hex(5)
        env = {"RESUMABLE_DURABILITY_STORE": self.kind, "RESUMABLE_DURABILITY_SYNC": "flush"}
        if self.kind in ("file", "sqlite"):
            folder = self.root / f"store-{tag}"
            folder.mkdir()
            target = folder / ("runs" if self.kind == "file" else "runs.db")
            env["RESUMABLE_DURABILITY_PATH"] = str(target)
            location = Location(self.kind, env, folder=folder)
        elif self.kind == "postgres":
            schema = f"resumable_enc_{tag}"
            env["RESUMABLE_DURABILITY_URL"] = f"{POSTGRES_URL}?schema={schema}"
            location = Location(self.kind, env, schema=schema)
        else:
            prefix = f"resumable-enc-{tag}"
            env["RESUMABLE_DURABILITY_URL"] = f"{REDIS_URL}?prefix={prefix}"
            location = Location(self.kind, env, prefix=prefix)
        self.made.append(location)
        return location

    def remove(self) -> None:
        if self.kind == "postgres":
            asyncio.run(_drop_postgres([loc.schema for loc in self.made]))
        elif self.kind == "redis":
            asyncio.run(_drop_redis([loc.prefix for loc in self.made]))


@pytest.fixture(params=KINDS)
def locations(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Locations]:
    """Fresh locations of each store kind; commands run in a folder of their own."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (work / "secret.py").write_text(SECRET_SCRIPT, encoding="utf-8")
    (work / "ledger.py").write_text(LEDGER_SCRIPT, encoding="utf-8")
    shutil.copytree(EXAMPLES / "approval", work / "approval")
    made = Locations(request.param, tmp_path)
    try:
        yield made
    finally:
        made.remove()


# -- running the command ------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str

    def error_line(self) -> str:
        """The one line an error is reported with (exit 2, no traceback)."""
        assert self.code == 2, (self.code, self.stdout, self.stderr)
        assert "Traceback" not in self.stderr, self.stderr
        errors = [line for line in self.stderr.splitlines() if line.startswith("resumable: error:")]
        assert len(errors) == 1, self.stderr
        return errors[0]


def cli(env: dict[str, str], *args: str) -> Outcome:
    """``resumable ARGS`` with exactly ``env`` as the RESUMABLE_* environment."""
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("RESUMABLE_")}
    result = CliRunner().invoke(app, list(args), env={**unset, **env})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Outcome(result.exit_code, result.stdout, result.stderr)


def encrypted(location: Location, key: str, **extra: str) -> dict[str, str]:
    return {
        **location.env,
        "RESUMABLE_DURABILITY_ENCRYPT": "1",
        "RESUMABLE_ENCRYPTION_KEY": key,
        **extra,
    }


def runs_json(env: dict[str, str]) -> list[dict[str, Any]]:
    listed = cli(env, "runs", "--json")
    assert listed.code == 0, listed.stderr
    rows: list[dict[str, Any]] = json.loads(listed.stdout)
    return rows


def fork(env: dict[str, str], run_id: str, at: int) -> str:
    forked = cli(env, "fork", run_id, "--at", str(at))
    assert forked.code == 0, forked.stderr
    return forked.stdout.strip()


# -- no plaintext at rest ------------------------------------------------------------------

NEEDLES = {
    "the secret's value": SECRET.encode(),
    "the secret as the source spells it": SECRET_SOURCE.encode(),
    "a value an awaited call returned": TOKEN.encode(),
    "a string kept as a blob": BLOB_ROW.encode(),
    "a human's answer": ANSWER.encode(),
}


def _write_everything(env: dict[str, str]) -> None:
    """Every kind of record: a script (awaits, an exception, a blob, snapshots), its fork
    resumed, and a playbook that asks, is answered and goes on."""
    done = cli(env, "exec", "secret.py", "--run-id", "secret")
    assert done.code == 0, done.stderr
    assert done.stdout == SECRET_OUTPUT
    records = runs_json(env)[0]["records"]
    fork_id = fork(env, "secret", records // 2)
    resumed = cli(env, "resume", fork_id)
    assert (resumed.code, resumed.stdout) == (0, done.stdout), resumed.stderr
    waiting = cli(env, "run", "approval/approval.pb", "--run-id", "ask", "--no-input")
    assert waiting.code == 3, waiting.stderr
    answered = cli(env, "answer", "ask", ANSWER)
    assert answered.code == 0, answered.stderr
    resumed = cli(env, "resume", "ask", "--no-input")
    assert resumed.code == 3, resumed.stderr
    assert ANSWER in resumed.stdout


def _found(dump: list[tuple[str, bytes]], needle: bytes) -> list[str]:
    return [where for where, data in dump if needle in data]


def test_an_encrypted_store_holds_no_plaintext_of_the_secrets(locations: Locations) -> None:
    location = locations.new()
    # snapshots every few records (kept, so the fork still has record 1 to start from)
    env = encrypted(
        location,
        generate_key(),
        RESUMABLE_DURABILITY_SNAPSHOT_EVERY="4",
        RESUMABLE_DURABILITY_KEEP="100",
    )
    _write_everything(env)
    dump = location.dump()
    assert sum(len(data) for _, data in dump) > len(BLOB_ROW) * 4000  # the blob, sealed
    needles = {
        **NEEDLES,
        "the secret as utf-16": SECRET.encode("utf-16-le"),
        "the secret's stem": b"tr0ub4dor",
    }
    leaks = {name: _found(dump, needle) for name, needle in needles.items()}
    assert leaks == {name: [] for name in needles}


def test_the_same_runs_unencrypted_show_every_secret_to_the_dump(locations: Locations) -> None:
    """The control: the dump reads every place where these values are kept."""
    location = locations.new()
    env = {
        **location.env,
        "RESUMABLE_DURABILITY_SNAPSHOT_EVERY": "4",
        "RESUMABLE_DURABILITY_KEEP": "100",
    }
    _write_everything(env)
    dump = location.dump()
    unseen = [name for name, needle in NEEDLES.items() if not _found(dump, needle)]
    assert unseen == []


# the codec is the same for every store: the file store shows it
@pytest.mark.parametrize("locations", ["file"], indirect=True)
def test_encryption_with_compression_holds_no_plaintext(locations: Locations) -> None:
    location = locations.new()
    env = encrypted(location, generate_key(), RESUMABLE_DURABILITY_COMPRESSION="zlib")
    done = cli(env, "exec", "secret.py", "--run-id", "packed")
    assert done.code == 0, done.stderr
    shown = cli(env, "show", "packed", "--json")
    assert shown.code == 0, shown.stderr
    variables = json.loads(shown.stdout)["frames"][0]["variables"]
    assert variables["token"] == repr(TOKEN)
    assert variables["SECRET"] == repr(SECRET)
    dump = location.dump()
    assert not [name for name, needle in NEEDLES.items() if _found(dump, needle)]
    # compressed before it was encrypted: the blob takes far less room than the string
    assert sum(len(data) for _, data in dump) < len(BLOB_ROW) * 4000 // 2


# -- every operation as on a plain run -------------------------------------------------------


def _stable(view: dict[str, Any], run_ids: dict[str, str]) -> dict[str, Any]:
    """`show --json` without what differs between two identical runs (ids, addresses)."""
    text = json.dumps(view, sort_keys=True)
    for real, alias in run_ids.items():
        text = text.replace(real, alias)
    stable: dict[str, Any] = json.loads(text)
    for frame in stable["frames"]:
        frame["variables"] = {
            name: value for name, value in frame["variables"].items() if " at 0x" not in value
        }
    return stable


def _session(env: dict[str, str]) -> dict[str, Any]:
    """What a user sees of run, list, show, fork, resume and gc on one store."""
    seen: dict[str, Any] = {}
    done = cli(env, "exec", "ledger.py", "--run-id", "orig")
    assert done.code == 0, done.stderr
    seen["exec"] = done.stdout
    (row,) = runs_json(env)
    seen["runs"] = {k: row[k] for k in ("run_id", "program", "kind", "status", "records")}
    shown = cli(env, "show", "orig", "--json")
    assert shown.code == 0, shown.stderr
    seen["show"] = _stable(json.loads(shown.stdout), {})
    at = row["records"] // 2
    earlier = cli(env, "show", "orig", "--at", str(at), "--json")
    assert earlier.code == 0, earlier.stderr
    seen["show_at"] = _stable(json.loads(earlier.stdout), {})
    fork_id = fork(env, "orig", at)
    ids = {fork_id: "FORK"}
    seen["forked"] = sorted(
        (r["run_id"].replace(fork_id, "FORK"), r["status"], r["records"]) for r in runs_json(env)
    )
    resumed = cli(env, "resume", fork_id)
    assert resumed.code == 0, resumed.stderr
    seen["resumed"] = resumed.stdout
    after = cli(env, "show", fork_id, "--json")
    assert after.code == 0, after.stderr
    seen["show_fork"] = _stable(json.loads(after.stdout), ids)
    would = cli(env, "gc", "--older-than-days", "0", "--dry-run", "--json")
    assert would.code == 0, would.stderr
    seen["gc_dry"] = sorted(
        r.replace(fork_id, "FORK") for r in json.loads(would.stdout)["deleted_runs"]
    )
    seen["runs_after_dry"] = len(runs_json(env))
    collected = cli(env, "gc", "--older-than-days", "0", "--json")
    assert collected.code == 0, collected.stderr
    seen["runs_after_gc"] = runs_json(env)
    return seen


def test_encrypted_runs_list_show_fork_resume_and_gc_as_plain_runs(locations: Locations) -> None:
    plain = _session(locations.new().env)
    sealed = _session(encrypted(locations.new(), generate_key()))
    assert sealed == plain
    # and what both show is the run itself, not an empty or broken view
    variables = sealed["show"]["frames"][0]["variables"]
    assert variables["squares"] == "[0, 1, 4, 9]"
    assert variables["pair"] == "('sum=14', 81)"
    assert sealed["show_at"]["seq"] < sealed["show"]["seq"]
    # the fork goes on from the middle: it prints only what came after, and ends the same
    assert sealed["exec"].endswith(sealed["resumed"])
    assert 0 < len(sealed["resumed"]) < len(sealed["exec"])
    assert sealed["show_fork"]["frames"][0]["variables"] == variables
    assert sealed["gc_dry"] == ["FORK", "orig"]
    assert sealed["runs_after_dry"] == 2
    assert sealed["runs_after_gc"] == []


# -- a wrong or missing key --------------------------------------------------------------------


def _raw(location: Location) -> list[tuple[str, bytes]]:
    """The store's content, without the file store's lock files (a read takes its OS lock)."""
    return sorted((w, d) for w, d in location.dump() if not w.endswith("lock"))


def test_a_wrong_or_missing_key_is_one_clear_line_and_changes_nothing(
    locations: Locations,
) -> None:
    location = locations.new()
    key = generate_key()
    env = encrypted(location, key)
    done = cli(env, "exec", "ledger.py", "--run-id", "orig")
    assert done.code == 0, done.stderr
    fork_id = fork(env, "orig", runs_json(env)[0]["records"] // 2)
    before = _raw(location)
    listed = runs_json(env)

    wrong = encrypted(location, generate_key())
    for args in (["resume", fork_id], ["show", "orig"], ["fork", "orig", "--at", "2"]):
        line = cli(wrong, *args).error_line()
        assert "RESUMABLE_ENCRYPTION_KEY" in line, args
        assert "cannot decrypt" in line, args
    missing = {k: v for k, v in env.items() if k != "RESUMABLE_ENCRYPTION_KEY"}
    assert "RESUMABLE_ENCRYPTION_KEY is not set" in cli(missing, "resume", fork_id).error_line()
    own_name = encrypted(location, "", RESUMABLE_DURABILITY_ENCRYPTION_KEY_ENV="ORDERS_KEY")
    assert "ORDERS_KEY is not set" in cli(own_name, "show", "orig").error_line()
    malformed = encrypted(location, "not-a-key")
    line = cli(malformed, "resume", fork_id).error_line()
    assert "RESUMABLE_ENCRYPTION_KEY" in line
    assert "malformed" in line
    assert "not-a-key" not in line  # a key is named by its variable, never shown
    line = cli(location.env, "resume", fork_id).error_line()  # encrypt = false
    assert "is encrypted" in line
    assert "encrypt = true" in line
    assert "RESUMABLE_ENCRYPTION_KEY" in line

    # listing needs no key, and nothing above changed a byte of the store
    assert runs_json(wrong) == listed
    assert _raw(location) == before
    statuses = {row["run_id"]: row["status"] for row in listed}
    assert statuses == {"orig": "completed", fork_id: "crashed"}
    resumed = cli(env, "resume", fork_id)
    assert resumed.code == 0, resumed.stderr
    assert done.stdout.endswith(resumed.stdout)
    assert resumed.stdout


# -- records and blobs moved between runs or positions ---------------------------------------


async def _plant(
    store: CheckpointStore, run_id: str, sealed: list[bytes], blobs: dict[str, bytes]
) -> None:
    """Write sealed bytes as a new run, as anyone with write access to the store could."""
    await store.create_run(RunMeta(run_id, "secret.py", status="running"))
    lease = await store.acquire(run_id, "intruder")
    try:
        records = [StoredRecord(seq, lease.epoch, data) for seq, data in enumerate(sealed, 1)]
        await store.append(run_id, records, lease)
        for digest, data in blobs.items():
            await store.put_blob(run_id, digest, data)
    finally:
        await store.release(lease)


def _rewrap(sealed: bytes, mac_key: bytes, run_id: str, seq: int) -> bytes:
    """The same encrypted body in an envelope that claims another place, with a valid MAC:
    what someone holding the store's MAC key, but not the encryption key, can forge."""
    header = sealed[:2]
    envelope = msgpack.unpackb(sealed[HEADER_BYTES:], raw=False)
    envelope.update(run=run_id, seq=seq)
    payload = msgpack.packb(envelope, use_bin_type=True)
    return header + hmac.new(mac_key, header + payload, hashlib.sha256).digest() + payload


def _rewrap_blob(sealed: bytes, mac_key: bytes, run_id: str, digest: str) -> bytes:
    header, payload = sealed[:2], sealed[HEADER_BYTES:]
    bound = run_id.encode() + b"\0" + digest.encode()
    return header + hmac.new(mac_key, header + bound + payload, hashlib.sha256).digest() + payload


async def _plant_moved_records(
    location: Location, env: dict[str, str]
) -> tuple[dict[str, str], int]:
    """Runs made of the sealed records and blobs of runs ``a`` and ``b``; how each is refused."""
    settings = load_config(None, env=env).durability
    async with location.open() as store:
        codec = await codec_for(store, settings, env)
        mac_key = await store.mac_key()
        a = [r.data for r in (await store.read("a")).records]
        b = [codec.open(r.data) for r in (await store.read("b")).records]
        (digest,) = {d for record in b for d in record.body.get("b") or ()}
        blob_a = await store.get_blob("a", digest)

        def legit(run_id: str) -> list[bytes]:
            """b's records as the runtime itself would seal them for ``run_id``."""
            return [
                codec.seal(Record(run_id, r.seq, r.kind, r.frame, r.time, r.epoch, r.body))
                for r in b
            ]

        own = legit("shifted")
        swapped = legit("swapped")
        swapped[1], swapped[2] = swapped[2], swapped[1]
        plants = {
            # verbatim: the envelope names the run and seq it was sealed for
            "copied": (a, {}),
            "swapped": (swapped, {}),
            # re-wrapped with the MAC key: only the cipher's associated data catches these
            "spliced": ([*legit("spliced")[:3], _rewrap(a[3], mac_key, "spliced", 4)], {}),
            "shifted": ([own[0], _rewrap(own[2], mac_key, "shifted", 2), *own[2:]], {}),
            "blob-moved": (legit("blob-moved"), {digest: blob_a}),
            "blob-rewrapped": (
                legit("blob-rewrapped"),
                {digest: _rewrap_blob(blob_a, mac_key, "blob-rewrapped", digest)},
            ),
        }
        for run_id, (sealed, blobs) in plants.items():
            await _plant(store, run_id, sealed, blobs)
    refusals = {
        "copied": "holds record 1 of run a: refused (records moved between runs or positions)",
        "swapped": "holds record 3 of run swapped: refused (records moved",
        "spliced": "cannot decrypt record 4 of run spliced",
        "shifted": "cannot decrypt record 2 of run shifted",
        "blob-moved": f"blob {digest} of run blob-moved fails authentication",
        "blob-rewrapped": f"cannot decrypt blob {digest} of run blob-rewrapped",
    }
    return refusals, len(b)


def test_records_and_blobs_moved_between_encrypted_runs_are_refused(
    locations: Locations,
) -> None:
    location = locations.new()
    env = encrypted(location, generate_key())
    for run_id in ("a", "b"):
        done = cli(env, "exec", "secret.py", "--run-id", run_id)
        assert done.code == 0, done.stderr
    expected, records = asyncio.run(_plant_moved_records(location, env))
    for run_id, refusal in expected.items():
        # records are read by show and resume; blobs by show and fork
        second = ["fork", run_id, "--at", str(records)] if "blob" in run_id else ["resume", run_id]
        for args in (["show", run_id], second):
            line = cli(env, *args).error_line()
            assert refusal in line, (args, line)
    assert {row["run_id"] for row in runs_json(env)} == {"a", "b", *expected}
    # the runs they were taken from are untouched and still read
    for run_id in ("a", "b"):
        shown = cli(env, "show", run_id, "--json")
        assert shown.code == 0, shown.stderr
        assert json.loads(shown.stdout)["frames"][0]["variables"]["token"] == repr(TOKEN)
