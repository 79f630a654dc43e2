"""Each installed distribution's RECORD in a `pip install --target` tree lists only the
files the package keeps: packaging/deb/build removes what must not ship (the scripts pip
wrote for another interpreter, direct_url.json with the build machine's path, bytecode),
and a RECORD naming them would describe files that are not there (and carry the build
path's hash, so two builds would differ)."""

import csv
import io
import sys
from pathlib import Path


def tidy(lib: Path) -> None:
    for record in sorted(lib.glob("*.dist-info/RECORD")):
        rows = list(csv.reader(io.StringIO(record.read_text(encoding="utf-8"))))
        kept = [row for row in rows if row and (lib / row[0]).resolve().is_relative_to(lib)
                and (lib / row[0]).is_file()]  # fmt: skip
        # RECORD itself is listed without a hash, and is kept
        kept += [row for row in rows if row and row[0].endswith(".dist-info/RECORD")
                 and row not in kept]  # fmt: skip
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows(kept)
        record.write_text(out.getvalue(), encoding="utf-8")


if __name__ == "__main__":
    tidy(Path(sys.argv[1]).resolve())
