"""Shared by the build benchmarks: run a build as a child, sample the memory of its whole process
tree (the build, its Dask workers, any tool it starts) from /proc every 0.2 s, and attribute
each sample to the stage the build's log says is running.

Two sums are kept. RSS summed over the tree counts a page shared by two processes twice (the
workers' copies of the Python runtime and numpy, a memory-mapped file read by both). PSS
(proportional set size, /proc/PID/smaps_rollup) charges a page shared by n processes 1/n to
each, so the PSS sum counts every resident page once: the machine's real footprint.

Stages run side by side on a cluster, so a peak charged to the stage the log started last can
belong to another. The peaks are also kept by the set of stages running at the sample, and the
peak's moment says what each process (the build, each worker, each tool) held then."""
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")
_STORE = " store: writing "
#: (stage, batch) -> the key its samples are charged to once that batch of the stage's is done and
#: until the stage is: the score stage's join (one task over every sentence's scores, after its
#: scoring tasks over a range of sentences each). Their peaks grow by different laws, and one key
#: for both read the ranges filling up from bio to bio-multi as growth (bench/project_scale.py).
#: "score.join" keeps the stage's family ("score") for the CPU seconds by stage.
_PHASES = {("score", "score"): "score.join"}
_EVENT = re.compile(r"stage (\S+)\s+(running|done|reused)|pivot INFO   (\S+): \d+ tasks in ")


TICK = os.sysconf("SC_CLK_TCK")


def _proc_table(cpu: dict | None = None, waited: dict | None = None):
    """Parent -> children and pid -> RSS of every process; with ``cpu``, also pid -> its own
    user + system seconds so far (fields 14 and 15 of /proc/PID/stat); with ``waited``, pid ->
    those of its children it has waited for (fields 16 and 17)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            pid, ppid = int(entry.name), int(fields[1])
            with open(f"/proc/{entry.name}/statm") as fh:
                rss[pid] = int(fh.read().split()[1]) * PAGE
            if cpu is not None:
                cpu[pid] = (int(fields[11]) + int(fields[12])) / TICK
            if waited is not None:
                waited[pid] = (int(fields[13]) + int(fields[14])) / TICK
        except (OSError, IndexError, ValueError):
            continue  # the process ended while we looked
        children.setdefault(ppid, []).append(pid)
    return children, rss


def cmdline(pid: int) -> str:
    """A process's command line ("" when it has ended)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def dask_workers(root_pid: int) -> list[int]:
    """The Dask worker processes under a build (multiprocessing's spawned children)."""
    return [p for p in descendants(root_pid)[1:] if "spawn_main" in cmdline(p)]


def cpu_seconds(pid: int) -> float:
    """A process's own user + system seconds so far (0 when it has ended)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except (OSError, IndexError, ValueError):
        return 0.0


def linked_copy(work: Path, dst: Path) -> Path:
    """A copy of a build's work folder made of hard links (a stage replaces its outputs by
    rename, never in place, so a build on the copy leaves the original alone), without the
    original's lock."""
    subprocess.run(["cp", "-al", str(work), str(dst)], check=True)
    (Path(dst) / ".lock").unlink(missing_ok=True)
    return Path(dst)


def descendants(root_pid: int, children: dict | None = None) -> list[int]:
    """root_pid and every process below it; ``children``: a table of _proc_table's, else one read now."""
    if children is None:
        children, _ = _proc_table()
    out, stack = [], [root_pid]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, []))
    return out


def _pss(pid: int) -> int:
    """PSS of one process in bytes (0 when it is gone or unreadable)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_memory(root_pid: int, cpu_seen: dict | None = None, largest: list | None = None,
                by_pid: dict | None = None) -> tuple[int, int]:
    """(RSS, PSS) in bytes, each summed over root_pid and all its descendants. With ``cpu_seen``,
    each process's CPU seconds so far are recorded in it by pid (a process that has ended keeps
    its last value: the sum of the dict is the tree's CPU time up to the last sample, but for
    what a process shorter than the sampling interval spent). With ``largest`` (a list), the
    largest RSS of any one process of the tree is appended to it. With ``by_pid`` (a dict), each
    process's PSS is recorded in it by pid."""
    cpu = {} if cpu_seen is not None else None
    children, rss = _proc_table(cpu)
    total_rss = total_pss = one = 0
    stack = [root_pid]
    while stack:
        pid = stack.pop()
        total_rss += rss.get(pid, 0)
        one = max(one, rss.get(pid, 0))
        pss = _pss(pid)
        total_pss += pss
        if by_pid is not None:
            by_pid[pid] = pss
        if cpu_seen is not None and pid in cpu:
            cpu_seen[pid] = cpu[pid]
        stack.extend(children.get(pid, []))
    if largest is not None:
        largest.append(one)
    return total_rss, total_pss


