"""docs/cli.md, written from the ``resumable`` command itself.

Each command's section comes from its typer definition (help text, usage, arguments
and options), so a command added anywhere shows up here, and a test fails when the
committed page differs from what this renders (``python scripts/cli_docs.py`` writes
it). The parts no command knows (exit codes, environment, JSON schemas) are kept here.
"""

from __future__ import annotations

import json
from typing import Any

import typer
from typer.core import TyperGroup

HEAD = """\
# Command line

<!-- Generated from the `resumable` command by scripts/cli_docs.py; do not edit by hand. -->

Run ids, everywhere and in every store: letters, digits, `-`, `_` and `.` (not
first), at most 200 characters; anything else (an empty id from an unset shell
variable, a newline) is refused before anything is created or looked up. An id that
starts with `-` goes after `--`, as in `resumable show -- -x`; without it the command
says so in one line (exit 2).

Every command takes `--config PATH` (default: `./playbooks.toml`, or the file named
by `RESUMABLE_CONFIG`). stdout carries only what the program prints, or JSON with
`--json`; everything `resumable` says goes to stderr. `resumable --version` prints the
version on its first line, then the project's links (home page, documentation, issues,
source); `resumable --install-completion` installs shell completion (bash, zsh, fish,
PowerShell) and `--show-completion` prints it.

| exit code | meaning |
|---|---|
| 0 | done |
| 1 | the program failed (its traceback is on stderr), gave up after `max_attempts` attempts in a row without progress, or was cancelled |
| 2 | usage or configuration error: one line naming the thing and the fix; the store is left byte for byte as it was (a `resume` checks its hooks, and a `max_record_bytes` below the run's largest record, before it takes the run) |
| 3 | waiting for human input (`resumable answer`, then `resumable resume`) |
| N | the program called `sys.exit(N)`: its code, as under `python` (the run is completed for 0, failed otherwise) |
| 75 | the store failed under the run (disk full, read-only, server gone, lease lost): the run is `interrupted`; fix the store, then `resumable resume RUN_ID` |
| 130 | stopped by SIGINT (Ctrl-C): the run is `interrupted`; `resumable resume RUN_ID` continues it |
| 143 | stopped by SIGTERM (`docker stop`, systemd, Kubernetes): the run is `interrupted`, as for 130 |

A run's status is one of running, crashed (running with no live owner: its process
was killed), interrupted (stopped in order by SIGINT, SIGTERM or a failing store; the
reason is in `resumable show`), waiting, pending, completed, failed, cancelled, or
damaged (its metadata cannot be read: `resumable runs` says why in one warning line,
`problem` in `--json`, and `resumable repair` rebuilds it from the verified log).
`resume` and `resume --latest` continue crashed, interrupted and waiting runs.

`runs`, `show`, `steps` and `resumable ui` only read the store: they work on a store
on read-only media (the folder store is not probed; SQLite is opened `mode=ro`, or,
with no write-ahead log pending, by a connection that writes nothing, so that no log file
is left behind), write nothing to it and make no key, and a path that holds no store is named in one line
(exit 2; the inspector answers with that line) instead of a store being created there.

On SIGINT or SIGTERM, `run`, `exec` and `resume` stop at the next safe point: no new
effect, step or foreign await starts, the one in flight is abandoned (it runs again on
resume, with the same idempotency key), what is recorded is written, and the run's lease
is released at once, so a resume need not wait for it. A second signal while it stops
is only acknowledged. `resumable worker` drains instead: see its command.

`run`, `exec` and `resume` also take `--quiet` (`-q`) and `--events json`. On a
terminal a live status line on stderr shows the playbook and frame, the LLM turn,
statements run, checkpoints written, tokens streamed and retries
(`[runtime] progress = "auto" | "on" | "off"`); it is erased before the program
writes and drawn again after the program's line ends, so the two never share a
line. Every run ends with one summary line (`resumable: completed in 3.1 s: 14
statements, 41 checkpoints, 6 LLM turns, 212 tokens, 0 retries`). Off a terminal,
or with `--quiet`, only that summary (and, without `--quiet`, each retry) is said;
stdout carries the program's bytes untouched. `--events json` writes one JSON object
per line on stderr instead (`{"event": "turn", "t": 0.41, "playbook": "Main", ...}`;
kinds: run, frame, turn, tokens, turn_end, statement, retry, summary).
"""

