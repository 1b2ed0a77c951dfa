"""The ``.pb`` program format: the frozen playbook specs a program file becomes.

A ``.pb`` file is Markdown; :mod:`resumable.playbooks.markdown` reads it (no code is
executed) and builds the records defined here. :func:`~resumable.playbooks.loading.load_program`
and :func:`~resumable.playbooks.loading.parse_program` are the way in.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from resumable.errors import ProgramError

RESERVED = frozenset({"Step", "Say", "Return", "End", "Input", "Approve", "Review", "Escalate"})
"""Primitive names generated code relies on; a playbook may not shadow them."""

BEGIN_TRIGGER = "at the beginning"

_STARS = {"positional": "", "keyword_only": "", "var_positional": "*", "var_keyword": "**"}
_CODES = {  # a step's code from its first words, tried in this order; ACT when none matches
    "CND": "if|when|whenever|unless|otherwise|else|in case",
    "LOP": "for each|for every|for all|while|repeat|until|loop|iterate",
    "RET": "return",
    "END": "end|finish|exit|stop|terminate",
    "QUE": "greet|ask|tell|say|call|invoke|inform|notify|reply|respond|answer|thank|welcome|show"
    "|report|explain|send",
}


def step_code(text: str) -> str:
    """The three-letter kind of a step, from its first words (``ACT`` when nothing matches)."""
    words = re.findall(r"[a-z]+", text.lower())
    for code, phrases in _CODES.items():
        for phrase in phrases.split("|"):
            wanted = phrase.split()
            if words[: len(wanted)] == wanted:
                return code
    return "ACT"


@dataclass(frozen=True, slots=True)
class StepSpec:
    """One step of an LLM playbook; ``id`` is ``01``, ``02``, nested ``04.01``."""

    id: str
    text: str
    line: int
    children: tuple[StepSpec, ...] = ()

    @property
    def code(self) -> str:
        return step_code(self.text)

    def ref(self, playbook: str) -> str:
        """The reference generated code passes to ``Step(...)``, e.g. ``Main:01:QUE``."""
        return f"{playbook}:{self.id}:{self.code}"


@dataclass(frozen=True, slots=True)
class ParamSpec:
    """A playbook parameter; ``default`` is its source text, ``None`` when it has none."""

    name: str
    default: str | None = None
    kind: Literal["positional", "keyword_only", "var_positional", "var_keyword"] = "positional"


@dataclass(frozen=True, slots=True)
class PlaybookSpec:
    """An LLM playbook (a ``##`` section) or a Python one (an ``@playbook async def``)."""

    name: str
    params: tuple[ParamSpec, ...]
    kind: Literal["llm", "python"]
    description: str
    steps: tuple[StepSpec, ...]
    triggers: tuple[str, ...]
    notes: tuple[str, ...]
    line: int

    def signature(self) -> str:
        """How prompts show the playbook: ``SomePlaybook($topic, $depth=2)``."""
        parts: list[str] = []
        for p in self.params:
            if p.kind == "keyword_only" and not any(part[0] == "*" for part in parts):
                parts.append("*")
            default = "" if p.default is None else f"={p.default}"
            parts.append(f"{_STARS[p.kind]}${p.name}{default}")
        return f"{self.name}({', '.join(parts)})"


@dataclass(frozen=True, slots=True)
class PythonBlock:
    """A ```python block; ``line`` is its first code line in the ``.pb`` file."""

    source: str
    line: int


@dataclass(frozen=True, slots=True)
class Program:
    """A parsed ``.pb`` file: the agent, its playbooks in file order, its Python blocks."""

    path: Path
    agent: str
    description: str
    playbooks: dict[str, PlaybookSpec]
    python_blocks: tuple[PythonBlock, ...]
    source: str

    @property
    def entry(self) -> str:
        """The playbook a run starts with: the one triggered "At the beginning", else ``Main``."""
        starters = [p.name for p in self.playbooks.values() if starts_at_beginning(p)]
        if starters:
            return starters[0]
        if "Main" in self.playbooks:
            return "Main"
        raise ProgramError(f"{self.path}: no entry playbook", path=str(self.path), line=None)

    def playbook(self, name: str) -> PlaybookSpec:
        """The playbook called ``name``; a clear error naming the known ones otherwise."""
        try:
            return self.playbooks[name]
        except KeyError:
            known = ", ".join(self.playbooks) or "none"
            close = difflib.get_close_matches(name, list(self.playbooks), n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise ProgramError(
                f"{self.path}: no playbook named {name!r}; {hint}known playbooks: {known}",
                path=str(self.path),
                line=None,
                playbook=name,
            ) from None


def starts_at_beginning(spec: PlaybookSpec) -> bool:
    """Whether ``spec`` has the trigger that makes it the entry playbook."""
    return any(t.strip().lower().startswith(BEGIN_TRIGGER) for t in spec.triggers)


def program_error(path: Path, line: int | None, message: str) -> ProgramError:
    """An error that names the file and line, as every message about a ``.pb`` file does."""
    where = f"{path}:{line}" if line is not None else f"{path}"
    return ProgramError(f"{where}: {message}", path=str(path), line=line)