def role(pid: int, root_pid: int) -> str:
    """What a process of a build's tree is: "build" (the build's own process), "worker" (a Dask
    worker, multiprocessing's spawned child), "nanny" or "scheduler" (Dask's), else the program's
    name (kenlm's lmplz, a shell)."""
    if pid == root_pid:
        return "build"
    cmd = cmdline(pid)
    if "spawn_main" in cmd:
        return "worker"
    for name in ("nanny", "scheduler"):
        if name in cmd:
            return name
    return Path(cmd.split(" ", 1)[0]).name or "gone"


def _current_stage(log_path: Path, state: dict) -> str:
    """The stage the log last said is running (the log is read incrementally). ``state["running"]``
    keeps every stage started and not yet done: stages run side by side on a cluster, and the
    last one started is only one of them."""
    with open(log_path, errors="replace") as fh:
        fh.seek(state.get("pos", 0))
        text = fh.read()
        state["pos"] = fh.tell()
    running = state.setdefault("running", set())
    for m in _EVENT.finditer(text):
        if m.group(3) is not None:     # a batch done: a phase of the stage running (_PHASES)
            phase = _PHASES.get((state.get("stage"), m.group(3)))
            if phase is not None:
                state["stage"] = phase
            continue
        state["stage"] = m.group(1) if m.group(2) == "running" else f"after {m.group(1)}"
        (running.add if m.group(2) == "running" else running.discard)(m.group(1))
    # The database write, once every stage is done: the build says so. (Stages run side by side
    # on a cluster: the last one done is not the last one started, and "after combine" was
    # ppdb2's fit at --workers 2, charged to the store until this line.)
    if _STORE in text:
        state["stage"] = "store"
    return state.get("stage", "start")


def _running(state: dict) -> str:
    """The stages running at once, joined by "+" in name order ("store" during the write,
    "between" when none is)."""
    if state.get("stage") == "store":
        return "store"
    # one entry per family of per-language stages: "align.*(165)", not 165 names
    families: dict[str, list] = {}
    for name in state.get("running", ()):
        families.setdefault(name.split(".", 1)[0], []).append(name)
    return "+".join(names[0] if len(names) == 1 else f"{family}.*({len(names)})"
                    for family, names in sorted(families.items())) or "between"


def tree_cpu(pid: int) -> tuple[float, float]:
    """(CPU seconds of ``pid`` itself, of everything below it): each process's own user + system
    time with its waited-for children's, ``pid``'s waited-for children counted below it, so a
    worker or a tool that exits moves no CPU between the two."""
    cpu, waited = {}, {}
    kids, _ = _proc_table(cpu, waited)
    below = descendants(pid, kids)[1:]
    return cpu.get(pid, 0.0), waited.get(pid, 0.0) + sum(cpu.get(q, 0.0) + waited.get(q, 0.0) for q in below)


def watch_arguments(doc: str, writes: str):
    """The options of a tool that watches one build (bench_timeline, bench_handoffs): --data,
    --domain or --recipe, --workers, --cores (the cores the build may use), --dir (a new folder
    for the work folder, database, log and ``writes``)."""
    import argparse

    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, type=Path)
    what = ap.add_mutually_exclusive_group()
    what.add_argument("--domain", default="bio")
    what.add_argument("--recipe", type=Path)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--dir", required=True, type=Path, help=f"a new folder: the work folder, database, log, {writes}")
    return ap


def build_arguments(args) -> list[str]:
    """``pivot build``'s arguments for a watch_arguments tool: its recipe, data, work folder and
    database in ``--dir``, its workers, verbose (the log's stage lines say what ran)."""
    recipe = ["--recipe", str(args.recipe.resolve())] if args.recipe else ["--domain", args.domain]
    return [*recipe, "--data", str(args.data.resolve()), "--work", str(args.dir / "work"),
            "--out", str(args.dir / "out.db"), "--workers", str(args.workers), "-v"]


def run_watched(cmd, log_path: Path, sample, every: float, cwd=None) -> tuple[float, list]:
    """Run ``cmd`` (its output to ``log_path``), calling ``sample(pid)`` every ``every`` seconds
    while it runs: (wall seconds, [(elapsed, *sample(pid))]). A failed build exits naming its log."""
    t0 = time.perf_counter()
    rows = []
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
        while proc.poll() is None:
            rows.append((time.perf_counter() - t0, *sample(proc.pid)))
            time.sleep(every)
    if proc.returncode != 0:
        sys.exit(f"the build failed ({proc.returncode}); see {log_path}")
    return time.perf_counter() - t0, rows


