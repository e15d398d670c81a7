"""Run a command (a build, or a rerun of its late stages on a hard-link copy of a work folder) and
sample every process of its tree every 0.2 s: the largest RSS and PSS of each role (``build``, the
build's own process; ``worker``, a Dask worker; else the program's name, bench/_measure.role) in
each stage the log says is running (bench/_measure: the last one started), and the CPU seconds
each role spent there.

    python bench/measure_roles.py OUT.json LOG python -m pivot build ... -v

bench/_measure.run_measured keeps the largest one-process RSS by stage, whoever holds it; this
says who: the build's process or a task (bench/project_scale.py's memory of one process)."""
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import _current_stage, _proc_table, _pss, role


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    out, log_path, cmd = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
    peaks, cpu_by, last_cpu, roles_of, state = {}, {}, {}, {}, {}
    timeline, t0 = [], time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        while proc.poll() is None:
            cpu = {}
            children, rss = _proc_table(cpu)
            pids, stack = [], [proc.pid]
            while stack:
                pid = stack.pop()
                pids.append(pid)
                stack.extend(children.get(pid, []))
            stage = _current_stage(log_path, state)
            row = {}
            for pid in pids:
                r = roles_of.setdefault(pid, role(pid, proc.pid))
                key = f"{stage}|{r}"
                cur = peaks.setdefault(key, {"rss": 0.0, "pss": 0.0})
                cur["rss"] = max(cur["rss"], rss.get(pid, 0) / 2**30)
                cur["pss"] = max(cur["pss"], _pss(pid) / 2**30)
                row[r] = max(row.get(r, 0), round(rss.get(pid, 0) / 2**30, 3))
                if pid in cpu:   # CPU seconds since the last sample, charged to this stage and role
                    cpu_by[key] = cpu_by.get(key, 0.0) + cpu[pid] - last_cpu.get(pid, 0.0)
                    last_cpu[pid] = cpu[pid]
            timeline.append([round(time.perf_counter() - t0, 1), stage, row])
            time.sleep(0.2)
    res = {"cmd": cmd, "rc": proc.returncode, "wall_s": round(time.perf_counter() - t0, 1),
           "peak_gib_by_stage_role": {k: {kk: round(vv, 3) for kk, vv in v.items()} for k, v in peaks.items()},
           "cpu_s_by_stage_role": {k: round(v, 1) for k, v in cpu_by.items()},
           "timeline_every_5th": timeline[::5]}
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps({k: v for k, v in res.items() if k != "timeline_every_5th"}, indent=1))
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
