"""`cloudrunner serve`: the daemon.

The event path (`core`: workers, sessions, draining, over `threads`' worker pool) and the
front door (`listeners`: uvicorn on the sockets; `connections`: deadlines, caps and
connection bounds; `app`: the ASGI app; `models` and `openapi`: the API's bodies and its
document; `metrics`; `memory`) live here side by side.
"""
