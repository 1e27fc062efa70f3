"""Python as on Windows, on Linux: what Windows' CPython lacks is taken away in every process
that starts with this folder on ``PYTHONPATH`` (CI's second, portable run of the process tests).

* ``socket.AF_UNIX`` (python/cpython#77589): the channel falls back to loopback TCP, as on a
  Windows without named pipes, and ``socket.socketpair`` is a loopback TCP pair, as there;
* ``os.fork``: no code path may fork;
* ``fcntl``'s file locks (``flock``, ``lockf``): no code path may lock a file with them (the
  module stays: libraries that branch on ``sys.platform``, as the MCP SDK's stdio server does,
  still import it for a descriptor flag on POSIX);
* inotify: ``watchfiles`` polls, as it does where no native watch works.

Named pipes themselves cannot be had off Windows; loopback TCP carries the same channel, with
the same key.
"""

import os
import socket

for name in ("AF_UNIX",):
    if hasattr(socket, name):
        delattr(socket, name)


def _socketpair(family: int = socket.AF_INET, type: int = socket.SOCK_STREAM,
                proto: int = 0) -> tuple[socket.socket, socket.socket]:
    """``socket.socketpair`` as Windows' Python makes it: two ends of a loopback TCP
    connection (asyncio's event loop wakes itself through one)."""
    listener = socket.socket(family, type, proto)
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    finally:
        listener.close()
    return server, client


socket.socketpair = _socketpair
if hasattr(os, "fork"):
    del os.fork
if hasattr(os, "forkpty"):
    del os.forkpty
import fcntl  # noqa: E402

for name in ("flock", "lockf"):
    if hasattr(fcntl, name):
        delattr(fcntl, name)
os.environ["WATCHFILES_FORCE_POLLING"] = "1"
