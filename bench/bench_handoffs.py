"""Where a cluster build's cores stand idle: each half second's CPU against the Dask tasks running.

    python bench/bench_handoffs.py --data ../shared/data [--domain bio | --recipe R.toml] \
        [--workers 2] --dir DIR

Runs one clean build (``pivot build ... -v``; its log in DIR/build.log) in a child process that
records the scheduler's task stream (every task's worker, start and stop), while this process
reads /proc every 0.2 s: the CPU seconds of the build's process and of every process below it.
A process's own CPU is counted with its waited-for children's (fields 14-17 of /proc/PID/stat),
so a tool that exits (kenlm's build_binary under a worker) leaves no hole in the sum.

DIR/handoffs.tsv gets a row every half second: elapsed seconds, the cores the build's process
used, the cores its workers used, the idle core-seconds of ``--cores``, and the tasks that ran
(their names without the index, the seconds each). Printed: the wall, the idle core-seconds,
and the idle summed by what ran in the bin ("none" when no task ran): the stage hand-offs of
the issue 23 analysis (docs/scaling.md, session 21).
"""
import bisect
import collections
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import build_arguments, run_watched, tree_cpu, watch_arguments

ROOT = Path(__file__).resolve().parent.parent
BIN = 0.5


def _recording_build(argv: list[str], out: str) -> int:
    """``pivot build`` in this process, its engine's task stream written to ``out`` at its close."""
    from pivot.pipeline import engine

    start, close = engine.Engine._start, engine.Engine.close
    t0 = time.time()

    def recording_start(self):
        client = start(self)
        if not getattr(self, "_recording", False):
            self._recording = True
            client.get_task_stream()          # adds the scheduler's task-stream plugin
        return client

    def recording_close(self):
        if self._client is not None:
            rows = [(t["worker"], t["key"], s["start"] - t0, s["stop"] - t0)
                    for t in self._client.get_task_stream(start=t0) for s in t["startstops"]
                    if s["action"] == "compute"]
            Path(out).write_text(json.dumps({"t0": t0, "tasks": rows}))
        close(self)

    engine.Engine._start, engine.Engine.close = recording_start, recording_close
    from pivot.cli import main

    return main(["build", *argv])


def _task_name(key: str) -> str:
    """A task key without the engine's suffix: the batch's name. Engine.map's keys are
    ``name-index-pid-thread-time``, a job's batch's (_Runner) ``name-index-pid-thread-time-n``;
    a thread's ident is a pthread address (9 digits or more)."""
    return re.sub(r"-\d+-\d+-\d{9,}-\d+(?:-\d+)?$", "", key)


def half_seconds(samples, tasks, shift: float, cores: int) -> tuple[list, collections.Counter]:
    """Rows (start, build cores, worker cores, idle core-seconds, [(task name, seconds)]) of each
    BIN seconds, and the idle summed by the name that ran longest in its bin ("none": no task).

    ``samples``: (elapsed, build CPU s, CPU s below it), cumulative, read at rising elapsed times;
    a bin's CPU is read from them linearly at its edges. ``tasks``: (worker, key, start, stop) on
    the build's clock, which starts ``shift`` seconds after the samples' (each task's seconds
    split among the bins it overlaps)."""
    ran = collections.defaultdict(collections.Counter)
    for _, key, start, stop in tasks:
        a, b = start + shift, stop + shift
        while a < b:
            k = int(a // BIN)
            end = min(b, (k + 1) * BIN)
            ran[k][_task_name(key)] += end - a
            a = end
    times = [s[0] for s in samples]

    def cpu_at(t: float, i: int) -> float:
        j = min(max(bisect.bisect_left(times, t), 1), len(samples) - 1)
        (t_a, *a), (t_b, *b) = samples[j - 1], samples[j]
        f = min(max((t - t_a) / (t_b - t_a), 0.0), 1.0) if t_b > t_a else 1.0
        return a[i] + f * (b[i] - a[i])

    rows, by_what = [], collections.Counter()
    for k in range(int((times[-1] if len(times) > 1 else 0.0) // BIN)):
        a, b = k * BIN, (k + 1) * BIN
        own = (cpu_at(b, 0) - cpu_at(a, 0)) / BIN
        below = (cpu_at(b, 1) - cpu_at(a, 1)) / BIN
        lost = max(0.0, cores - own - below) * BIN
        names = ran[k].most_common()
        by_what[names[0][0] if names else "none"] += lost
        rows.append((a, own, below, lost, names))
    return rows, by_what


def main():
    args = watch_arguments(__doc__, "tables").parse_args()
    args.dir.mkdir(parents=True)
    stream = args.dir / "tasks.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--run-build", str(stream), *build_arguments(args)]
    t0 = time.time()
    wall, samples = run_watched(cmd, args.dir / "build.log", tree_cpu, 0.2, cwd=ROOT)
    recorded = json.loads(stream.read_text()) if stream.is_file() else {"t0": t0, "tasks": []}
    rows, by_what = half_seconds(samples, recorded["tasks"], recorded["t0"] - t0, args.cores)
    idle = sum(by_what.values())
    (args.dir / "handoffs.tsv").write_text("elapsed_s\tbuild_cores\tworker_cores\tidle_core_s\ttasks_s\n"
                                           + "".join(f"{a:.1f}\t{own:.2f}\t{below:.2f}\t{lost:.2f}\t"
                                                     + ", ".join(f"{n}:{t:.2f}" for n, t in names) + "\n"
                                                     for a, own, below, lost, names in rows))
    print(f"wall {wall:.1f} s; idle {idle:.1f} core-seconds of {args.cores} cores "
          f"({len(recorded['tasks'])} tasks); {args.dir / 'handoffs.tsv'}, {args.dir / 'build.log'}")
    print("idle by the task that ran longest in its half second:")
    for name, lost in by_what.most_common(15):
        print(f"  {lost:6.2f}  {name}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--run-build":
        raise SystemExit(_recording_build(sys.argv[3:], sys.argv[2]))
    main()
