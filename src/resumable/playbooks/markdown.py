"""The Markdown reader of ``.pb`` files: lines in, :class:`~.program.Program` out, no code run.

Design note. One pass over the lines. Fenced blocks are recognised first, so a
``#`` or ``-`` inside code is never read as Markdown; a ```python block is
collected and parsed with ``ast`` (never run). Outside fences, ATX headings drive
a small state machine: ``#`` is the agent, ``##`` a playbook, ``###`` a section
of it. ``### Steps``/``Triggers``/``Notes`` are read as lists whose nesting is
indentation (two or more columns deeper than the parent item; a tab counts four).
Limits: setext headings, HTML blocks and reference links mean nothing here. A
full Markdown parser was rejected: it would add a dependency and lose the exact
source lines that every error message must name.
"""

from __future__ import annotations

import ast
import keyword
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

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

_FENCE_OPEN = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
_FENCE_CLOSE = re.compile(r"^\s*(`{3,}|~{3,})\s*$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_ITEM = re.compile(r"^( *)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*))?$")
_SIGNATURE = re.compile(r"^([^\s(]+)\s*(?:\((.*)\))?$")
_SECTIONS = {key: name for name in ("steps", "triggers", "notes") for key in (name, name[:-1])}
_PLAYBOOK_DECORATOR = "playbook"
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
    """A list item being built: ``content`` is the column its text starts at."""

    line: int
    indent: int
    content: int
    parts: list[str]
    children: list[_Item] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(self.parts)


@dataclass
class _Draft:
    """An LLM playbook being built from its ``##`` section."""

    name: str
    params: tuple[ParamSpec, ...]
    line: int
    description: list[str] = field(default_factory=list)
    sections: dict[str, tuple[int, list[tuple[int, str]]]] = field(default_factory=dict)


