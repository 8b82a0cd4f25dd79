"""Settings come from the environment, then from `.env.local` (what scripts/setup writes and the
scripts source), so `.venv/bin/cortex` reaches the database the scripts set up; an explicit
environment variable always wins. No database needed: the CLI test only resolves the URL."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cortex import config
from cortex.config import Settings, find_env_file, get_settings, read_env_file
from tests.conftest import Tenant

SETUP_URL = "postgresql://cortex:cortex@127.0.0.1:5433/cortex"  # the cluster landed on 5433
OTHER_URL = "postgresql://someone:else@127.0.0.1:5432/other"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """No DATABASE_URL or CORTEX_ENV_FILE in the environment, the project root moved to an empty
    folder and the current directory in an empty one: each test writes the .env.local it needs."""
    for name in ("DATABASE_URL", "CORTEX_ENV_FILE", "CORTEX_SERVICE_KEY", "CORTEX_WORKER_POLL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(config, "PROJECT_ROOT", tmp_path / "root")
    (tmp_path / "root").mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def write(path: Path, text: str) -> Path:
    """Writes `text` to `path` (folders created) and returns the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_env_file_in_the_current_directory_gives_the_database_url(clean_env: Path) -> None:
    write(clean_env / "work" / ".env.local", f"DATABASE_URL={SETUP_URL}\nCORTEX_TEST_DSN=x\n")
    assert Settings().database_url == SETUP_URL


def test_found_walking_up_from_a_subdirectory(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = write(clean_env / "work" / ".env.local", f"DATABASE_URL={SETUP_URL}\n")
    deep = clean_env / "work" / "docs" / "deeper"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    assert find_env_file() == env
    assert Settings().database_url == SETUP_URL


def test_project_root_file_when_none_above_the_current_directory(clean_env: Path) -> None:
    env = write(clean_env / "root" / ".env.local", f"DATABASE_URL={SETUP_URL}\n")
    assert find_env_file() == env
    assert Settings().database_url == SETUP_URL


def test_the_nearest_file_wins_over_the_project_root(clean_env: Path) -> None:
    write(clean_env / "root" / ".env.local", f"DATABASE_URL={OTHER_URL}\n")
    write(clean_env / "work" / ".env.local", f"DATABASE_URL={SETUP_URL}\n")
    assert Settings().database_url == SETUP_URL


def test_an_explicit_environment_variable_wins(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(clean_env / "work" / ".env.local", f"DATABASE_URL={SETUP_URL}\nCORTEX_WORKER_POLL=9\n")
    monkeypatch.setenv("DATABASE_URL", OTHER_URL)
    settings = Settings()
    assert settings.database_url == OTHER_URL
    assert settings.worker_poll_seconds == 9.0  # what the environment lacks still comes from the file


def test_without_any_file_the_default_applies(clean_env: Path) -> None:
    assert find_env_file() is None
    assert Settings().database_url == "postgresql://cortex:cortex@127.0.0.1:5432/cortex"


def test_cortex_env_file_names_the_file_or_none(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(clean_env / "work" / ".env.local", f"DATABASE_URL={OTHER_URL}\n")
    chosen = write(clean_env / "elsewhere.env", f"DATABASE_URL={SETUP_URL}\n")
    monkeypatch.setenv("CORTEX_ENV_FILE", str(chosen))
    assert Settings().database_url == SETUP_URL
    monkeypatch.setenv("CORTEX_ENV_FILE", "")
    assert find_env_file() is None
    assert Settings().database_url == "postgresql://cortex:cortex@127.0.0.1:5432/cortex"


def test_reads_what_a_shell_would_source(tmp_path: Path) -> None:
    env = write(
        tmp_path / ".env.local",
        "# written by cortex scripts/setup\n"
        "\n"
        "DATABASE_URL=postgresql://cortex:cortex@127.0.0.1:5433/cortex\n"
        "export CORTEX_SERVICE_KEY='s3cret with spaces'\n"
        'CORTEX_JWT_SECRET="abc=def"\n'
        "not a variable line\n"
        "1BAD=x\n",
    )
    assert read_env_file(env) == {
        "DATABASE_URL": "postgresql://cortex:cortex@127.0.0.1:5433/cortex",
        "CORTEX_SERVICE_KEY": "s3cret with spaces",
        "CORTEX_JWT_SECRET": "abc=def",
    }
    assert read_env_file(tmp_path / "missing") == {}


def test_the_cli_reads_env_local_and_the_environment_wins(dsn: str, tenant: Tenant, tmp_path: Path) -> None:
    """The reported bug: `.venv/bin/cortex` ignored .env.local and answered from another database.
    Run as a user would, in a fresh process, from a folder whose .env.local names the test database."""
    write(tmp_path / ".env.local", f"DATABASE_URL={dsn}\n")
    exe = str(Path(sys.executable).with_name("cortex"))
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CORTEX_ENV_FILE")}
    out = subprocess.run(
        [exe, "--json", "tenants", "list"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert tenant.slug in out.stdout
    # An explicit DATABASE_URL wins over the file: here one that cannot connect, so the command fails.
    env["DATABASE_URL"] = "postgresql://nobody:wrong@127.0.0.1:1/none?connect_timeout=2"
    out = subprocess.run(
        [exe, "--json", "tenants", "list"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode != 0
    assert tenant.slug not in out.stdout
