"""The Dockerfile: what the image promises (multi-stage, non-root 65532, entrypoint, labels), and, since no
container engine runs in CI, its build stage repeated in a fresh venv (marked `image`: it installs from
PyPI, ~20 s) with `shardsync run --help` started from the result under the image's environment."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import shardsync
from tests.deploy.manifests import ROOT

DOCKERFILE = ROOT / "Dockerfile"
LOCK = ROOT / "requirements.lock"
DOCKERIGNORE = ROOT / ".dockerignore"
VENV_IN_IMAGE = "/opt/shardsync"


@dataclass(frozen=True)
class Instruction:
    stage: int
    name: str
    args: str


def instructions() -> list[Instruction]:
    """The Dockerfile's instructions (continuations joined, comments dropped), each with its stage index."""
    logical, current = [], ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    out, stage = [], -1
    for text in logical:
        name, _, args = text.strip().partition(" ")
        if name.upper() == "FROM":
            stage += 1
        out.append(Instruction(stage, name.upper(), args.strip()))
    return out


def build_args() -> dict[str, str]:
    """ARG defaults declared anywhere (`ARG NAME=value`)."""
    return dict(i.args.split("=", 1) for i in instructions() if i.name == "ARG" and "=" in i.args)


def final_stage() -> list[Instruction]:
    last = max(i.stage for i in instructions())
    return [i for i in instructions() if i.stage == last]


def image_env() -> dict[str, str]:
    """The final stage's ENV (`K=V` pairs), with ${VAR} left for the caller to expand."""
    env: dict[str, str] = {}
    for i in final_stage():
        if i.name == "ENV":
            for pair in shlex.split(i.args):
                key, _, value = pair.partition("=")
                env[key] = value
    return env


def test_multi_stage_on_a_slim_python_base() -> None:
    froms = [i.args for i in instructions() if i.name == "FROM"]
    assert len(froms) >= 2
    assert froms[0].endswith(" AS build")
    base = build_args()["PYTHON_IMAGE"]
    assert re.fullmatch(r"python:3\.1[1-9]-slim(-\w+)?", base), base


def test_final_stage_runs_shardsync_as_65532() -> None:
    final = {i.name: i.args for i in final_stage()}
    assert final["USER"] == "65532:65532"
    assert json.loads(final["ENTRYPOINT"]) == ["shardsync"]
    assert json.loads(final["CMD"]) == ["run"]
    assert final["EXPOSE"] == "7979"
    copied = [i.args for i in final_stage() if i.name == "COPY"]
    assert copied == [f"--from=build {VENV_IN_IMAGE} {VENV_IN_IMAGE}"]  # the venv, nothing else


def test_read_only_root_friendly_environment() -> None:
    env = image_env()
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["HOME"] == "/tmp"  # the emptyDir deploy/base mounts
    assert env["PATH"].startswith(f"{VENV_IN_IMAGE}/bin:")


def test_oci_labels_and_version() -> None:
    labels = dict(
        pair.split("=", 1) for i in final_stage() if i.name == "LABEL" for pair in shlex.split(i.args)
    )
    for key in ("title", "description", "version", "licenses"):
        assert labels.get(f"org.opencontainers.image.{key}"), key
    assert build_args()["VERSION"] == shardsync.__version__


def _ignored(path: str) -> bool:
    """.dockerignore's verdict on a top-level path (last matching pattern wins; `!` re-includes)."""
    verdict = False
    for raw in DOCKERIGNORE.read_text(encoding="utf-8").splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(path, pattern):
            verdict = not negate
    return verdict


def copy_sources() -> list[tuple[list[str], str]]:
    """The build stage's COPY instructions: (sources, destination)."""
    out = []
    for i in instructions():
        if i.stage == 0 and i.name == "COPY":
            *sources, dest = i.args.split()
            out.append((sources, dest))
    return out


