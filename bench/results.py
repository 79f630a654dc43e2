"""What a run measured: rows of latency samples, each tied to the bare baseline of the same
run, written as one JSON document."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bench.stats import Summary, ratio

#: the sections of a run, in table order (the JSON has every one, empty when skipped)
SECTIONS = ("sandbox", "end_to_end", "throughput", "scaling", "cold_start")


@dataclass
class Row:
    section: str
    case: str
    mode: str
    runtime: str
    samples_ms: list[float]
    #: the key of the bare-subprocess row this one is compared with ("" for a baseline)
    baseline: str = ""
    #: figures that are not latencies (events/s, resident memory, ratios to other rows)
    extra: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    @property
    def key(self) -> str:
        return f"{self.section}/{self.case}/{self.mode}/{self.runtime}"

    @property
    def summary(self) -> Summary:
        return Summary.of(self.samples_ms)


@dataclass
class Report:
    meta: dict[str, Any]
    rows: list[Row] = field(default_factory=list)
    targets: list[dict[str, Any]] = field(default_factory=list)

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        return row

    def row(self, key: str) -> Row | None:
        for row in self.rows:
            if row.key == key:
                return row
        return None

    def ratio_to_bare(self, row: Row) -> float:
        base = self.row(row.baseline) if row.baseline else None
        if base is None:
            return 1.0 if not row.baseline else math.nan
        return ratio(row.summary.p50, base.summary.p50)

    def to_dict(self) -> dict[str, Any]:
        sections: dict[str, list[dict[str, Any]]] = {name: [] for name in SECTIONS}
        for row in self.rows:
            s = row.summary
            sections[row.section].append(
                {
                    "key": row.key,
                    "case": row.case,
                    "mode": row.mode,
                    "runtime": row.runtime,
                    "n": s.n,
                    "p50_ms": _num(s.p50),
                    "p90_ms": _num(s.p90),
                    "p99_ms": _num(s.p99),
                    "mean_ms": _num(s.mean),
                    "min_ms": _num(s.min),
                    "max_ms": _num(s.max),
                    "baseline": row.baseline or None,
                    "ratio_to_bare_p50": _num(self.ratio_to_bare(row)),
                    "extra": row.extra,
                    "note": row.note,
                    "samples_ms": [round(v, 4) for v in row.samples_ms],
                }
            )
        return {"meta": self.meta, "sections": sections, "targets": self.targets}

    def write_json(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n")

    @classmethod
    def from_dict(cls, doc: object) -> Report:
        """The report a `to_dict` document holds (its rows rebuilt from their samples).

        Raises ValueError naming the first thing that is wrong: a missing or mistyped
        field, a section the bench does not have, a sample that is not a positive finite
        number of milliseconds, or two rows with one key."""
        try:
            parsed = _Document.model_validate(doc)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"]) or "the document"
            raise ValueError(f"{where}: {error['msg']}") from None
        report = cls(dict(parsed.meta), targets=[dict(t) for t in parsed.targets])
        for section, rows in sorted(parsed.sections.items(), key=lambda s: SECTIONS.index(s[0])):
            for found in rows:
                row = Row(section, found.case, found.mode, found.runtime,
                          list(found.samples_ms), found.baseline or "", dict(found.extra),
                          found.note)  # fmt: skip
                if report.row(row.key) is not None:
                    raise ValueError(f"sections.{section}: two rows with the key {row.key!r}")
                report.add(row)
        return report


_Sample = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class _Row(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    case: str
    mode: str
    runtime: str
    samples_ms: list[_Sample]
    baseline: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)
    note: str = ""


class _Document(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    meta: dict[str, Any]
    sections: dict[Literal["sandbox", "end_to_end", "throughput", "scaling", "cold_start"],
                   list[_Row]]  # fmt: skip
    targets: list[dict[str, Any]] = Field(default_factory=list)


def _num(value: float) -> float | None:
    """JSON has no NaN: a figure that could not be measured is null."""
    return None if math.isnan(value) else round(value, 4)
