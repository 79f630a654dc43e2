"""Reading a file of an untrusted repository: it must resolve inside the repository.

A repository is untrusted input. A file the worker reads from it (`.cursor/hooks.json`,
`.cursor/environment.json`, the Dockerfile and `.dockerignore` that file names) could be a
symlink to a file elsewhere on the worker host, whose content would then reach parsers,
error messages, answers and audit records. `read_inside` refuses such a file before reading
a byte of it, and checks the file it actually opened (the kernel's name for the open file
descriptor), so a symlink swapped in between the check and the open is refused too. FIFOs,
devices and directories are refused without blocking, and a size cap bounds the read.

A refusal names the path in the repository, where it leads and why; it never quotes
anything the file outside contains.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from cloudrunner.errors import CloudrunnerError
from cloudrunner.protocol.diagnostic_codes import DiagnosticCode


class RepoFileRefused(CloudrunnerError):
    """A repository file that exists but must not (or cannot) be read.

    `code` is stable: symlink-escape, dangling-symlink, not-regular, too-large, unreadable.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def inside(path: str, root: str) -> bool:
    """Whether the (already resolved) `path` is `root` or below it."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


_DELETED = " (deleted)"


def real_path(path: str | os.PathLike[str]) -> str:
    """`os.path.realpath(path)`, asked of the kernel: the path is opened with O_PATH (no
    read, no permission on the file itself needed) and the descriptor's name read back
    from /proc, three system calls where `os.path.realpath` makes one `lstat` per
    component and works out the rest in Python (a third of the time on the event path,
    which resolves half a dozen paths per event). A path that cannot be opened so (it
    does not exist, a dangling or looping link, no search permission, no /proc) and one
    unlinked in between get `os.path.realpath`'s answer, so the result is the same."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except (OSError, ValueError):
        return os.path.realpath(path)
    try:
        named = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        named = ""
    finally:
        os.close(fd)
    if not named.startswith(os.sep) or named.endswith(_DELETED):
        return os.path.realpath(path)
    return named


def resolves_inside(path: Path, root: Path) -> bool:
    """Whether `path`, symlinks followed, lies inside `root` (symlinks followed)."""
    return inside(real_path(path), real_path(root))


def open_inside(path: Path, root: Path) -> int:
    """A read-only descriptor of the regular file `path`, which must resolve inside `root`;
    the caller closes it. Raises as `read_inside` does (a too-large file excepted)."""
    os.lstat(path)  # FileNotFoundError: no file at all
    real = real_path(path)
    real_root = real_path(root)
    if not inside(real, real_root):
        raise RepoFileRefused(DiagnosticCode.SYMLINK_ESCAPE, _escape(path, real, root))
    try:
        # O_NONBLOCK: opening a FIFO must not hang the worker; the fstat below refuses it.
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise RepoFileRefused(
            DiagnosticCode.DANGLING_SYMLINK, f"{path} is a symlink to a file that does not exist"
        ) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RepoFileRefused(
                DiagnosticCode.SYMLINK_ESCAPE, f"{path} changed into a symlink while being read"
            ) from None
        raise RepoFileRefused(
            DiagnosticCode.UNREADABLE, f"cannot open {path}: {exc.strerror}"
        ) from None
    try:
        opened = _opened_path(fd)
        if opened is not None and not inside(opened, real_root):
            raise RepoFileRefused(DiagnosticCode.SYMLINK_ESCAPE, _escape(path, opened, root))
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise RepoFileRefused(
                DiagnosticCode.NOT_REGULAR, f"{path} is {kind}; it must be a regular file"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_inside(path: Path, root: Path, *, max_bytes: int, limit: str = "") -> bytes:
    """The bytes of the regular file `path`, which must resolve inside `root`.

    Raises FileNotFoundError when nothing is at `path` (not even a dangling symlink), and
    `RepoFileRefused` when the file must not or cannot be read. `limit` describes
    `max_bytes` for the too-large message ("1 MiB").
    """
    fd = open_inside(path, root)
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise RepoFileRefused(
                DiagnosticCode.TOO_LARGE, _too_large(path, size, max_bytes, limit)
            )
        chunks = []
        total = 0
        while total <= max_bytes:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:  # grew while being read
            raise RepoFileRefused(
                DiagnosticCode.TOO_LARGE, _too_large(path, total, max_bytes, limit)
            )
        return b"".join(chunks)
    except OSError as exc:
        raise RepoFileRefused(
            DiagnosticCode.UNREADABLE, f"cannot read {path}: {exc.strerror}"
        ) from None
    finally:
        os.close(fd)


def _escape(path: Path, real: str, root: Path) -> str:
    return (
        f"{path} resolves to {real}, outside {root}; a file the worker reads from a "
        "repository must lie inside it (replace the symlink with the file itself)"
    )


def _opened_path(fd: int) -> str | None:
    """The path the kernel opened for `fd` (None where /proc does not say)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def _too_large(path: Path, size: int, max_bytes: int, limit: str) -> str:
    shown = f"{max_bytes} byte ({limit})" if limit else f"{max_bytes} byte"
    return f"{path} is {size} bytes, over the {shown} limit"
