"""The life cycle of one session agent container, as one state machine.

Two reader threads (the attach stream's and, once adopted, the socket's) and the threads
running hooks all move a container through it, so every transition is here, under one
lock, checked against one table (`NEXT`); a transition the table does not allow is a late
event that cannot change the outcome (a hello after the container failed, a second end of
its channel) and is refused, returning False.

    WAITING --hello--> READY
    WAITING, READY --fail--> FAILED        (a reason; the hooks in flight are answered)
    WAITING, READY, FAILED --channel closed--> ENDING   (its exit is being read)
    ENDING --ended--> GONE

The request channel is the attach stream until a socket is adopted, which happens only
while WAITING (the agent's first frame on it is its hello).
"""

from __future__ import annotations

import enum
import threading


class Phase(enum.Enum):
    WAITING = "waiting for the agent's hello"
    READY = "ready"
    FAILED = "failed"
    ENDING = "its channel closed"
    GONE = "gone"


class Channel(enum.Enum):
    ATTACH = "attach"
    SOCKET = "socket"


NEXT: dict[Phase, frozenset[Phase]] = {
    Phase.WAITING: frozenset({Phase.READY, Phase.FAILED, Phase.ENDING}),
    Phase.READY: frozenset({Phase.FAILED, Phase.ENDING}),
    Phase.FAILED: frozenset({Phase.ENDING}),
    Phase.ENDING: frozenset({Phase.GONE}),
    Phase.GONE: frozenset(),
}


class AgentLifecycle:
    """Where one agent container is in its life, and why it failed, if it did.

    `settled` is set once the WAITING phase is over (hello, failure or end: what
    `wait_for_agent` waits for); `gone` once the container's end has been read;
    `attach_done` once the attach stream closed (its reader drained the agent's stderr).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.phase = Phase.WAITING
        self.channel = Channel.ATTACH
        #: why the container failed (None while it has not): kept from the first failure
        self.reason: str | None = None
        self.settled = threading.Event()
        self.gone = threading.Event()
        self.attach_done = threading.Event()

    def _move(self, to: Phase) -> bool:
        """The one place the phase changes (the caller holds the lock)."""
        if to not in NEXT[self.phase]:
            return False
        self.phase = to
        self.settled.set()  # every move leaves WAITING or is past it
        if to is Phase.GONE:
            self.gone.set()
        return True

    def hello(self) -> bool:
        """The agent said hello: it is ready, unless it already failed or ended."""
        with self._lock:
            return self._move(Phase.READY)

    def adopt_socket(self) -> bool:
        """Requests go over the adopted socket from now on (only before the hello)."""
        with self._lock:
            if self.phase is not Phase.WAITING or self.channel is Channel.SOCKET:
                return False
            self.channel = Channel.SOCKET
            return True

    def fail(self, reason: str) -> str:
        """The container failed (or its end was read): keep the first reason, leave
        WAITING or READY for FAILED; the reason kept is returned."""
        with self._lock:
            if self.reason is None:
                self.reason = reason
            self._move(Phase.FAILED)
            self.settled.set()
            return self.reason

    def channel_closed(self) -> bool:
        """The request channel closed: True for the one caller that reads the end."""
        with self._lock:
            return self._move(Phase.ENDING)

    def ended(self) -> bool:
        """The end was read (and every hook in flight answered): the container is gone."""
        with self._lock:
            return self._move(Phase.GONE)

    def attach_closed(self) -> Channel:
        """The attach stream closed; which channel carried the requests then."""
        self.attach_done.set()
        with self._lock:
            return self.channel
