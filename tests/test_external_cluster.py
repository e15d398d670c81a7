"""A build on a real external cluster: `dask scheduler` and two `dask worker` commands, as a user runs them.

The scheduler and the workers are their own processes, started from the command line on
127.0.0.1 (the scheduler on a port the system picks, written to a scheduler file the workers
read), each worker one process of one thread with its own scratch folder. `pivot build
--scheduler` then sends the sharded stages' tasks to them, and the database must be the one a
`--workers 1` build writes in its own process: the same signature and every row of every table
the same, the meta included but for the seconds it records (``stage_seconds`` and each LM's
``seconds``), which differ between any two builds and so make the two files' bytes differ.
The test sets exactly those aside: any other difference fails it.

The recipe: the WMT biomedical EDP and Scielo articles (sentences of at most 25 tokens: 2,740
pairs), so that extract has 6 shards of 500 pairs, the merges 8 key ranges each and the
pivot 8 row ranges: every sharded stage is several tasks, spread over both workers.
"""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pivot
from pivot.cli import main
from pivot.store.db import ParaphraseDB

DATA = Path(os.environ.get("PIVOT_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not (DATA / "bitext").is_dir(), reason=f"real data not found at {DATA} (set PIVOT_DATA)"),
]

RECIPE = """
name = "cluster"
[[bitext]]
lang = "fr"
sources = [
  { name = "wmt-edp", format = "parallel", en = "bitext/wmt-biomed-fr-en/train/edp_d1.en", f = "bitext/wmt-biomed-fr-en/train/edp_d1.fr" },
  { name = "wmt-scielo", format = "parallel", en = "bitext/wmt-biomed-fr-en/train/scielo_d1.en", f = "bitext/wmt-biomed-fr-en/train/scielo_d1.fr" },
]
[preprocess]
max_tokens = 25
[extract]
shard_sentences = 500
[pivot]
min_p_e2_given_e1 = 0.01
[domain]
order = 3
in_domain = { conll = ["mono/bio-ner/GENIA-pos/devel.tsv"] }
[ppdb2]
# a slice this small stores too few rated pairs to fit the score: the cluster's part is the pivot
learn = false
wordnet = false
lhs = "x"
"""

#: Seconds the scheduler and the workers may take to come up (a loaded 2-core machine).
START_TIMEOUT = 60


def dask_command() -> str:
    """The `dask` command of this interpreter's environment (the one a user's cluster runs)."""
    path = Path(sys.executable).parent / "dask"
    assert path.is_file(), f"no dask command beside {sys.executable}: install distributed in this environment"
    return str(path)


def start(cmd: list[str], log: Path, cwd: Path) -> subprocess.Popen:
    """Start a command in ``cwd``, in a session of its own (so that teardown reaches its children),
    its output to a file."""
    with open(log, "wb") as fh:
        return subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd,
                                start_new_session=True)


