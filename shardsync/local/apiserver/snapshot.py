"""The `--data-dir` snapshot: the whole store written atomically on stop and read back on start."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

FILE_NAME = "apiserver-state.json"


def save(data_dir: Path, state: dict[str, Any]) -> Path:
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / FILE_NAME
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        f.write(orjson.dumps(state))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def load(data_dir: Path) -> dict[str, Any] | None:
    path = data_dir / FILE_NAME
    if not path.exists():
        return None
    data = orjson.loads(path.read_bytes())
    return data if isinstance(data, dict) else None
