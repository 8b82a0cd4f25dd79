"""Helpers shared by the benchmark scripts (bench_core, bench_coordination, bench_webhooks, bench_http, ...).

Connections and benchmark databases, data set generation with psql, statistics, bounded load
loops, pgbench runs, machine facts, markdown tables, and starting / stopping an HTTP server on 127.0.0.1.
Nothing here changes a server setting; every loop is bounded by a count and a time limit.
"""

from __future__ import annotations

import math
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "functions") not in sys.path:
    sys.path.insert(0, str(ROOT / "functions"))

from cortex import db  # noqa: E402
from cortex.config import get_settings  # noqa: E402
from cortex.migrate import migrate  # noqa: E402

DEFAULT_DSN = "postgresql://cortex:cortex@127.0.0.1:5432/cortex"


# --- connections and benchmark databases -------------------------------------------------------


def base_dsn() -> str:
    """The server to benchmark on: DATABASE_URL, else .env.local's, else the local default."""
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"]
    env_file = ROOT / ".env.local"
    if env_file.exists():
        for line in env_file.read_text().splitlines():
            if line.startswith("DATABASE_URL="):
                return line.split("=", 1)[1].strip().strip("'\"")
    return DEFAULT_DSN


def with_database(dsn: str, name: str) -> str:
    """The same server and credentials with another database name."""
    return urlparse(dsn)._replace(path="/" + name).geturl()


def dbname(dsn: str) -> str:
    """The database name of a connection URL."""
    return urlparse(dsn).path.lstrip("/")


def recreate_database(dsn: str, prefix: str, template: str | None = None) -> None:
    """Drops and creates the database of `dsn` (its name must start with `prefix`, so a wrong URL
    cannot drop real data). Without a template it is then migrated; with one it is a file copy of
    the template (fast, and no WAL for every block)."""
    name = dbname(dsn)
    if not name.startswith(prefix):
        raise SystemExit(f"refusing to drop {name!r}: the benchmark database must be named {prefix}*")
    with psycopg.connect(with_database(dsn, "postgres"), autocommit=True) as admin:
        admin.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name)))
        if template is None:
            admin.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
        else:
            admin.execute(
                sql.SQL("create database {} template {} strategy file_copy").format(
                    sql.Identifier(name), sql.Identifier(template)
                )
            )
    if template is None:
        migrate(dsn)


def load_sql(dsn: str, path: Path, variables: Mapping[str, str] | None = None) -> float:
    """Runs a SQL file with psql (stops at the first error); returns the seconds it took."""
    args = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1"]
    for k, v in (variables or {}).items():
        args += ["-v", f"{k}={v}"]
    started = time.perf_counter()
    subprocess.run([*args, "-f", str(path), dsn], check=True)
    return time.perf_counter() - started


def set_meta(dsn: str, values: Mapping[str, str]) -> None:
    """Writes key/values into bench.meta (the generators' bookkeeping table)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for key, value in values.items():
            conn.execute(
                "insert into bench.meta (key, value) values (%s, %s) "
                "on conflict (key) do update set value = excluded.value",
                (key, value),
            )


def get_meta(dsn: str) -> dict[str, str]:
    """bench.meta as a dict (empty when the database or the table is missing)."""
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
            row = conn.execute("select to_regclass('bench.meta') is not null").fetchone()
            if not row or not row[0]:
                return {}
            return dict(conn.execute("select key, value from bench.meta").fetchall())
    except psycopg.OperationalError:
        return {}


def is_complete(dsn: str) -> bool:
    """True when the benchmark database exists and its generation ran to the end."""
    return get_meta(dsn).get("complete") == "true"


def use_bench_settings(dsn: str, pool: int) -> None:
    """Points cortex.db's pool at the benchmark database, with the local summariser."""
    os.environ["DATABASE_URL"] = dsn
    os.environ["CORTEX_POOL_MIN"] = str(pool)
    os.environ["CORTEX_POOL_MAX"] = str(pool)
    os.environ.pop("ANTHROPIC_API_KEY", None)
    get_settings.cache_clear()
    db.close_pool()


# --- statistics ----------------------------------------------------------------------------------


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(p / 100.0 * len(sorted_values)))
    return sorted_values[rank - 1]


