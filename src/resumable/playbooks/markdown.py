"""The Markdown reader of ``.pb`` files: lines in, :class:`~.program.Program` out, no code run.

Design note. markdown-it-py (CommonMark) turns the text into a tree of blocks, each
with the source lines it spans, so every error still names its line. The top-level
blocks drive a small state machine: a level-1 heading is the agent, level 2 a
playbook, level 3 a section of it, deeper headings plain text. ``### Steps``/
``Triggers``/``Notes`` are read as Markdown lists (nesting as CommonMark defines
it); a ```python fence is parsed with ``ast`` (never run). HTML blocks and HTML
comments are not part of the program: a commented-out step stays out of the
playbook. Descriptions keep their source text verbatim (a fence, a table).
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from resumable.errors import ProgramError
from resumable.playbooks.program import (
    RESERVED,
    ParamSpec,
    PlaybookSpec,
    Program,
    PythonBlock,
    StepSpec,
    program_error,
    starts_at_beginning,
)
from resumable.playbooks.signatures import is_name, is_playbook_decorator, python_params

_MARKDOWN = MarkdownIt("commonmark")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_PYTHON = ("python", "py", "python3")
_SIGNATURE = re.compile(r"^([^\s(]+)\s*(?:\((.*)\))?$")
_SECTIONS = {key: name for name in ("steps", "triggers", "notes") for key in (name, name[:-1])}
_HOW_SIGNATURE = "write `## Name` or `## Name($param, $other=default)`"
_MESSAGES = {  # what is wrong; how to fix it
    "no_agent": "no `# AgentName` heading; start the file with one and a description",
    "before_agent": "text before the `# AgentName` heading; move it below the heading",
    "not_first": "expected the `# AgentName` heading first, found `{heading}`; start the file with `# AgentName`",
    "second_agent": "a second `#` heading (the agent is {agent!r}, line {first}); a program has one agent: make this a `## Playbook`",
    "no_agent_name": "the `#` heading has no agent name; write `# AgentName`",
    "unclosed": "the {fence} block opened here is never closed; add a closing {marker} line",
    "orphan_section": "`### {title}` belongs to no playbook; add a `## Name` heading above it",
    "second_section": "a second `### {title}` in {name} (first at line {first}); merge them into one",
    "bad_signature": "`## {title}` is not a playbook signature; " + _HOW_SIGNATURE,
    "bad_params": "the parameters of `## {title}` do not parse ({why}); " + _HOW_SIGNATURE,
    "bad_param": "parameter `{part}` of {name} is not `$name` or `$name=default`; "
    + _HOW_SIGNATURE,
    "twice": "{name} has the parameter ${param} twice; rename one",
    "reserved": "{name} is a primitive and cannot be a playbook name; rename the playbook",
    "syntax": "the Python block does not parse: {why}; fix the code",
    "not_async": "{name} is decorated with @playbook but is not `async def`; Python playbooks must be async def",
    "duplicate": "a second playbook named {name} (the first is the {kind} playbook at line {first}); rename one",
    "two_starts": "{first} (line {at}) and {second} both start `At the beginning`; keep that trigger on one playbook",
    "no_entry": "no entry playbook; add `## Main` or give one playbook `### Triggers` with `- At the beginning`",
    "no_steps": "the LLM playbook {name} has no steps; add a `### Steps` list (`- do this`)",
    "empty_item": "an empty list item; write the step or remove the marker",
    "prose_step": "text in `### Steps` that is not a list item; write each step as `- step`",
}


def read_program(text: str, path: Path) -> Program:
    """The :class:`Program` in the text of a ``.pb`` file; ``path`` is named in errors."""
    return _Parser(text, path).parse()


@dataclass
class _Item:
    """A list item: its first line and the text of its paragraphs."""

    line: int
    parts: list[str]
    children: list[_Item] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(self.parts)


@dataclass(frozen=True, slots=True)
class _Block:
    """Source lines of one block of a description, ``first`` to ``stop`` (1-based, excluded)."""

    first: int
    stop: int
    lines: list[str]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass
class _Draft:
    """An LLM playbook being built from its ``##`` section."""

    name: str
    params: tuple[ParamSpec, ...]
    line: int
    description: list[_Block] = field(default_factory=list)
    sections: dict[str, tuple[int, list[SyntaxTreeNode]]] = field(default_factory=dict)


class _Parser:
    """Walks the top-level blocks once; headings switch where the following blocks go."""

    def __init__(self, text: str, path: Path) -> None:
        self.text = text
        self.path = path
        self.lines = _LINE_BREAK.split(text)  # as CommonMark counts lines
        self.agent: tuple[str, int] | None = None
        self.description: list[_Block] = []
        self.drafts: list[_Draft] = []
        self.blocks: list[PythonBlock] = []
        self.python: list[PlaybookSpec] = []
        # Where blocks go now: description prose, a list section, or nowhere.
        self.prose: list[_Block] | None = None
        self.entries: list[SyntaxTreeNode] | None = None

    def fail(self, line: int, key: str, **details: object) -> ProgramError:
        return program_error(self.path, line, _MESSAGES[key].format(**details))

    def parse(self) -> Program:
        tree = SyntaxTreeNode(_MARKDOWN.parse(self.text))
        for block in tree.children:
            first = _first_line(block)
            if block.type == "heading":
                self.heading(int(block.tag[1]), _inline_text(block), first)
            elif block.type == "fence":
                self.fence(block, first)
            elif block.type == "html_block":
                continue  # comments and raw HTML are not part of the program
            else:
                self.markdown(block, first)
        if self.agent is None:
            raise self.fail(1, "no_agent")
        return self.finish(*self.agent)

    def fence(self, block: SyntaxTreeNode, line: int) -> None:
        if self.python_fence(block, line):
            return
        if self.agent is None:
            raise self.fail(line, "before_agent")
        if self.prose is not None:  # other code blocks stay in descriptions, verbatim
            self.prose.append(self.source(block))

    def python_fence(self, block: SyntaxTreeNode, line: int) -> bool:
        """Read a ```python block (wherever it stands); False for any other fence."""
        marker = block.markup
        language = (block.info.split() or [""])[0].lower()
        end = block.map[1] if block.map else len(self.lines)
        closing = self.lines[end - 1].strip() if line < end <= len(self.lines) else ""
        if not closing.startswith(marker) or closing.strip(marker[0]):
            raise self.fail(line, "unclosed", fence=marker + language, marker=marker)
        if language not in _PYTHON:
            return False
        self.python_block(PythonBlock(block.content, line + 1))
        return True

    def heading(self, level: int, title: str, line: int) -> None:
        if self.agent is None and level != 1:
            raise self.fail(line, "not_first", heading=f"{'#' * level} {title}")
        if level == 1:
            if self.agent is not None:
                raise self.fail(line, "second_agent", agent=self.agent[0], first=self.agent[1])
            if not title:
                raise self.fail(line, "no_agent_name")
            self.agent = (title, line)
            self.prose, self.entries = self.description, None
        elif level == 2:
            self.drafts.append(self.playbook_heading(title, line))
            self.prose, self.entries = self.drafts[-1].description, None
        elif level == 3:
            self.section(title, line)
        elif self.prose is not None:  # deeper headings are plain text of the section they are in
            self.prose.append(self.source_lines(line, line + 1))

    def section(self, title: str, line: int) -> None:
        kind = _SECTIONS.get(title.rstrip(":").strip().lower())
        self.prose = self.entries = None
        if kind is None:
            return  # unknown sections are allowed and ignored
        if not self.drafts:
            raise self.fail(line, "orphan_section", title=title)
        draft = self.drafts[-1]
        if kind in draft.sections:
            first = draft.sections[kind][0]
            raise self.fail(line, "second_section", title=title, name=draft.name, first=first)
        self.entries = []
        draft.sections[kind] = (line, self.entries)

    def markdown(self, block: SyntaxTreeNode, line: int) -> None:
        for inner in block.walk(include_self=False):
            if inner.type == "fence":  # a ```python block inside a list item or a quote
                self.python_fence(inner, _first_line(inner))
        if self.agent is None:
            raise self.fail(line, "before_agent")
        if self.prose is not None:
            self.prose.append(self.source(block))
        elif self.entries is not None:
            self.entries.append(block)

    def source(self, block: SyntaxTreeNode) -> _Block:
        start, end = block.map if block.map else (0, 0)
        return self.source_lines(start + 1, end + 1)

    def source_lines(self, first: int, stop: int) -> _Block:
        """Lines ``first`` up to ``stop`` (1-based, ``stop`` excluded) as they are in the file."""
        return _Block(first, stop, self.lines[first - 1 : stop - 1])

    def playbook_heading(self, title: str, line: int) -> _Draft:
        match = _SIGNATURE.match(title)
        if not match or not is_name(match[1]):
            raise self.fail(line, "bad_signature", title=title)
        name = match[1]
        self.check_name(name, line)
        # Read as a Python signature: `$` and `_` have the same width, so offsets still match.
        source = f"def _({match[2] or ''}): pass"
        try:
            module = ast.parse(source.replace("$", "_"))
        except SyntaxError as exc:
            why = exc.msg.replace("'_", "'$")
            raise self.fail(line, "bad_params", title=title, why=why) from None
        tree = module.body[0]
        if len(module.body) != 1 or not isinstance(tree, ast.FunctionDef) or len(tree.body) != 1:
            raise self.fail(line, "bad_params", title=title, why="text after the parameters")
        args = tree.args
        if args.posonlyargs or args.vararg or args.kwonlyargs or args.kwarg:
            raise self.fail(line, "bad_param", part="/" if args.posonlyargs else "*", name=name)
        for number, arg in enumerate(args.args):
            written = ast.get_source_segment(source, arg) or arg.arg
            if written[:1] != "$" or not is_name(written[1:]):
                raise self.fail(line, "bad_param", part=written, name=name)
            if any(arg.arg == other.arg for other in args.args[:number]):
                raise self.fail(line, "twice", name=name, param=written[1:])
        params = [ParamSpec(p.name[1:], p.default) for p in python_params(args, source)]
        return _Draft(name, tuple(params), line)

    def check_name(self, name: str, line: int) -> None:
        if name in RESERVED:
            raise self.fail(line, "reserved", name=name)

    def python_block(self, block: PythonBlock) -> None:
        self.blocks.append(block)
        try:
            tree = ast.parse(block.source, str(self.path))
        except SyntaxError as exc:
            raise self.fail(block.line + (exc.lineno or 1) - 1, "syntax", why=exc.msg) from None
        except ValueError as exc:  # source holding a NUL byte
            raise self.fail(block.line, "syntax", why=exc) from None
        for node in tree.body:
            if not isinstance(node, ast.AsyncFunctionDef | ast.FunctionDef | ast.ClassDef):
                continue
            if not any(is_playbook_decorator(d) for d in node.decorator_list):
                continue
            line = block.line + node.lineno - 1
            if not isinstance(node, ast.AsyncFunctionDef):
                raise self.fail(line, "not_async", name=node.name)
            self.check_name(node.name, line)
            params = python_params(node.args, block.source)
            doc = ast.get_docstring(node) or ""
            self.python.append(PlaybookSpec(node.name, params, "python", doc, (), (), (), line))

    def finish(self, agent: str, agent_line: int) -> Program:
        specs = sorted([*(self.spec(d) for d in self.drafts), *self.python], key=lambda s: s.line)
        playbooks: dict[str, PlaybookSpec] = {}
        for spec in specs:
            if (first := playbooks.get(spec.name)) is not None:
                raise self.fail(
                    spec.line, "duplicate", name=spec.name, kind=first.kind, first=first.line
                )
            playbooks[spec.name] = spec
        starters = [s for s in specs if starts_at_beginning(s)]
        if len(starters) > 1:
            one, two = starters[:2]
            raise self.fail(two.line, "two_starts", first=one.name, at=one.line, second=two.name)
        if not starters and "Main" not in playbooks:
            raise self.fail(agent_line, "no_entry")
        description = _paragraphs(self.description)
        return Program(self.path, agent, description, playbooks, tuple(self.blocks), self.text)

    def spec(self, draft: _Draft) -> PlaybookSpec:
        def entries(kind: str, *, strict: bool = False) -> list[_Item]:
            return self.items(draft.sections.get(kind, (0, []))[1], strict=strict)

        steps = entries("steps", strict=True)
        if not steps:
            raise self.fail(draft.line, "no_steps", name=draft.name)
        triggers = tuple(i.text for i in _flatten(entries("triggers")))
        notes = tuple(i.text for i in _flatten(entries("notes")))
        description = _paragraphs(draft.description)
        steps_spec = _freeze(steps, "")
        return PlaybookSpec(
            draft.name, draft.params, "llm", description, steps_spec, triggers, notes, draft.line
        )

    def items(self, blocks: list[SyntaxTreeNode], *, strict: bool) -> list[_Item]:
        """A list section as a tree; prose outside a list is an error, or (if not strict) an item."""
        roots: list[_Item] = []
        for block in blocks:
            if block.type in ("bullet_list", "ordered_list"):
                roots.extend(self.list_items(block))
            elif strict:
                raise self.fail(_first_line(block), "prose_step")
            else:
                text = _flat(self.source(block).text)
                if text:
                    roots.append(_Item(_first_line(block), [text]))
        return roots

    def list_items(self, block: SyntaxTreeNode) -> list[_Item]:
        items = []
        for entry in block.children:
            line = _first_line(entry)
            parts = [_flat(_inline_text(c)) for c in entry.children if c.type == "paragraph"]
            parts = [part for part in parts if part]
            if not parts:
                raise self.fail(line, "empty_item")
            item = _Item(line, parts)
            for child in entry.children:
                if child.type in ("bullet_list", "ordered_list"):
                    item.children.extend(self.list_items(child))
            items.append(item)
        return items