def run_measured(cmd, log_path, on_sample=None, env=None, cwd=None, memory: bool = True) -> dict:
    """Run cmd; wall seconds, peak summed RSS and PSS of its process tree, and the peaks per stage.

    on_sample(proc, stage, elapsed) is called at every sample (the kill test uses it).
    cpu_s is the user + system time of the child and every descendant it waited for (Dask's
    workers are joined by their nannies, tools by the build): unlike the wall time it does not
    grow when other programs share the cores, so loadavg_1min_before says how quiet it was.
    sampler_cpu_s is this process's own CPU meanwhile (reading /proc every 0.2 s): it shares the
    cores with the build, which a build that keeps both cores busy feels and one that leaves a
    core idle does not. memory=False: no reader at all, the wall and cpu_s alone (the memory
    figures None)."""
    import resource
    load_before = os.getloadavg()[0]
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    self0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    state: dict = {}
    per_stage: dict[str, float] = {}
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        peak = peak_pss = 0
        per_stage_pss: dict[str, float] = {}
        cpu_seen: dict[int, float] = {}
        cpu_by_stage: dict[str, float] = {}
        cpu_last = 0.0
        one_process: dict[str, float] = {}
        per_running_pss: dict[str, float] = {}
        peak_moment: dict = {}
        while memory and proc.poll() is None:
            largest: list = []
            by_pid: dict[int, int] = {}
            rss, pss = tree_memory(proc.pid, cpu_seen, largest, by_pid)
            stage = _current_stage(log_path, state)
            running = _running(state)
            per_running_pss[running] = max(per_running_pss.get(running, 0), pss / 2**30)
            if pss > peak_pss:
                # who held the peak: each process's PSS by role, and what was running
                roles: dict[str, list] = {}
                for pid, value in by_pid.items():
                    roles.setdefault(role(pid, proc.pid), []).append(round(value / 2**30, 3))
                peak_moment = {"elapsed_s": round(time.perf_counter() - t0, 1), "running": running,
                               "pss_gib_by_process": {k: sorted(v, reverse=True) for k, v in sorted(roles.items())}}
            # CPU seconds since the last sample, charged to the stage the log says is running
            # (stages that run side by side on a cluster are charged to the last one started)
            cpu_now = sum(cpu_seen.values())
            cpu_by_stage[stage] = cpu_by_stage.get(stage, 0.0) + cpu_now - cpu_last
            cpu_last = cpu_now
            one_process[stage] = max(one_process.get(stage, 0.0), largest[0] / 2**30)
            peak, peak_pss = max(peak, rss), max(peak_pss, pss)
            per_stage[stage] = max(per_stage.get(stage, 0), rss / 2**30)
            per_stage_pss[stage] = max(per_stage_pss.get(stage, 0), pss / 2**30)
            if on_sample is not None:
                on_sample(proc, stage, time.perf_counter() - t0)
            time.sleep(0.2)
        proc.wait()
    if proc.returncode != 0:
        # the log's tail here: a caller removes its scratch folder, the log with it
        tail = Path(log_path).read_text(errors="replace").splitlines()[-15:]
        sys.exit("\n".join([*tail, f"{' '.join(map(str, cmd))} failed ({proc.returncode}); see {log_path}"]))
    wall = time.perf_counter() - t0
    usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    self1 = resource.getrusage(resource.RUSAGE_SELF)
    sampler = (self1.ru_utime - self0.ru_utime) + (self1.ru_stime - self0.ru_stime)
    figures = {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "sampler_cpu_s": round(sampler, 1),
               "loadavg_1min_before": round(load_before, 2)}
    if not memory:
        return {**figures, "peak_rss_tree_gib": None, "peak_pss_tree_gib": None}
    return {**figures,
            "peak_rss_tree_gib": round(peak / 2**30, 3),
            "peak_rss_tree_gib_by_stage": {k: round(v, 3) for k, v in per_stage.items()},
            "peak_pss_tree_gib": round(peak_pss / 2**30, 3),
            "peak_pss_tree_gib_by_stage": {k: round(v, 3) for k, v in per_stage_pss.items()},
            # the same peaks keyed by every stage running at the sample (not only the last started)
            "peak_pss_tree_gib_by_running": {k: round(v, 3) for k, v in per_running_pss.items()},
            "peak_pss_moment": peak_moment,
            "cpu_s_by_stage": {k: round(v, 1) for k, v in cpu_by_stage.items()},
            # the largest RSS of any one process (the build, a worker, a tool), by stage
            "peak_one_process_rss_gib_by_stage": {k: round(v, 3) for k, v in one_process.items()}}


