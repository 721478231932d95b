"""Reading docker's multiplexed attach stream (no daemon needed): the report is complete only
when both streams carry their end mark, whatever order docker relays the two pipes in."""

import socket
import struct
import time

from marft_envs.code.sandbox.docker_backend import _read_frames

NONCE = b"0123456789abcdef0123456789abcdef"


def frame(stream: int, data: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + struct.pack(">I", len(data)) + data


def read(frames: list[bytes], deadline_s: float = 2.0):
    host, container = socket.socketpair()
    with host, container:
        container.sendall(b"".join(frames))
        return _read_frames(host, time.monotonic() + deadline_s, {1: 1 << 20, 2: 1 << 20}, NONCE)


def test_stderr_relayed_after_the_stdout_trailer_is_kept():
    trailer = NONCE + b"e30=" + NONCE  # base64 of "{}"
    out, err, outcome = read(
        [frame(1, b"hello\n" + trailer), frame(2, b"SyntaxError: invalid syntax\n" + NONCE)]
    )
    assert outcome == "report"
    assert out == b"hello\n" + trailer
    assert err == b"SyntaxError: invalid syntax\n"


def test_the_report_waits_for_the_stderr_mark():
    trailer = NONCE + b"e30=" + NONCE
    out, err, outcome = read([frame(1, trailer)], deadline_s=0.3)
    assert outcome == "deadline" and out == trailer and err == b""