def stop(procs: list[subprocess.Popen]) -> None:
    """SIGTERM to each process group (a dask worker's nanny and its worker process), then SIGKILL."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
        try:  # a worker process the nanny left behind is in the same group
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def wait_for_file(path: Path, procs: list[subprocess.Popen], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.is_file() or not path.stat().st_size:
        for p in procs:
            assert p.poll() is None, f"{p.args[:2]} exited with {p.returncode} while starting"
        assert time.monotonic() < deadline, f"{path} not written in {timeout} s"
        time.sleep(0.2)


def content(db_path: Path) -> tuple[dict, dict]:
    """(every table's rows in key order, the meta as parsed JSON without the build's stage timings; those)."""
    with sqlite3.connect(db_path) as conn:
        tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        out = {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in tables if t != "meta"}
        meta = {k: json.loads(v) for k, v in conn.execute("SELECT key, value FROM meta")}
    timings = {"stage_seconds": meta.pop("stage_seconds")}
    # the LMs' estimate times stay in the lm stage's timings.json, out of the meta
    assert not any("seconds" in model for model in meta["lm"]["models"].values())
    out["meta"] = meta
    return out, timings


#: Tasks a worker has run (its state machine's counter); a lambda, so that it travels by value
#: (the workers cannot import this test module).
executed = lambda dask_worker: dask_worker.state.executed_count  # noqa: E731


def test_external_cluster_builds_the_same_database(tmp_path, workers_left, monkeypatch):
    from distributed import Client

    # The build runs in tmp_path with a relative --work; each worker runs in a folder of its own,
    # as on another machine: every path a task gets must be absolute.
    monkeypatch.chdir(tmp_path)
    recipe = tmp_path / "cluster.toml"
    recipe.write_text(RECIPE)
    scheduler_file = tmp_path / "scheduler.json"
    dask = dask_command()
    procs = []
    try:
        procs.append(start([dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                            "--scheduler-file", str(scheduler_file)], tmp_path / "scheduler.log", tmp_path))
        wait_for_file(scheduler_file, procs, START_TIMEOUT)
        address = json.loads(scheduler_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        for k in range(2):
            scratch = tmp_path / f"worker-{k}"
            scratch.mkdir()
            procs.append(start([dask, "worker", "--scheduler-file", str(scheduler_file), "--host", "127.0.0.1",
                                "--nworkers", "1", "--nthreads", "1", "--no-dashboard",
                                "--local-directory", str(scratch), "--name", f"w{k}"],
                               tmp_path / f"worker-{k}.log", scratch))
        with Client(address, timeout=START_TIMEOUT) as client:
            client.wait_for_workers(2, timeout=START_TIMEOUT)
            # The workers run this environment's pivot: the same package this process imports
            # (an editable install, or this checkout on PYTHONPATH).
            where = client.run(lambda: __import__("pivot").__file__)
            assert sorted(where.values()) == [pivot.__file__] * 2
            before = client.run(executed)

            common = ["-q", "build", "--recipe", str(recipe), "--data", str(DATA)]
            assert main([*common, "--work", "work-cluster", "--out", str(tmp_path / "cluster.db"),
                         "--scheduler", address]) == 0
            ran = client.run(executed)
        # Both workers ran tasks of the build: extract's 6, the merges' 16, the pivot's 8 and the
        # content hashes were spread over them.
        assert len(ran) == 2 and all(ran[w] > before[w] for w in ran), (before, ran)

        assert main([*common, "--work", "work-local", "--out", str(tmp_path / "local.db"),
                     "--workers", "1"]) == 0
    finally:
        stop(procs)
    assert workers_left() == []

    # The stages really were several tasks each: 6 shards of the encoded bitext.
    with ParaphraseDB(tmp_path / "cluster.db") as db:
        assert db.meta["shards"]["n_shards"] == 6 and db.meta["shards"]["n_parts"] == 8
        cluster_signature = db.signature
    with ParaphraseDB(tmp_path / "local.db") as db:
        local_signature = db.signature
    assert cluster_signature == local_signature
    (cluster, cluster_timings), (local, local_timings) = content(tmp_path / "cluster.db"), content(tmp_path / "local.db")
    assert len(cluster["pair"]) > 10_000 and set(cluster) == {"meta", "model", "phrase", "foreign_phrase", "pair", "sqlite_stat1"}
    assert cluster == local
    assert cluster_timings.keys() == local_timings.keys()
    # The corpus stage ran as chunk tasks and a join on the cluster, as write_bitext in one
    # process: the same folder, byte for byte.
    [on_cluster] = (tmp_path / "work-cluster").glob("corpus.fr-*")
    [in_process] = (tmp_path / "work-local").glob("corpus.fr-*")
    assert not (on_cluster / ".chunks").exists()
    assert {p.name: p.read_bytes() for p in on_cluster.iterdir()} == {p.name: p.read_bytes() for p in in_process.iterdir()}