def exports(db_path: Path, out_dir: Path) -> dict:
    """sha256 of `pivot export --format ppdb --all` (every pair, the hidden forms too) for every
    model of the database."""
    if Path(db_path).is_dir():       # a database in parts: its manifest lists the models in order
        names = [m["name"] for m in json.loads((Path(db_path) / "manifest.json").read_text())["models"]]
    else:
        with sqlite3.connect(db_path) as conn:
            names = [r[0] for r in conn.execute("SELECT name FROM model ORDER BY id")]
    out = {}
    for name in names:
        target = out_dir / f"{name}.ppdb"
        subprocess.run([sys.executable, "-m", "pivot", "export", str(db_path), "--format", "ppdb", "--all",
                        "--model", name, "-o", str(target)], check=True, capture_output=True)
        out[name] = hashlib.sha256(target.read_bytes()).hexdigest()
        target.unlink()
    return out


_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def store_seconds(log_path: Path) -> float | None:
    """Seconds the database write took: from the log line of the last stage done (combine) to the
    line saying the database was written (the write is not a stage folder, so it has no
    stage_seconds entry in the database's meta)."""
    from datetime import datetime
    last_done = wrote = None
    for line in Path(log_path).read_text(errors="replace").splitlines():
        m = _STAMP.match(line)
        if not m:
            continue
        t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f")
        if re.search(r"stage \S+\s+(done|reused)", line):
            last_done = t
        elif " wrote " in line and " pairs, " in line:
            wrote = t
    if last_done is None or wrote is None:
        return None
    return round((wrote - last_done).total_seconds(), 2)


def db_meta(db_path: Path, key: str):
    with sqlite3.connect(db_path) as conn:
        return json.loads(conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()[0])


def content_sha256(db_path: Path) -> str:
    """sha256 of a database's paraphrase content: every row of the pair, phrase, foreign_phrase
    and model tables in key order, and the combination fits (combined models are computed from
    these at lookup). Cheaper than exporting every model; the same content gives the same
    exports."""
    h = hashlib.sha256()
    with sqlite3.connect(db_path) as conn:
        for table, key in (("model", "rowid"), ("phrase", "id"), ("foreign_phrase", "id"), ("pair", "e1, e2")):
            for row in conn.execute(f"SELECT * FROM {table} ORDER BY {key}"):
                h.update(repr(row).encode() + b"\n")
        comb = conn.execute("SELECT value FROM meta WHERE key = 'combination'").fetchone()
        h.update(json.dumps(json.loads(comb[0])["models"] if comb else None, sort_keys=True).encode())
    return h.hexdigest()


def newest_stage(work: Path, stage: str) -> Path:
    """The newest finished ``<stage>-*`` folder of a build's work dir (it holds DONE); exits
    with one line when there is none."""
    done = sorted(Path(work).glob(f"{stage}-*/DONE"), key=lambda p: p.stat().st_mtime)
    if not done:
        sys.exit(f"{work}: no finished {stage}-* stage (a build's --work dir is needed)")
    return done[-1].parent


def bytes_per_pair(db_path: Path) -> float:
    """A database's file size over its stored pairs (rows of `pair`): for size projections."""
    with sqlite3.connect(db_path) as conn:
        rows = conn.execute("SELECT COUNT(*) FROM pair").fetchone()[0]
    return os.path.getsize(db_path) / max(rows, 1)


def write_json(path, data) -> None:
    """A benchmark's results file (indent 1, final newline), its folder made if needed; says where."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path}", flush=True)


def speed_probe(repeats: int = 3) -> float:
    """CPU seconds of one fixed single-threaded workload (a stable sort of 2M seeded integers
    and 1M interpreted additions), the least of ``repeats`` runs.

    This machine is a virtual one (2 vCPUs) whose speed is not constant: builds of nearly the
    same code at --workers 2 spent 205 and 283 CPU s half an hour apart, with little steal time
    reported. A benchmark that compares two builds runs the probe before and after each, so
    that a ratio of walls can be read against the speed each build had."""
    import time

    import numpy as np

    values = np.random.default_rng(0).integers(0, 1 << 62, 2_000_000)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        np.sort(values, kind="stable")
        total = 0
        for i in range(1_000_000):
            total += i
        best = min(best, time.process_time() - t0)
    return round(best, 4)
