"""docsgen/performance.py: the performance page's figures and its chart come from one bench
run's JSON, agree with each other, and the committed ones are what the command makes from
the committed JSON."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import matplotlib
import pytest

from bench import chart, end_to_end
from bench.results import Report, Row
from docsgen.__main__ import DOCS
from docsgen.__main__ import main as docsgen_main
from docsgen.performance import CHART, JSON, MAX_BYTES, PAGE, main

BARE = "sandbox/cat/bare/host"


def run() -> Report:
    """A small run with a row in every section, two runtimes, both clients and `run`."""
    meta = {
        "started": "2026-01-02T03:04:05Z", "smoke": False, "runtimes": ["runc", "runsc"],
        "host": {"cpus": 4, "kernel": "6.1.0-test", "python": "3.12.1", "docker": "27.0.1"},
        "loadavg_start": [0.25, 0.5, 0.75], "loadavg_end": [1.5, 1.0, 0.9], "wall_s": 61.4,
        "errors": [],
    }  # fmt: skip
    r = Report(meta)
    r.add(Row("sandbox", "cat", "bare", "host", [1.0, 1.5, 2.0], note="subprocess on the host"))
    r.add(Row("sandbox", "python3", "bare", "host", [9.0, 10.0, 11.0]))
    for runtime, base in (("runc", 2.0), ("runsc", 12.0)):
        r.add(Row("sandbox", "cat", "session", runtime, [base, base + 0.5, base + 3], BARE))
        r.add(Row("sandbox", "python3", "hook", runtime, [base * 60, base * 61, base * 70],
                  "sandbox/python3/bare/host"))  # fmt: skip
    rows = {
        end_to_end.CLIENT: [18.0, 19.0, 21.0],
        end_to_end.COMPILED: [7.0, 7.25, 8.0],
        end_to_end.CLIENT_IS: [16.0, 16.5, 17.0],
        end_to_end.INTERPRETER: [8.0, 8.1, 8.2],
        end_to_end.REQUEST: [5.5, 5.75, 6.0],
        end_to_end.BARE: [1.6, 1.7, 1.8],
        end_to_end.FRONT: [0.3, 0.35, 0.4],
        end_to_end.NO_HOOK: [1.4, 1.5, 1.6],
        "cloudrunner run (in-process)": [1090.0, 1100.0, 1200.0],
    }
    for mode, samples in rows.items():
        r.add(Row("end_to_end", "cat", mode, "runc", samples, BARE, note=f"the {mode} row"))
    for sessions, rate in ((1, 213.4), (8, 370.6), (32, 396.8)):
        r.add(Row("throughput", "cat", f"{sessions} session{'s' if sessions > 1 else ''}",
                  "runc", [4.0 * sessions, 5.0 * sessions], BARE,
                  extra={"events_per_s": rate, "peak_rss_mb": 60.0 + sessions / 4,
                         "daemon_cpu_ms_per_event": 2.0 + sessions / 100}))  # fmt: skip
    r.add(Row("scaling", "cat", "16 hooks, 1 source", "runc", [39.0, 40.0], BARE))
    r.add(Row("cold_start", "cat", "new session, daemon", "runc", [160.0, 165.0], BARE))
    r.add(Row("cold_start", "cat", "no samples", "runc", []))  # shown nowhere
    return r


def _docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    return docs


def _made(tmp_path: Path, report: Report | dict[str, Any]) -> tuple[Path, str, str]:
    docs = _docs(tmp_path)
    source = tmp_path / "bench.json"
    doc = report.to_dict() if isinstance(report, Report) else report
    source.write_text(json.dumps(doc, indent=2))
    assert main([str(source), "--docs", str(docs)]) == 0
    return docs, (docs / PAGE).read_text(), (docs / CHART).read_text()


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """The page and the chart made from `run()`, once for the tests that only read them."""
    return _made(tmp_path_factory.mktemp("made"), run())


def _tables(page: str) -> dict[tuple[str, str], list[str]]:
    """(section title, row label) -> the row's cells, from the generated part's tables."""
    part = page.split("<!-- docsgen: performance -->", 1)[1].split("<!-- /docsgen:", 1)[0]
    out: dict[tuple[str, str], list[str]] = {}
    for block in re.split(r"^### ", part, flags=re.M)[1:]:
        title, _, body = block.partition("\n")
        if title == "Summary":
            continue
        lines = [line for line in body.splitlines() if line.startswith("| ")][1:]
        for line in lines:
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            out[(title, cells[0])] = cells
    return out


def _texts(svg: str) -> list[str]:
    root = ElementTree.fromstring(svg)
    return ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]


def test_every_table_row_is_a_box_of_the_chart_with_the_same_p50(
    made: tuple[Path, str, str],
) -> None:
    report = run()
    _, page, svg = made
    rows = _tables(page)
    drawn = {(chart.TITLES[b["section"]], b["label"]): b for b in chart.drawn(svg)}
    assert set(rows) == set(drawn)
    assert len(rows) == len([r for r in report.rows if r.samples_ms]) == 20
    texts = _texts(svg)
    for key, cells in rows.items():
        p50 = drawn[key]["p50"]
        assert isinstance(p50, float)
        assert cells[2] == chart.ms(p50), key  # the table's p50 is the chart's
        assert key[1] in texts and cells[2] in texts  # and both are written on the chart
    # the rows the issue named: the compiled client, every sandbox mode, `cloudrunner run`
    daemon = "The daemon and its clients"
    assert rows[(daemon, "compiled client, daemon up")][2] == "7.25"
    assert rows[(daemon, "cloudrunner run (in-process)")][2] == "1100"
    sandbox = "Hooks in each sandbox mode"
    assert {"cat · session · runsc", "python3 · hook · runc", "cat · bare · host"} <= {
        label for title, label in rows if title == sandbox
    }
    assert not any("no samples" in label for _, label in rows)


def test_the_page_states_the_run_and_the_summary_from_the_json(
    made: tuple[Path, str, str],
) -> None:
    _, page, _ = made
    assert "started `2026-01-02T03:04:05Z`" in page and "61 s long" in page
    assert "4-core machine (Linux 6.1.0-test, Docker 27.0.1, Python 3.12.1)" in page
    assert "load average 0.25 at the start and 1.50 at the end" in page
    assert "Runtimes: runc, runsc." in page and "Not in this run" not in page
    assert "+1.50 ms (7.25 ms end to end" in page  # compiled over the request
    assert "`cloudrunner hook`, over the daemon's answer | +13.25 ms" in page
    assert "213 / 371 / 397 (daemon CPU 2.01 / 2.08 / 2.32 ms per event)" in page
    assert "| 8 sessions | 2 | 36.00 | 39.92 | 24.0 | 371 | 2.08 | 62 |" in page
    assert "| the HTTP front: connect, parse, route, answer | 0.35 |" in page
    # the hand-written prose around the generated parts stays
    assert "## What you can tune" in page and "Inside those, measured apart" in page


def test_a_run_without_parts_says_which(tmp_path: Path) -> None:
    report = run()
    report.rows = [r for r in report.rows if r.section in ("sandbox", "throughput")]
    _, page, svg = _made(tmp_path, report)
    assert ("Not in this run: the daemon and its clients (part 2), hooks per event (part 4), "
            "a new session (part 5).") in page  # fmt: skip
    assert "The run above did not measure the daemon (part 2)." in page
    assert {b["section"] for b in chart.drawn(svg)} == {"sandbox", "throughput"}


def test_the_committed_page_and_chart_are_what_the_command_makes_of_the_committed_json(
    tmp_path: Path,
) -> None:
    docs = _docs(tmp_path)
    assert main([str(DOCS / JSON), "--docs", str(docs)]) == 0
    assert (docs / PAGE).read_text() == (DOCS / PAGE).read_text()
    assert (docs / JSON).read_bytes() == (DOCS / JSON).read_bytes()
    made, committed = (docs / CHART).read_text(), (DOCS / CHART).read_text()
    assert chart.drawn(made) == chart.drawn(committed)  # the same boxes, the same figures
    assert _texts(made) == _texts(committed)  # the same words on it
    if f"Matplotlib v{matplotlib.__version__}," in committed:
        assert made == committed  # and, drawn by the same matplotlib, the same bytes
    assert (DOCS / JSON).stat().st_size < MAX_BYTES


def test_a_page_out_of_step_with_its_json_fails_the_docs_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = _docs(tmp_path)
    doc = json.loads((docs / JSON).read_text())
    doc["meta"]["loadavg_start"][0] = 42.0
    (docs / JSON).write_text(json.dumps(doc))
    assert docsgen_main(["--check", "--docs", str(docs)]) == 1
    assert PAGE in capsys.readouterr().err
    assert docsgen_main(["--docs", str(docs)]) == 0
    assert "load average 42.00 at the start" in (docs / PAGE).read_text()


def _refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes, docs: Path | None = None
) -> str:
    docs = docs or _docs(tmp_path)
    before = {p: p.read_bytes() for p in (docs / PAGE, docs / CHART, docs / JSON)}
    source = tmp_path / "bench.json"
    source.write_bytes(data)
    assert main([str(source), "--docs", str(docs)]) == 1
    for path, text in before.items():
        assert path.read_bytes() == text, f"{path} changed by a refused run"
    err = capsys.readouterr().err
    assert err.startswith("docsgen.performance: error: ") and err.count("\n") == 1
    assert "Traceback" not in err
    return err


def _doc(**changes: Any) -> dict[str, Any]:
    doc = run().to_dict()
    doc["meta"].update(changes)
    return doc


def _sample(value: object) -> dict[str, Any]:
    """A run whose first row's second sample is `value`."""
    doc = _doc()
    doc["sections"]["sandbox"][0]["samples_ms"][1] = value
    return doc


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[]", "the document: Input should be a valid dictionary"),
        (json.dumps(_doc(smoke=True)).encode(), "a `--smoke` run"),
        (json.dumps(_doc(errors=["part 3: boom"])).encode(), "parts of the run failed (part 3"),
        (json.dumps(_doc(started="2026-01-02T03:04:05")).encode(), "meta.started"),
        (json.dumps(_doc(loadavg_end=[])).encode(), "meta.loadavg_end"),
        (json.dumps({**_doc(), "sections": {"nope": []}}).encode(), "sections.nope"),
        (json.dumps(_sample(math.nan)).encode(), "samples_ms.1: Input should be a finite"),
        (json.dumps(_sample(-1.5)).encode(), "samples_ms.1: Input should be greater than 0"),
        (json.dumps(_sample(0.0)).encode(), "samples_ms.1: Input should be greater than 0"),
        (json.dumps(_sample(math.inf)).encode(), "samples_ms.1: Input should be a finite"),
        (json.dumps(_sample("1.5")).encode(), "samples_ms.1: Input should be a valid number"),
        (json.dumps(_doc(loadavg_start=[math.nan])).encode(), "meta.loadavg_start.0"),
        (json.dumps(_doc(wall_s=-1)).encode(), "meta.wall_s"),
        (b" " * (MAX_BYTES + 1), "KB, over the 300 KB"),
    ],
)
def test_a_bad_bench_json_is_refused_in_one_line_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes, says: str
) -> None:
    assert says in _refused(tmp_path, capsys, data)


