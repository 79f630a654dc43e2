"""The glibc version an installed environment's binary wheels need (`2.17`, say): for each
wheel its oldest manylinux tag, the newest of those over all wheels (2.17 when none has
one). Used by packaging/deb/build for the package's libc6 dependency."""

import re
import sys
from pathlib import Path

LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
TAG = re.compile(r"^Tag: .*-(manylinux\w+?)_(?:x86_64|aarch64|i686|armv7l|ppc64le|s390x)$")


def needed(lib: Path) -> tuple[int, int]:
    need = (2, 17)
    for wheel in lib.glob("*.dist-info/WHEEL"):
        versions = []
        for line in wheel.read_text().splitlines():
            match = TAG.match(line.strip())
            if match is None:
                continue
            name = match.group(1)
            perennial = re.fullmatch(r"manylinux_(\d+)_(\d+)", name)
            if perennial:
                versions.append((int(perennial.group(1)), int(perennial.group(2))))
            elif name in LEGACY:
                versions.append(LEGACY[name])
        if versions:
            need = max(need, min(versions))
    return need


if __name__ == "__main__":
    major, minor = needed(Path(sys.argv[1]))
    print(f"{major}.{minor}")