def summarise(seconds: Sequence[float], wall_seconds: float) -> dict[str, float]:
    """n, p50/p95/p99/mean/max in milliseconds and throughput per second of wall time."""
    s = sorted(seconds)
    return {
        "n": len(s),
        "p50_ms": round(percentile(s, 50) * 1000, 3),
        "p95_ms": round(percentile(s, 95) * 1000, 3),
        "p99_ms": round(percentile(s, 99) * 1000, 3),
        "mean_ms": round(sum(s) / len(s) * 1000, 3) if s else math.nan,
        "max_ms": round(s[-1] * 1000, 3) if s else math.nan,
        "throughput_per_s": round(len(s) / wall_seconds, 1) if wall_seconds > 0 else math.nan,
        "wall_s": round(wall_seconds, 2),
    }


# --- bounded load loops --------------------------------------------------------------------------


@dataclass
class LoadResult:
    """Latencies, errors and wall time of a concurrent run."""

    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall: float = 0.0


def run_concurrently(
    clients: int, duration: float, max_ops: int, make_worker: Callable[[int], Callable[[int], None]]
) -> LoadResult:
    """Runs `clients` threads, each calling its op until `duration` seconds passed or the run made
    `max_ops` calls in all; returns every latency and error."""
    result = LoadResult()
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)
    deadline = [0.0]
    count = [0]

    def loop(idx: int) -> None:
        op = make_worker(idx)
        mine: list[float] = []
        errs: list[str] = []
        barrier.wait()
        i = 0
        while time.perf_counter() < deadline[0]:
            with lock:
                if count[0] >= max_ops:
                    break
                count[0] += 1
            t0 = time.perf_counter()
            try:
                op(i)
                mine.append(time.perf_counter() - t0)
            except Exception as exc:  # recorded, the run goes on (a load test counts its errors)
                errs.append(f"{type(exc).__name__}: {exc}"[:300])
            i += 1
        with lock:
            result.latencies.extend(mine)
            result.errors.extend(errs)

    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    deadline[0] = time.perf_counter() + duration
    started = time.perf_counter()
    barrier.wait()
    for t in threads:
        t.join(duration + 60)
    result.wall = time.perf_counter() - started
    return result


def wait_for_quiet(max_load: float, max_wait: float) -> float:
    """Waits (at most max_wait seconds) until the 1-minute load average is below max_load, so other
    work on the machine does not end up in the figures; returns the load average at the start."""
    deadline = time.monotonic() + max_wait
    load = os.getloadavg()[0]
    while load >= max_load and time.monotonic() < deadline:
        print(f"waiting for a quiet machine: load average {load:.2f} >= {max_load}", flush=True)
        time.sleep(min(30.0, max(1.0, deadline - time.monotonic())))
        load = os.getloadavg()[0]
    return load


# --- pgbench -------------------------------------------------------------------------------------

# get_context level 1 in the two transaction shapes of a call: as Cortex's HTTP edge sends it (the
# claims and the call in one round trip) and as PostgREST does (begin, the claims, the call, commit).
CONTEXT_PGBENCH_SHAPES: tuple[tuple[str, Path, str], ...] = (
    ("edge", ROOT / "sql" / "bench" / "get_context_level1_edge.pgbench", "simple"),
    ("postgrest", ROOT / "sql" / "bench" / "get_context_level1.pgbench", "prepared"),
)


def pgbench(
    dsn: str,
    script: Path,
    protocol: str,
    clients: int,
    seconds: int,
    variables: Mapping[str, Any],
    output: Path | None = None,
) -> dict[str, Any]:
    """pgbench -M `protocol` over `script` with `clients` connections for `seconds` (its -D
    `variables`): tps, average latency and failed transactions, or {"skipped": why}. pgbench's own
    output goes to `output` when given."""
    threads = max(1, min(clients, os.cpu_count() or 1))
    command = ["pgbench", "-n", "-M", protocol, "-c", str(clients), "-j", str(threads), "-T", str(seconds)]
    command += [arg for k, v in variables.items() for arg in ("-D", f"{k}={v}")] + ["-f", str(script), dsn]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 120, check=False, cwd=ROOT)
    except FileNotFoundError:
        return {"skipped": "pgbench is not installed (Debian: postgresql-client)"}
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(done.stdout + done.stderr)

    def figure(label: str) -> float | None:
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith(label)), None)
        return float(line.split("=", 1)[1].split()[0]) if line else None

    tps = figure("tps")
    if done.returncode != 0 or tps is None:
        return {"skipped": f"pgbench failed (exit {done.returncode}): {(done.stderr or done.stdout).strip()[-300:]}"}
    failed = next((ln for ln in done.stdout.splitlines() if ln.startswith("number of failed transactions")), "")
    return {
        "tps": tps,
        "latency_avg_ms": figure("latency average"),
        "failed": failed.split(":", 1)[1].strip() if failed else None,
        "clients": clients,
        "threads": threads,
    }