def test_dockerignore_keeps_what_the_build_copies_and_little_else() -> None:
    sources = [s for group, _ in copy_sources() for s in group]
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), source
        assert not _ignored(source.rstrip("/")), f"{source} is excluded by .dockerignore"
    for other in ("tests", "bench", "deploy", ".git", "examples"):
        assert _ignored(other), other


def locked() -> dict[str, tuple[str, int]]:
    """requirements.lock's pins: canonical name → (version, number of hashes)."""
    pins: dict[str, tuple[str, int]] = {}
    entries = " ".join(LOCK.read_text(encoding="utf-8").replace("\\\n", " ").splitlines()).split()
    current = ""
    for word in entries:
        if "==" in word and not word.startswith("--"):
            name, version = word.split("==", 1)
            current = canonicalize_name(name)
            pins[current] = (version, 0)
        elif word.startswith("--hash=") and current:
            version, hashes = pins[current]
            pins[current] = (version, hashes + 1)
    return pins


def test_the_lock_pins_every_dependency_within_pyproject_ranges_with_hashes() -> None:
    # Two builds of the image install the same versions: the build stage installs from the lock alone.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pins = locked()
    assert pins and all(hashes for _, hashes in pins.values()), "a pin without a hash"
    for text in project["dependencies"]:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not in requirements.lock: regenerate it (see the Dockerfile)"
        assert req.specifier.contains(pins[name][0]), f"{name}=={pins[name][0]} is outside {req.specifier}"
    (run,) = [i.args for i in instructions() if i.stage == 0 and i.name == "RUN"]
    assert "--require-hashes" in run and "-r requirements.lock" in run and "--no-deps ." in run


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


@pytest.mark.image
@pytest.mark.multiprocess
def test_the_build_stage_installs_a_working_shardsync(tmp_path: Path) -> None:
    if shutil.which("bash") is None:
        pytest.skip("bash is needed to run the Dockerfile's RUN step")
    context, venv, home = tmp_path / "src", tmp_path / "venv", tmp_path / "home"
    context.mkdir()
    home.mkdir()
    # COPY: the sources the build stage copies, into the work dir (WORKDIR /src), as the image does.
    # Docker's rules for a destination ending in `/`: a file lands inside it, a directory's contents do.
    for sources, dest in copy_sources():
        assert dest.endswith("/"), dest
        into = context / dest
        into.mkdir(parents=True, exist_ok=True)
        for source in sources:
            if (ROOT / source).is_dir():
                shutil.copytree(
                    ROOT / source,
                    into,
                    dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                )
            else:
                shutil.copy2(ROOT / source, into / Path(source).name)
    # RUN: the build stage's own command, with the venv moved under tmp_path and `python` this interpreter.
    (run,) = [i.args for i in instructions() if i.stage == 0 and i.name == "RUN"]
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python").symlink_to(sys.executable)
    env = {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    built = subprocess.run(
        ["bash", "-euc", run.replace(VENV_IN_IMAGE, str(venv))],
        cwd=context,
        env=env,
        capture_output=True,
        text=True,
        timeout=420,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert list((venv / "lib").glob("python3*/site-packages/shardsync/__pycache__/*.pyc")), "not precompiled"

    # Start it as the image would: its ENV, from an unrelated directory, the venv left untouched.
    image = {
        k: v.replace(VENV_IN_IMAGE, str(venv)).replace("${PATH}", "/usr/bin:/bin")
        for k, v in image_env().items()
    }
    image["HOME"] = str(home)
    before = _snapshot(venv)
    for args in (["run", "--help"], ["--version"]):
        out = subprocess.run(
            ["shardsync", *args],
            cwd=home,
            env=image,
            capture_output=True,
            text=True,
            timeout=60,
            executable=str(venv / "bin" / "shardsync"),
        )
        assert out.returncode == 0, out.stderr[-3000:]
        if args[0] == "run":
            assert "--txt-owner-id" in out.stdout and "--rfc2136-tsig-keyname" in out.stdout
        else:
            assert shardsync.__version__ in out.stdout
    assert _snapshot(venv) == before, "running shardsync wrote into its install (read-only in the image)"
