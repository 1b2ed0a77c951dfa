"""What a user gets from `pip install resumable-exec`: a small core, LICENSE and the examples.

Built and installed for real: a wheel from this checkout, installed by its distribution name
(with and without extras) into fresh virtual environments, as from the package index.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import httpx
import pytest

from resumable.extras import DISTRIBUTION

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
"""The environment of a user's shell: nothing points Python at this checkout's sources."""


def installed(
    env: Path, *args: str, cwd: Path | None = None, environ: dict[str, str] = OUTSIDE
) -> subprocess.CompletedProcess[str]:
    """The `resumable` command of the fresh environment, as a user's shell runs it."""
    return subprocess.run(
        [str(env / "bin" / "resumable"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
        env=OUTSIDE,
    )
    (built,) = out.glob("*.whl")
    return built


def env_with(requirement: str, wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv where `pip install REQUIREMENT` found this wheel by its name."""
    env = tmp_path_factory.mktemp("venv")
    venv.create(env, with_pip=True)
    pip = [str(env / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "--find-links", str(wheel.parent), requirement],
        check=True,
        capture_output=True,
        timeout=600,
        env=OUTSIDE,
    )
    return env


@pytest.fixture(scope="module")
def fresh_env(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return env_with(DISTRIBUTION, wheel, tmp_path_factory)


@pytest.fixture(scope="module")
def ui_env(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return env_with(f"{DISTRIBUTION}[ui]", wheel, tmp_path_factory)


def test_the_wheel_is_named_for_the_package_index(wheel: Path) -> None:
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"] == DISTRIBUTION
    assert wheel.name.startswith("resumable_exec-")


def test_the_wheel_carries_license_and_examples(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith("licenses/LICENSE") for n in names)
    assert "resumable/examples/scenario/main.pb" in names
    assert "resumable/examples/scenario/main.responses.toml" in names
    assert "resumable/examples/ledger.py" in names
    assert "resumable/py.typed" in names
    assert "resumable/ui/templates/run.html" in names
    assert "resumable/ui/static/live.js" in names


def test_the_wheel_and_version_name_where_the_project_lives(wheel: Path, fresh_env: Path) -> None:
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    assert list(urls) == ["Homepage", "Documentation", "Issues", "Source"]
    assert all(url.startswith(urls["Homepage"]) for url in urls.values())
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        fields = archive.read(name).decode().splitlines()
    listed = [f.removeprefix("Project-URL: ") for f in fields if f.startswith("Project-URL: ")]
    assert listed == [f"{label}, {url}" for label, url in urls.items()]
    shown = installed(fresh_env, "--version").stdout.splitlines()
    assert shown[1:] == [f"{label}: {url}" for label, url in urls.items()]


def test_core_install_has_no_server_drivers(fresh_env: Path) -> None:
    listed = subprocess.run(
        [str(fresh_env / "bin" / "pip"), "list", "--format=freeze"],
        check=True,
        capture_output=True,
        text=True,
        env=OUTSIDE,
    ).stdout.lower()
    installed = {line.split("==")[0] for line in listed.splitlines()}
    assert not installed & {"asyncpg", "redis", "cryptography", "aiofiles"}
    assert "msgpack" in installed


def test_installed_examples_run_by_name(fresh_env: Path, tmp_path: Path) -> None:
    run = installed(fresh_env, "run", "scenario", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "Done: 42, 32" in run.stdout
    listed = installed(fresh_env, "examples", cwd=tmp_path)
    assert "resumable run scenario" in listed.stdout


@pytest.mark.parametrize(
    ("settings", "extra"),
    [
        ('store = "postgres"\nurl = "postgresql://127.0.0.1/test"', "postgres"),
        ('store = "redis"\nurl = "redis://127.0.0.1:6379/0"', "redis"),
        ('encrypt = true\nencryption_key_env = "K"', "encryption"),
    ],
)
def test_a_missing_extra_is_one_line(
    fresh_env: Path, tmp_path: Path, settings: str, extra: str
) -> None:
    config = tmp_path / "playbooks.toml"
    config.write_text(f"[durability]\n{settings}\n")
    run = installed(
        fresh_env,
        "run",
        "scenario",
        "--config",
        str(config),
        cwd=tmp_path,
        environ={"K": "0" * 64, "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 2
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert f"pip install 'resumable-exec[{extra}]'" in run.stderr
    assert not (tmp_path / ".resumable").exists() or not any(
        (tmp_path / ".resumable").rglob("*.seg")
    )


def test_the_inspector_without_its_extra_is_one_line(fresh_env: Path, tmp_path: Path) -> None:
    run = installed(fresh_env, "ui", "--port", "0", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.splitlines() == [
        "resumable: error: resumable ui needs the starlette package, which is not installed: "
        "pip install 'resumable-exec[ui]'"
    ]


def test_installed_with_the_ui_extra_the_inspector_starts(ui_env: Path, tmp_path: Path) -> None:
    listed = subprocess.run(
        [str(ui_env / "bin" / "pip"), "list", "--format=freeze"],
        check=True,
        capture_output=True,
        text=True,
        env=OUTSIDE,
    ).stdout.lower()
    assert f"{DISTRIBUTION}==" in listed
    assert "starlette==" in listed
    (tmp_path / "hi.py").write_text("print('hi')\n")  # a store with a run for it to show
    assert installed(ui_env, "exec", "hi.py", "--run-id", "hi-1", cwd=tmp_path).returncode == 0
    server = subprocess.Popen(
        [str(ui_env / "bin" / "resumable"), "ui", "--port", "0"],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
        env=OUTSIDE,
    )
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        found = re.search(r"inspector at (http://\S+)", line)
        assert found, line
        page = httpx.get(found.group(1), timeout=30)
        assert page.status_code == 200
        assert "hi-1" in page.text
    finally:
        server.terminate()
        server.wait(timeout=30)
        if server.stderr is not None:
            server.stderr.close()


def test_with_an_extra_installed_the_hint_for_another_names_the_distribution(
    ui_env: Path, tmp_path: Path
) -> None:
    config = tmp_path / "playbooks.toml"
    config.write_text('[durability]\nstore = "redis"\nurl = "redis://127.0.0.1:6379/0"\n')
    run = installed(ui_env, "run", "scenario", "--config", str(config), cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.strip().endswith("pip install 'resumable-exec[redis]'"), run.stderr