def test_two_rows_with_one_key_and_a_run_without_samples_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _doc()
    doc["sections"]["sandbox"].append(doc["sections"]["sandbox"][0])
    assert "two rows with the key 'sandbox/cat/bare/host'" in _refused(
        tmp_path, capsys, json.dumps(doc).encode()
    )
    empty = Report(_doc()["meta"])
    empty.add(Row("sandbox", "cat", "bare", "host", []))
    assert "no row has samples" in _refused(
        tmp_path / "2", capsys, json.dumps(empty.to_dict()).encode()
    )


def test_a_missing_file_and_a_page_without_its_markers_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = _docs(tmp_path)
    assert main([str(tmp_path / "absent.json"), "--docs", str(docs)]) == 1
    assert "cannot be read (No such file or directory)" in capsys.readouterr().err
    page = docs / PAGE
    page.write_text(page.read_text().replace("<!-- docsgen: performance-split -->", ""))
    err = _refused(tmp_path, capsys, json.dumps(run().to_dict()).encode(), docs)
    assert "no `<!-- docsgen: performance-split -->` part" in err
    assert main([str(DOCS / JSON), "--docs", str(tmp_path / "nowhere")]) == 1
    assert "performance.md: cannot be read" in capsys.readouterr().err


def test_hostile_names_in_the_json_stay_inside_their_cells(tmp_path: Path) -> None:
    report = run()
    report.add(Row("scaling", "cat", "a | b <img src=x onerror=alert(1)>", "runc", [3.0],
                   BARE, note="<script>alert(1)</script> | x\n| y |"))  # fmt: skip
    _, page, svg = _made(tmp_path, report)
    line = next(x for x in page.splitlines() if "onerror" in x)
    assert "<img" not in line and "<script" not in line
    assert line.count(" | ") == 5  # six cells: the names' `|` are escaped, not columns
    assert "a | b <img src=x onerror=alert(1)>" in _texts(svg)  # text on the chart, not markup