def _first_line(block: SyntaxTreeNode) -> int:
    return block.map[0] + 1 if block.map else 1


def _inline_text(block: SyntaxTreeNode) -> str:
    """The raw text of a heading or paragraph (its inline child), HTML comments removed."""
    inline = next((c for c in block.children if c.type == "inline"), None)
    return _COMMENT.sub("", inline.content).strip() if inline is not None else ""


def _flat(text: str) -> str:
    return " ".join(_COMMENT.sub("", text).split())


def _paragraphs(blocks: list[_Block]) -> str:
    """Description blocks as they stand in the file, one blank line where the file had any."""
    lines: list[str] = []
    for number, block in enumerate(blocks):
        if number and blocks[number - 1].stop < block.first:
            lines.append("")
        lines.extend(line.rstrip() for line in block.lines)
    return textwrap.dedent("\n".join(lines)).strip("\n")


def _flatten(items: list[_Item]) -> Iterator[_Item]:
    for item in items:
        yield item
        yield from _flatten(item.children)


def _freeze(items: list[_Item], prefix: str) -> tuple[StepSpec, ...]:
    steps = []
    for number, item in enumerate(items, 1):
        step_id = f"{prefix}{number:02d}"
        steps.append(StepSpec(step_id, item.text, item.line, _freeze(item.children, f"{step_id}.")))
    return tuple(steps)
