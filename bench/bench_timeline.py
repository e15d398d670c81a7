"""The cores a build keeps busy, second by second: its own process against its children.

    python bench/bench_timeline.py --data ../shared/data [--domain bio | --recipe R.toml] \
        [--workers 2] --dir DIR

Runs one clean build (``pivot build ... -v``, its log in DIR/build.log) and reads /proc every
0.25 s: the CPU seconds of the build's process and of every process below it (the Dask workers,
any tool). DIR/timeline.tsv gets a row a second: elapsed seconds, the cores the build's process
used over that second, the cores its children used. Printed: the wall, and the core-seconds left
idle of the cores the build may use (``--cores``, default: this process's), the measure of what
a `--workers 2` build loses to steps that keep one core waiting; the log's stage lines say which.
A process's CPU is counted with its waited-for children's (_measure.tree_cpu), so a worker or a
tool that exits leaves no hole (before session 21 the second in which one exited was left out).
"""
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import build_arguments, run_watched, tree_cpu, watch_arguments

ROOT = Path(__file__).resolve().parent.parent


def main():
    args = watch_arguments(__doc__, "timeline").parse_args()
    args.dir.mkdir(parents=True)
    cmd = [sys.executable, "-m", "pivot", "build", *build_arguments(args)]
    wall, rows = run_watched(cmd, args.dir / "build.log", tree_cpu, 0.25, cwd=ROOT)
    idle, out = 0.0, []
    seconds = [r for k, r in enumerate(rows) if k % 4 == 0]
    for (t_a, own_a, below_a), (t_b, own_b, below_b) in itertools.pairwise(seconds):
        dt = t_b - t_a
        own, below = (own_b - own_a) / dt, (below_b - below_a) / dt
        out.append(f"{t_b:.1f}\t{own:.2f}\t{below:.2f}\n")
        idle += max(0.0, args.cores - own - below) * dt
    (args.dir / "timeline.tsv").write_text("elapsed_s\tbuild_cores\tchildren_cores\n" + "".join(out))
    print(f"wall {wall:.1f} s; idle {idle:.1f} core-seconds of {args.cores} cores; "
          f"{args.dir / 'timeline.tsv'}, {args.dir / 'build.log'}")


if __name__ == "__main__":
    main()