# --- machine facts -------------------------------------------------------------------------------

PG_SETTINGS = (
    "shared_buffers",
    "work_mem",
    "effective_cache_size",
    "max_connections",
    "synchronous_commit",
    "jit",
    "random_page_cost",
    "max_wal_size",
    "checkpoint_timeout",
    "wal_level",
    "shared_preload_libraries",
    "maintenance_work_mem",
    "max_parallel_workers_per_gather",
)


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def machine_info(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """What the figures were measured on: CPU, memory, Postgres (and the settings that matter), Python."""
    mem_kb = next(
        int(ln.split()[1]) for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal")
    )
    settings = dict(
        conn.execute(
            "select name, setting || coalesce(' ' || unit, '') from pg_settings where name = any(%s) order by name",
            (list(PG_SETTINGS),),
        ).fetchall()
    )
    row = conn.execute("select version()").fetchone()
    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model(),
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "postgres": row[0] if row else "?",
        "python": platform.python_version(),
        "postgres_settings": settings,
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


# --- markdown --------------------------------------------------------------------------------------

LAT = [("p50_ms", "p50 ms"), ("p95_ms", "p95 ms"), ("p99_ms", "p99 ms"), ("throughput_per_s", "per s"), ("n", "n")]


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    """A markdown table of `rows`; columns are (key, heading)."""
    head = "| " + " | ".join(label for _, label in columns) + " |"
    sep = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(str(r.get(key, "")) for key, _ in columns) + " |" for r in rows]
    return "\n".join([head, sep, *body])


# --- HTTP servers on 127.0.0.1 ---------------------------------------------------------------------


@dataclass
class Server:
    """A server started by `serving`: its base URL and its (top) process."""

    url: str
    proc: subprocess.Popen[Any]

    def processes(self) -> list[str]:
        """The command lines of the server and its child processes (gunicorn's workers)."""
        found = [_cmdline(self.proc.pid)]
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.proc.pid:
                found.append(_cmdline(int(stat.parent.name)))
        return [c for c in found if c]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


@contextmanager
def serving(
    command: Sequence[str],
    env: Mapping[str, str],
    url: str,
    log_path: Path,
    ready_path: str = "/health",
    timeout: float = 60.0,
) -> Iterator[Server]:
    """Starts `command` (a server that listens on `url`, a loopback address), waits until
    GET ready_path answers 200 and yields it; stops the server (TERM, then KILL) after."""
    host = urlparse(url).hostname
    if host != "127.0.0.1":
        raise ValueError(f"benchmarks only target 127.0.0.1, not {host}")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        # Own process group: the server's workers are stopped with it.
        proc = subprocess.Popen(
            list(command), cwd=ROOT, env=dict(env), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            deadline = time.monotonic() + timeout
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"the server exited with {proc.returncode}; see {log_path}")
                try:
                    if httpx.get(url + ready_path, timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the server did not answer {ready_path} within {timeout:.0f} s; see {log_path}")
                time.sleep(0.3)
            yield Server(url, proc)
        finally:
            stop_process_group(proc)


@contextmanager
def http_server(
    command: Sequence[str],
    env: Mapping[str, str],
    url: str,
    log_path: Path,
    ready_path: str = "/health",
    timeout: float = 60.0,
) -> Iterator[str]:
    """`serving`, yielding only the base URL."""
    with serving(command, env, url, log_path, ready_path, timeout) as server:
        yield server.url


def stop_process_group(proc: subprocess.Popen[Any]) -> None:
    """TERM to the process and its group (gunicorn's workers), KILL after 15 s."""
    for sig, wait in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue
