"""The write of a database in parts (``pivot build ... --parts N`` on a finished work folder, so that
only the store runs) with every task of the write in a fresh spawned process, two at a time: each
task's peak RSS (sampled every 3 ms) and its RSS after the imports, by map, printed after "STATS".

    PYTHONPATH=TREE python bench/measure_write_tasks.py WORK OUT PARTS DOMAIN > out.txt

A Dask worker's RSS mixes the tasks it ran before (and Dask's own); this gives each task alone, so
that a task's peak can be compared across part sizes (bench/results/writemem-tasks-session14.json).
Its engine runs the survey's jobs' batches all at once: the build process' figures of the survey
are not the build's (bench/measure_roles.py measures those)."""
import concurrent.futures as cf, functools, json, multiprocessing as mp, os, resource, sys, threading, time
work, out, n_parts, domain = sys.argv[1:5]
PAGE = os.sysconf("SC_PAGE_SIZE")

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE

def _run(fn, args):
    import pivot.store.parts, pivot.store.write, pivot.pipeline.store, pivot.pipeline.lhs  # noqa (the imports a worker has)
    r0 = rss(); t0 = time.process_time()
    st = {"peak": r0, "run": True}
    def samp():
        while st["run"]:
            st["peak"] = max(st["peak"], rss()); time.sleep(0.003)
    th = threading.Thread(target=samp, daemon=True); th.start()
    res = fn(*args)
    st["run"] = False; th.join()
    return res, {"rss0_mib": round(r0 / 2**20, 1), "peak_mib": round(max(st["peak"], rss()) / 2**20, 1),
                 "cpu_s": round(time.process_time() - t0, 2)}

STATS = []
state = {"peak": 0}
def sampler():
    while True:
        r = rss()
        if r > state["peak"]:
            state["peak"] = r
        time.sleep(0.005)

class TaskEngine:
    in_process = False
    def map(self, fn, tasks, name=None, cost=None, quiet=False):
        if not tasks:
            return []
        r0 = rss(); state["peak"] = r0; t0 = time.perf_counter()
        with cf.ProcessPoolExecutor(2, mp_context=mp.get_context("spawn"), max_tasks_per_child=1) as ex:
            got = list(ex.map(_run, [fn] * len(tasks), tasks))
        STATS.append({"map": name, "wall_s": round(time.perf_counter() - t0, 1), "build_rss0_mib": round(r0 / 2**20, 1),
                      "build_peak_mib": round(state["peak"] / 2**20, 1),
                      "tasks": [s for _, s in got]})
        return [r for r, _ in got]

    def run(self, *jobs):
        # every live job's next batch at once, in one pool; the results sent back in order
        live, out = {}, [None] * len(jobs)
        for i, job in enumerate(jobs):
            try:
                live[i] = job.send(None)
            except StopIteration as stop:
                out[i] = stop.value
        while live:
            flat = [(i, fn_args) for i, b in live.items() for fn_args in [(b.fn, a) for a in b.arg_tuples]]
            fns = {b.fn for b in live.values()}
            results = {}
            for fn in fns:
                idx = [(i, a) for i, (f, a) in flat if f is fn]
                got = self.map(fn, [a for _, a in idx], name=live[idx[0][0]].name)
                for (i, _), r in zip(idx, got):
                    results.setdefault(i, []).append(r)
            nxt = {}
            for i in live:
                try:
                    nxt[i] = jobs[i].send(results.get(i, []))
                except StopIteration as stop:
                    out[i] = stop.value
            live = nxt
        return out

if __name__ == "__main__":
    threading.Thread(target=sampler, daemon=True).start()
    import pivot.store.parts as parts
    orig = parts.write_database_parts
    def patched(*a, **k):
        k["engine"] = TaskEngine()
        r0 = rss(); state["peak"] = r0
        try:
            return orig(*a, **k)
        finally:
            STATS.append({"write_database_parts": True, "build_rss0_mib": round(r0 / 2**20, 1),
                          "build_peak_mib_last_step": round(state["peak"] / 2**20, 1)})
    parts.write_database_parts = patched
    import atexit
    T0 = time.perf_counter()
    atexit.register(lambda: print("\nSTATS" + json.dumps({"wall": round(time.perf_counter() - T0, 1), "stats": STATS}), flush=True))
    from pivot.cli import main
    main(["build", "--domain", domain, "--data", "/work/shared/data", "--work", work, "--out", out,
          "--parts", n_parts, "--workers", "1"])
