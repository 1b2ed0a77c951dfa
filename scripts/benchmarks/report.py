"""What every benchmark returns and prints: :class:`Report`, and the timing they share.

The benchmarks of this package import this module; it imports none of them.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Report:
    """What a benchmark measured: table rows (the first column names the row) and a summary."""

    title: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    summary: dict[str, Any] = field(default_factory=dict)
    ok: bool = True  # False when a --max-* budget was exceeded

    def as_json(self, name: str) -> dict[str, Any]:
        rows = [dict(zip(self.columns, row, strict=True)) for row in self.rows]
        return {"benchmark": name, "title": self.title, "rows": rows, **self.summary, "ok": self.ok}

    def as_table(self) -> str:
        cells = [self.columns, *(tuple(_cell(value) for value in row) for row in self.rows)]
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.columns))]
        lines = [self.title, ""]
        for number, row in enumerate(cells):
            lines.append(
                "  ".join(
                    text.ljust(width) if i == 0 else text.rjust(width)
                    for i, (text, width) in enumerate(zip(row, widths, strict=True))
                )
            )
            if number == 0:
                lines.append("  ".join("-" * width for width in widths))
        lines += ["", *(f"{key}: {_cell(value)}" for key, value in self.summary.items())]
        return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def median_seconds(runs: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median wall time of each run over ``repeat`` rounds, garbage collector off.

    The runs take turns within a round, so a load change on a shared machine
    affects all of them alike and their ratios stay meaningful.
    """
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            gc.collect()
            gc.disable()  # as timeit does: the collector's pauses are not the code's cost
            try:
                began = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - began)
            finally:
                gc.enable()
    return {name: statistics.median(values) for name, values in times.items()}


@dataclass(frozen=True, slots=True)
class SectionedReport(Report):
    """A report whose main table is followed by further named tables."""

    sections: dict[str, Report] = field(default_factory=dict)

    def as_json(self, name: str) -> dict[str, Any]:
        data = Report.as_json(self, name)
        for key, section in self.sections.items():
            data[key] = {"title": section.title, "rows": Report.as_json(section, key)["rows"]}
        return data

    def as_table(self) -> str:
        parts = [Report.as_table(self).rstrip()]
        parts += [Report.as_table(section).rstrip() for section in self.sections.values()]
        return "\n\n".join(parts)