class _Parser:
    """Reads the lines once; headings switch where the following lines go."""

    def __init__(self, text: str, path: Path) -> None:
        self.text = text
        self.path = path
        self.lines = [line.rstrip("\r") for line in text.split("\n")]
        self.agent: tuple[str, int] | None = None
        self.description: list[str] = []
        self.drafts: list[_Draft] = []
        self.blocks: list[PythonBlock] = []
        self.python: list[PlaybookSpec] = []
        # Where Markdown lines go now: description prose, a list section, or nowhere.
        self.prose: list[str] | None = None
        self.entries: list[tuple[int, str]] | None = None

    def fail(self, line: int, key: str, **details: object) -> ProgramError:
        return program_error(self.path, line, _MESSAGES[key].format(**details))

    def parse(self) -> Program:
        number = 0
        while number < len(self.lines):
            raw = self.lines[number]
            fence = _FENCE_OPEN.match(raw)
            if fence and not (fence[2][0] == "`" and "`" in fence[3]):
                number = self.fenced(number, fence)
                continue
            heading = _HEADING.match(raw)
            if heading:
                title = re.sub(r"(?:^|[ \t]+)#+$", "", heading[2] or "").strip()
                self.heading(len(heading[1]), title, number + 1)
            else:
                self.markdown(number + 1, raw)
            number += 1
        if self.agent is None:
            raise self.fail(1, "no_agent")
        return self.finish(*self.agent)

    def fenced(self, start: int, fence: re.Match[str]) -> int:
        indent, marker = len(fence[1].expandtabs(4)), fence[2]
        language = (fence[3].split() or [""])[0].lower()
        end = start + 1
        while end < len(self.lines):
            close = _FENCE_CLOSE.match(self.lines[end])
            if close and close[1][0] == marker[0] and len(close[1]) >= len(marker):
                break
            end += 1
        else:
            raise self.fail(start + 1, "unclosed", fence=marker + language, marker=marker)
        if language in ("python", "py", "python3"):
            body = "".join(f"{_dedent(line, indent)}\n" for line in self.lines[start + 1 : end])
            self.python_block(PythonBlock(body, start + 2))
        elif self.agent is None:
            raise self.fail(start + 1, "before_agent")
        elif self.prose is not None:  # other code blocks stay in descriptions, verbatim
            self.prose.extend(self.lines[start : end + 1])
        return end + 1

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
        else:  # deeper headings are plain text of the section they are in
            self.markdown(line, self.lines[line - 1])

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

    def markdown(self, line: int, raw: str) -> None:
        if self.agent is None:
            if raw.strip():
                raise self.fail(line, "before_agent")
        elif self.prose is not None:
            self.prose.append(raw)
        elif self.entries is not None:
            self.entries.append((line, raw))

    def playbook_heading(self, title: str, line: int) -> _Draft:
        match = _SIGNATURE.match(title)
        if not match or not _is_name(match[1]):
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
            if written[:1] != "$" or not _is_name(written[1:]):
                raise self.fail(line, "bad_param", part=written, name=name)
            if any(arg.arg == other.arg for other in args.args[:number]):
                raise self.fail(line, "twice", name=name, param=written[1:])
        params = [ParamSpec(p.name[1:], p.default) for p in _python_params(args, source)]
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
            if not any(_is_playbook_decorator(d) for d in node.decorator_list):
                continue
            line = block.line + node.lineno - 1
            if not isinstance(node, ast.AsyncFunctionDef):
                raise self.fail(line, "not_async", name=node.name)
            self.check_name(node.name, line)
            params = _python_params(node.args, block.source)
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

    def items(self, lines: list[tuple[int, str]], *, strict: bool) -> list[_Item]:
        """A list section as a tree; prose either continues an item or, if not strict, is one."""
        roots: list[_Item] = []
        stack: list[_Item] = []
        after_blank = True
        for line, raw in lines:
            expanded = raw.expandtabs(4)
            if not expanded.strip():
                after_blank = True
                continue
            item = _ITEM.match(expanded)
            indent = len(expanded) - len(expanded.lstrip())
            if item:
                if not (text := (item[3] or "").strip()):
                    raise self.fail(line, "empty_item")
                while stack and indent < stack[-1].indent + 2:
                    stack.pop()
                node = _Item(line, indent, len(expanded) - len(item[3] or ""), [text])
            else:
                owner = stack[-1] if stack and not after_blank else None
                owner = owner or next((i for i in reversed(stack) if i.content <= indent), None)
                after_blank = False
                if owner is not None:  # a continuation line of an item
                    owner.parts.append(expanded.strip())
                    continue
                if strict:
                    raise self.fail(line, "prose_step")
                stack.clear()
                node = _Item(line, indent, indent + 1, [expanded.strip()])
            (stack[-1].children if stack else roots).append(node)
            stack.append(node)
            after_blank = False
        return roots


def _dedent(line: str, columns: int) -> str:
    expanded = line.expandtabs(4) if line[:1] == "\t" else line
    strip = min(columns, len(expanded) - len(expanded.lstrip(" ")))
    return expanded[strip:]


def _paragraphs(lines: list[str]) -> str:
    return textwrap.dedent("\n".join(line.rstrip() for line in lines)).strip("\n")


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


def _is_name(text: str) -> bool:
    return text.isidentifier() and not keyword.iskeyword(text)


def _is_playbook_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Name):
        return target.id == _PLAYBOOK_DECORATOR
    return isinstance(target, ast.Attribute) and target.attr == _PLAYBOOK_DECORATOR


def _python_params(args: ast.arguments, source: str) -> tuple[ParamSpec, ...]:
    def default_text(node: ast.expr | None) -> str | None:
        if node is None:
            return None
        return ast.get_source_segment(source, node) or ast.unparse(node)

    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    params = [
        ParamSpec(a.arg, default_text(d))
        for a, d in zip(positional, [*defaults, *args.defaults], strict=True)
    ]
    if args.vararg:
        params.append(ParamSpec(args.vararg.arg, None, "var_positional"))
    for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        params.append(ParamSpec(arg.arg, default_text(kw_default), "keyword_only"))
    if args.kwarg:
        params.append(ParamSpec(args.kwarg.arg, None, "var_keyword"))
    return tuple(params)