TAIL = """\
## Environment

| variable | meaning |
|---|---|
| `RESUMABLE_CONFIG` | the config file to use |
| `RESUMABLE_<SECTION>_<KEY>` | overrides one setting, e.g. `RESUMABLE_DURABILITY_SYNC=flush` |
| `RESUMABLE_MAC_KEY` | the record-authentication key (default: the store's own, created on first use) |
| `RESUMABLE_ENCRYPTION_KEY` | the encryption key when `[durability] encrypt = true` (`resumable init` writes a new one to `resumable.key`, mode 0600) |
| `PYTHONHASHSEED` | a number: the string hash seed `exec` and `run` give a new run (default: the store's own, derived from its MAC key); `resume` and `worker` replace it with the run's or the store's |
| `RESUMABLE_CRASH_AFTER=N` | fault injection: SIGKILL right after the N-th record is durable |
| `RESUMABLE_SCRIPTED_LOG` | the scripted provider appends one JSON line per LLM call to this file |
| `OPENAI_API_KEY` | the `openai` provider's key (another variable with `[llm] api_key_env`) |
| `OPENAI_BASE_URL` | the `openai` provider's endpoint when `[llm] base_url` is empty |

## JSON output

`resumable run --json` and `resumable exec --json` print one object on stdout when the
process ends, after what the program printed:
`{"run_id": ..., "status": ..., "exit_code": ..., "message": ...}`.

`resumable steps --json` prints an array of entries, one per record (chunks of streamed
LLM text only with `--kind chunk`: without it, stderr says how many chunk records the
numbering skips). `duration` is the time since the frame's previous
record, in seconds (null for its first); `key` is the await's idempotency key without
the run id (`FRAME/RESPONSE.STATEMENT.AWAIT`), a statement's position, or a question's
key; `value` is a short text. Responses and LLM calls count from 1, statements and
awaits from 0, everywhere (`show`, `show --json`, `steps`, the inspector). It follows
this schema:

```json
{steps_schema}
```
"""

STEPS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "array",
    "items": {
        "type": "object",
        "required": ["seq", "time", "duration", "frame", "kind", "key", "site", "value"],
        "additionalProperties": False,
        "properties": {
            "seq": {"type": "integer", "minimum": 1},
            "time": {"type": "number"},
            "duration": {"type": ["number", "null"], "minimum": 0},
            "frame": {"type": "string"},
            "kind": {"type": "string"},
            "key": {"type": "string"},
            "site": {"type": "string"},
            "value": {"type": "string"},
        },
    },
}


def render(app: typer.Typer) -> str:
    """The whole page for ``app``."""
    group = typer.main.get_command(app)
    if not isinstance(group, TyperGroup):
        raise TypeError("the resumable app has one command only; expected a group")
    root = typer.Context(group, info_name="resumable")
    parts = [HEAD, "## Commands\n"]
    for name in sorted(group.commands):
        command = group.commands[name]
        if not command.hidden:
            parts.append(_command(name, command, root))
    parts.append(TAIL.replace("{steps_schema}", json.dumps(STEPS_SCHEMA, indent=2)))
    return "\n".join(parts)


def _command(name: str, command: Any, root: typer.Context) -> str:
    ctx = typer.Context(command, info_name=name, parent=root)
    params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    arguments = [p for p in params if p.param_type_name == "argument"]
    usage = ["resumable", name, "[OPTIONS]", *(_argument(p) for p in arguments)]
    lines = [f"### `resumable {name}`", ""]
    for paragraph in (command.help or "").strip().split("\n\n"):
        text = " ".join(paragraph.split())
        if text.startswith("Example: "):
            text = f"Example: `{text.removeprefix('Example: ')}`"
        lines += [text, ""]
    lines += ["```", " ".join(usage), "```"]
    rows = []
    for param in params:
        record = param.get_help_record(ctx)
        if record is None or param.name == "help":
            continue
        names, text = record
        if param.param_type_name == "argument":
            names = _argument(param).strip("[]")
        text = " ".join(text.split()).replace("|", "\\|")
        rows.append(f"| `{names}` | {text} |")
    if rows:
        lines += ["", "| argument or option | meaning |", "|---|---|", *rows]
    return "\n".join(lines) + "\n"


def _argument(param: Any) -> str:
    name = (param.metavar or param.name or "").strip("[]").upper()
    if param.nargs == -1:
        name += "..."
    return name if param.required else f"[{name}]"
