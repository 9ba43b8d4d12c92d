"""Talking to a running `shardsync local` from another shell: a Unix socket in its run directory.

One request per connection, one JSON line each way: `{"scale": N}` → `{"ok": true, "replicas": N}` or
`{"ok": false, "error": "..."}`; `{"status": true}` → `{"ok": true, ...summary}`. A socket rather than a
file the launcher polls: the caller learns at once whether a launcher is there and whether it accepted.

The socket lives in the run directory unless that path is too long for a Unix socket (about 100 bytes);
then it goes to the temp directory. Either way the file `control` in the run directory names it.

The latest launcher records its run directory in `pointer_path()` so `shardsync local scale 5` finds it
without being told; `--run-dir` picks another one.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import orjson
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from shardsync.logs import get_logger

log = get_logger(__name__)

SOCKET_NAME = "control.sock"
ADDRESS_FILE = "control"
_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux, 104 on macOS
MAX_LINE = 4096

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class ControlError(Exception):
    """No launcher answered, or it refused the request; the message says which."""


def pointer_path() -> Path:
    return Path(tempfile.gettempdir()) / f"shardsync-local-{os.getuid()}.current"


def write_pointer(run_dir: Path) -> None:
    path = pointer_path()
    tmp = path.with_name(path.name + f".{os.getpid()}")
    tmp.write_text(str(run_dir))
    tmp.replace(path)


def clear_pointer(run_dir: Path) -> None:
    """Remove the pointer if it still names `run_dir` (a newer launcher may have taken it over)."""
    path = pointer_path()
    with contextlib.suppress(OSError):
        if path.read_text().strip() == str(run_dir):
            path.unlink()


def find_run_dir(run_dir: Path | None) -> Path:
    if run_dir is not None:
        return run_dir
    try:
        return Path(pointer_path().read_text().strip())
    except OSError:
        raise ControlError("no running `shardsync local` found (give --run-dir)") from None


def socket_path(run_dir: Path) -> Path:
    path = run_dir.resolve() / SOCKET_NAME
    if len(str(path)) <= _MAX_SOCKET_PATH:
        return path
    return Path(tempfile.gettempdir()) / f"shardsync-local-{os.getpid()}.sock"


async def serve(run_dir: Path, handler: Handler) -> None:
    """Answer requests on the run directory's socket until cancelled; a bad request gets an error answer.
    The socket and its address file are removed when serving ends."""
    path = socket_path(run_dir)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    listener = await anyio.create_unix_listener(path)
    address = run_dir / ADDRESS_FILE
    address.write_text(str(path))
    try:
        async with listener:
            await listener.serve(lambda stream: _answer(stream, handler))
    finally:
        with contextlib.suppress(OSError):
            address.unlink()
        with contextlib.suppress(OSError):
            path.unlink()


async def _answer(stream: SocketStream, handler: Handler) -> None:
    async with stream:
        try:
            with anyio.fail_after(5):
                line = await BufferedByteReceiveStream(stream).receive_until(b"\n", MAX_LINE)
            request = orjson.loads(line)
            if not isinstance(request, dict):
                raise ValueError("a request is a JSON object")
            reply = await handler(request)
        except (TimeoutError, ValueError, anyio.IncompleteRead, anyio.DelimiterNotFound) as exc:
            reply = {"ok": False, "error": f"bad request: {exc}"}
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await stream.send(orjson.dumps(reply) + b"\n")


def request(run_dir: Path, message: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
    """Send one request to the launcher of `run_dir` and return its answer (blocking)."""
    try:
        path = Path((run_dir / ADDRESS_FILE).read_text().strip())
    except OSError:
        raise ControlError(f"no launcher is running in {run_dir}") from None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
        except OSError as exc:
            raise ControlError(f"no launcher answers at {path}: {exc.strerror or exc}") from None
        sock.sendall(orjson.dumps(message) + b"\n")
        data = b""
        try:
            while not data.endswith(b"\n"):
                chunk = sock.recv(MAX_LINE)
                if not chunk:
                    break
                data += chunk
        except TimeoutError:
            raise ControlError(f"the launcher did not answer within {timeout:.0f}s") from None
    try:
        reply = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise ControlError("the launcher hung up without an answer") from None
    if not isinstance(reply, dict):
        raise ControlError("the launcher's answer is not a JSON object")
    if not reply.get("ok"):
        raise ControlError(str(reply.get("error") or "refused"))
    return reply
