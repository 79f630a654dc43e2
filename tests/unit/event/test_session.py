from __future__ import annotations

import multiprocessing
import shutil
from pathlib import Path

import pytest

from cloudrunner.event.session import SessionStateError, SessionStore


def _bump(state_dir: str, times: int) -> None:
    store = SessionStore(Path(state_dir))
    for _ in range(times):
        with store.update("conv/1") as state:
            state.loop_counts["stop:a"] = state.loop_counts.get("stop:a", 0) + 1


def test_state_survives_a_new_store_and_keeps_conversations_apart(tmp_path: Path) -> None:
    with SessionStore(tmp_path).update("c1") as state:
        state.env["A"] = "1"
        state.loop_counts["k"] = 2
    fresh = SessionStore(tmp_path)
    assert fresh.load("c1").env == {"A": "1"}
    assert fresh.load("c1").loop_counts == {"k": 2}
    assert fresh.load("c2").loop_counts == {}


def test_concurrent_processes_never_lose_an_increment(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_bump, args=(str(tmp_path), 25)) for _ in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert SessionStore(tmp_path).load("conv/1").loop_counts["stop:a"] == 150


def test_a_failing_block_writes_nothing(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    with pytest.raises(RuntimeError), store.update("c") as state:
        state.loop_counts["k"] = 9
        raise RuntimeError("boom")
    assert store.load("c").loop_counts == {}


def test_damaged_state_is_a_clear_error(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    with store.update("c") as state:
        state.loop_counts["k"] = 1
    (path,) = (tmp_path / "sessions").glob("*.json")
    path.write_text("{not json")
    with pytest.raises(SessionStateError, match=r"damaged.*move it aside"):
        store.load("c")


def test_unwritable_state_dir_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SessionStateError, match="--state-dir"), SessionStore(blocker).update("c"):
        pass


def test_persistent_loop_store_counts_up_to_the_limit_across_stores(tmp_path: Path) -> None:
    from cloudrunner.event.session import PersistentLoopCounterStore

    first = PersistentLoopCounterStore(SessionStore(tmp_path))
    assert first.try_consume("c", "stop-script", 2).allowed
    second = PersistentLoopCounterStore(SessionStore(tmp_path))
    budget = second.try_consume("c", "stop-script", 2)
    assert (budget.allowed, budget.used) == (True, 2)
    refused = second.try_consume("c", "stop-script", 2)
    assert (refused.allowed, refused.used, refused.limit) == (False, 2, 2)
    assert second.used("c", "stop-script") == 2
    assert second.try_consume("other", "stop-script", 2).used == 1
    assert all(second.try_consume("c", "unlimited", None).allowed for _ in range(7))


def test_file_names_are_a_hash_of_the_id_and_nothing_of_it(tmp_path: Path) -> None:
    ids = ["../../etc/passwd", "c\ud800", "x" * 5000, "a\x00b", "", "conv-1"]
    store = SessionStore(tmp_path)
    for n, conversation in enumerate(ids):
        with store.update(conversation) as state:
            state.loop_counts["k"] = n
    names = sorted(p.name for p in (tmp_path / "sessions").iterdir())
    assert len(names) == 2 * len(ids)  # the state and its lock, per id
    for name in names:
        stem, _, suffix = name.partition(".")
        assert suffix in ("json", "lock")
        assert stem.startswith("c-") and len(stem) == 2 + 64
        assert all(ch in "0123456789abcdef" for ch in stem[2:])
    for n, conversation in enumerate(ids):
        assert SessionStore(tmp_path).load(conversation).loop_counts == {"k": n}


def test_state_written_under_the_old_name_is_still_read(tmp_path: Path) -> None:
    import hashlib
    import json

    old = tmp_path / "sessions" / f"conv_1-{hashlib.sha256(b'conv/1').hexdigest()[:16]}.json"
    old.parent.mkdir()
    old.write_text(json.dumps({"conversation_id": "conv/1", "loop_counts": {"k": 1}}))
    store = SessionStore(tmp_path)
    assert store.load("conv/1").loop_counts == {"k": 1}
    with store.update("conv/1") as state:
        state.loop_counts["k"] += 1
    assert store.load("conv/1").loop_counts == {"k": 2}


def test_a_loop_count_that_cannot_be_written_is_reported_not_raised(tmp_path: Path) -> None:
    from cloudrunner.event.session import PersistentLoopCounterStore

    blocker = tmp_path / "file"
    blocker.write_text("")
    loops = PersistentLoopCounterStore(SessionStore(blocker))
    budget = loops.try_consume("c", "stop-script", 2)
    assert budget.allowed  # decided from the count read (none): under the limit
    (problem,) = loops.problems
    assert "session state directory" in problem and "not counted" in problem


def test_a_sessions_directory_removed_under_a_live_store_is_made_again(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    with store.update("c") as state:
        state.env["A"] = "1"
    shutil.rmtree(tmp_path / "sessions")
    with store.update("c") as state:
        assert state.env == {}
        state.env["B"] = "2"
    assert SessionStore(tmp_path).load("c").env == {"B": "2"}


def test_the_same_state_in_another_key_order_is_not_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SessionStore(tmp_path)
    with store.update("c") as state:
        state.source_hashes = {"team": "2", "enterprise": "1"}
    writes: list[object] = []
    real = SessionStore._write

    def counting(self: SessionStore, path: Path, state: object) -> None:
        writes.append(state)
        real(self, path, state)  # type: ignore[arg-type]

    monkeypatch.setattr(SessionStore, "_write", counting)
    with store.update("c") as state:  # read back in sorted order, assigned in source order
        state.source_hashes = {"team": "2", "enterprise": "1"}
    assert writes == []
    with store.update("c") as state:
        state.source_hashes = {"team": "3", "enterprise": "1"}
    assert len(writes) == 1


def _age(store: SessionStore, conversation: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Count the state file as settled (its ctime cannot be set back: the window shrinks)."""
    import cloudrunner.event.session as session_module

    monkeypatch.setattr(session_module, "SETTLED_NS", -(10**12))
    return next(store.directory.glob("c-*.json"))


@pytest.fixture
def counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[SessionStore, list[str]]:
    """A store with one conversation's state, and the paths read from its files."""
    import cloudrunner.event.session as session_module

    store = SessionStore(tmp_path)
    with store.update("c1") as state:
        state.env["A"] = "1"
    reads: list[str] = []
    real = session_module._read_bytes
    monkeypatch.setattr(session_module, "_read_bytes", lambda p: reads.append(p) or real(p))
    return store, reads


def test_an_unchanged_state_file_is_not_read_again(
    counted: tuple[SessionStore, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, reads = counted
    _age(store, "c1", monkeypatch)
    first = store.load("c1")
    first.env["B"] = "changed by a caller"  # a copy: the remembered state stays as read
    again = store.load("c1")
    assert again.env == {"A": "1"} and len(reads) == 1
    # an update is a new file: read again at once, whatever the times say
    with store.update("c1") as state:
        state.env["A"] = "2"
    assert store.load("c1").env == {"A": "2"}
    # edited in place by hand, a while ago: its size and times changed
    path = _age(store, "c1", monkeypatch)
    path.write_text(path.read_text().replace('"2"', '"3"'))
    assert store.load("c1").env == {"A": "3"}


def test_a_freshly_written_state_file_is_read_on_every_load(
    counted: tuple[SessionStore, list[str]],
) -> None:
    store, reads = counted
    store.load("c1")
    store.load("c1")
    assert len(reads) == 2


def test_a_state_file_damaged_after_it_was_remembered_is_still_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SessionStore(tmp_path)
    with store.update("c1") as state:
        state.env["A"] = "1"
    path = _age(store, "c1", monkeypatch)
    store.load("c1")
    path.write_text("{not json")
    with pytest.raises(SessionStateError, match="damaged"):
        store.load("c1")
