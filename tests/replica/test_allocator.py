"""The allocator settings a replica applies at start (shardsync.replica.allocator)."""

from __future__ import annotations

import ctypes
import subprocess
import sys


def test_tune_applies_on_glibc_and_a_large_block_freed_is_given_back() -> None:
    # In child processes: the settings last for the process. After tune(), a freed 1 MiB block is unmapped
    # at once (a fixed mmap threshold), so RSS falls back; without it glibc raises the threshold when the
    # first 2 MiB block is freed, and later 1 MiB blocks, taken from the heap, stay resident once freed.
    code = """
import ctypes
from shardsync.replica import allocator
import sys
if sys.argv[1] == "tuned":
    assert allocator.tune()
def rss():
    return int(open("/proc/self/statm").read().split()[1])
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = (ctypes.c_void_p,)
pins = []
for size in (2 << 20, 1 << 20, 1 << 20):  # untuned, freeing the first raises the threshold to 2 MiB
    blocks = []
    for _ in range(16):
        blocks.append(libc.malloc(size))
        ctypes.memset(blocks[-1], 1, size)
        pins.append(libc.malloc(100 << 10))  # from the heap top: keeps the heap from being trimmed back
    before = rss()
    for b in blocks:
        libc.free(b)
    assert rss() < before - 1000, (before, rss())
"""
    assert ctypes.CDLL(None).mallopt  # glibc here (CI image and dev machines)
    subprocess.run([sys.executable, "-c", code, "tuned"], check=True, timeout=30)
    untuned = subprocess.run([sys.executable, "-c", code, "untuned"], capture_output=True, timeout=30)
    assert untuned.returncode != 0  # the case the settings are for
