"""Project the build to PPDB scale (100M sentence pairs) on N nodes, from per-stage curves measured
on this code, and the memory of each process kind at that size.

    python bench/project_scale.py --sizes-from bio=WORK_BIO bio-multi=WORK_MULTI \
        --sizes bench/results/sizes-session10.json          # once: the corpora's counts
    python bench/project_scale.py \
        --builds bench/results/determinism-session9.json bench/results/determinism-pair-session9.json \
                 bench/results/determinism-x2-session10.json bench/results/determinism-x4-session9.json \
        --pair bench/results/determinism-x4-session9.json --multi bench/results/bio-multi-session9.json \
        --sizes bench/results/sizes-session10.json \
        --roles bench/results/roles-bio-session10.json bench/results/roles-bio-multi-session10.json \
        --json bench/results/projection-session10.json

Inputs (all measured, kept in bench/results/):

* ``--builds``: bench_determinism.py results of the bio recipe at 1x, 2x, 4x ... the bitext
  (``--scale S``: every bitext source listed S times, the count floor times S), each with a
  ``--workers 1`` build. Its ``cpu_s_by_stage`` (the process tree's CPU seconds, sampled every
  0.2 s and charged to the stage the log says is running; in one process the stages run one
  after another, so the split is clean) is each stage's cost at that many copies. A stage's
  cost at 1x is the mean of the 1x builds; its **copies exponent** b is the least-squares slope
  of log CPU over log copies through every build, clipped to [0, 1].
* ``--sizes``: the sentence pairs, distinct paraphrase pairs, English phrases of the translation
  table (n_e), foreign phrases (n_f), kept translation entries and stored (English, foreign)
  phrases of bio and bio-multi, read from their finished work folders (``--sizes-from``).
  bio-multi has 4.1x bio's sentence pairs over 165 languages: the exponent of each count over
  the sentences from bio to bio-multi (count ratio = sentence ratio ^ exponent) is that count's
  growth law (copies add no distinct pair or phrase: they cannot measure it).
* ``--pair``: a result with a ``--workers 2`` and a ``--workers 1`` build of one size (4x). The
  **efficiency** of the sharded stages is extract + translation + pivot's CPU seconds at
  ``--workers 1`` over 2 x their wall seconds at ``--workers 2`` (these three run alone, one
  after another, on a cluster too), so a task's own overhead on a worker counts against it;
  their CPU at ``--workers 2`` over the same is the **utilisation**, which divides the costs
  measured on the workers (the late stages' tasks, the database's parts).
* ``--multi``: the bio-multi build (``--workers 2``): its largest one-process RSS by stage.
* ``--roles``: reruns of the late stages and the write of bio and of bio-multi on hard-link
  copies of their work folders (``--workers 2 --parts 4``), every process sampled by role
  (bench/measure_roles.py): the CPU seconds the build's own process and the workers spent in
  ppdb2, lhs and combine (side by side) and in the write (late_split), and each role's largest
  RSS there. ``--write-roles``: reruns of the write alone (every stage reused), whose store keys
  replace those of ``--roles`` (the write changed after the late stages were rerun).

The model, stated so that it can be argued with:

* **growth** (the target is ``--sentences`` / bio's sentence pairs times bio, 268x):
  a stage that reads the bitext grows as the copies measured it (its copies exponent);
  translation merges the extracted occurrences, which grow as the bitext (linear, an
  assumption: copies repeat pairs, so their exponent would be too kind); pivot grows as the
  distinct pairs (bio -> bio-multi); the late stages and the write, each side (the build's
  process, the workers), as measured from the bio rerun to the bio-multi one (the exponent of
  its CPU over the sentences); preflight reads every input (linear); the tagger is constant.
  **Assumption**: the target's distinct pairs and phrases grow as bio -> bio-multi's did, 65x
  beyond the largest corpus measured (bio-multi's 165 languages make more distinct foreign
  phrases per sentence than 20 would).
* **where it runs** (this code, ``pivot build --graph``): tasks on every worker of every node
  at the measured efficiency: align (by shard), score (by LM and range), extract,
  translation, pivot, encode (by file, chunk and shard since session 14), ppdb2's labels,
  relation fits and apply, the database's parts (``--parts N``), the corpus stage (by chunk of
  100,000 lines of every source file since session 20; its join, a task per language, is 3-5%
  of the stage's CPU on bio and at 4x, bench/bench_corpus_chunks.py: counted with the chunks);
  on one core (the build's process, or a single
  task): preflight, encode's join of its chunks' vocabularies (``--encode-share``: the largest
  share of its CPU measured in the build's process, bench/bench_encode.py), lmtext, lm (a task
  per model: two), weights, the tagger, ppdb2's score fit with lhs and combine (threads of
  one process: added up; its phrase side is tasks by block of phrases since session 12), the
  write's survey (since session 11 the phrase index is tasks: its texts by block of ids, its
  shards beside the parts); and, with ``--late-logs``, the late stages' longest batch that is
  a single task at bio and at bio-multi (single_tasks, longest_single: its wall seconds in
  the reruns' logs, grown by its own exponent), on the critical path beside the rest.
  **Assumption**: the two-worker efficiency holds on ``nodes x cores`` workers (no serial
  part inside a sharded stage grows to matter). The rows "if cut into tasks" (WOULD_MOVE)
  say what the build would take were the largest one-core parts tasks too: not this code.
* **critical path**: as the runner starts stages (pivot/pipeline/run.py): the aligner beside
  the LM branch (lmtext, lm, score), the longer counts; the late stages' workers' and
  process's parts added (ppdb2's apply tasks wait for its fit); the rest one after another.
* **memory of one process** at the target: for each process kind in each stage (MEMORY, what
  it holds read from the code), its largest RSS at 1x, 2x, 4x (``--workers 1``: every stage in
  the build's process), at bio and bio-multi (the per-role reruns, else the ``--workers 2``
  builds' largest one process), grown by the count its holder follows: the sentences by the
  slope over the copies; n_e, n_f, the kept entries or the stored phrases by the slope from bio
  to bio-multi, times that count at the target (its bio -> bio-multi exponent); constant: the
  largest measured.
"""
import argparse
import json
import math
import re
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
#: Each stage's growth law and where it runs at the target (see the docstring).
COPIES, LINEAR, PAIRS, STORED, CONSTANT = "copies", "linear", "pairs", "stored phrases", "constant"
MEASURED = "bio -> bio-multi"
TASKS, SERIAL = "tasks", "one core"
STAGES = {
    "start": (LINEAR, SERIAL),           # preflight reads every input (--preflight: its parts)
    "corpus": (COPIES, TASKS),
    "align": (COPIES, TASKS),
    # encode's tasks (its files' lines, chunks, shards) and its join of the chunks' vocabularies
    # in the build's process (--encode-share: the measured share of its CPU)
    "encode": (COPIES, TASKS),
    "encode-serial": (COPIES, SERIAL),
    "lmtext": (COPIES, SERIAL),
    "lm": (COPIES, SERIAL),
    "score": (COPIES, TASKS),
    "weights": (COPIES, SERIAL),
    "extract": (COPIES, TASKS),
    "translation": (LINEAR, TASKS),
    "pivot": (PAIRS, TASKS),
    "tagger": (CONSTANT, SERIAL),
    # ppdb2, lhs and combine (side by side): the workers' CPU (ppdb2's labels, relation fits and
    # apply) and the build's process's (ppdb2's phrase side and score fit, lhs, combine: threads of
    # one process, so added up), each grown as measured from bio to bio-multi
    "late-tasks": (MEASURED, TASKS),
    "late-serial": (MEASURED, SERIAL),
    # a batch of the late stages that is one task at bio and at bio-multi (a task over every stored
    # phrase, or over the whole corpus) runs on one core whatever the cluster: the longest such
    # task at the target is on the critical path (its CPU also stays in late-tasks: counted twice,
    # on the safe side)
    "late-single": (MEASURED, SERIAL),
    # the database in parts: the texts, the phrase index's shards and the parts on the workers;
    # the survey and the ranges' cut here
    "store": (MEASURED, TASKS),
    "store-serial": (MEASURED, SERIAL),
}
OVERLAP = [("align",), ("lmtext", "lm", "score")]       # side by side: the longer counts
#: ppdb2's tasks, its in-process part, lhs and combine: their sum (the apply tasks wait for the fit)
TOGETHER = [("late-tasks", "late-serial", "late-single", "tagger")]
CHAIN = ("encode", "encode-serial", "weights", "extract", "translation", "pivot")
#: The one-core parts that grow fastest: the write's survey (its phrase index until session 10), ppdb2's phrase side and
#: fit (with lhs), preflight's reads. The projection also says what the build would take were they tasks.
WOULD_MOVE = ("store-serial", "late-serial", "start")
#: The stage families of the late group, and the keys of a per-role rerun that are the write's.
LATE = ("ppdb2", "lhs", "combine")
#: The build's stages as its log names them (pivot build --graph).
FAMILIES = {"start", "corpus", "align", "encode", "lmtext", "lm", "score", "weights", "extract", "translation",
            "pivot", "ppdb2", "tagger", "lhs", "combine", "store"}
#: The stages whose --workers 1 CPU over 2 x their --workers 2 wall is the efficiency.
EFFICIENCY_STAGES = ("extract", "translation", "pivot")

#: Memory of one process: each row a process kind in a stage, what it holds at its peak (read
#: from the code; docs/scaling.md says where), the count that grows it, and where it is measured:
#: ``w1``, the stage families whose largest one-process RSS in the --workers 1 builds (1x, 2x,
#: 4x: every stage in the build's process) it is; ``w2``, the keys of the --workers 2 builds' (bio,
#: bio-multi) largest one-process RSS by stage; ``roles``, the stage|role keys of the reruns that
#: sample each process by role (bench/measure_roles.py), which replace ``w2`` when given.
SENTENCES, N_E, N_F, ENTRIES = "n_sentences", "n_e", "n_f", "n_entries"
#: The build's process in translation and pivot: a few numbers per partition, block or range, and
#: Dask's state of the tasks of the map running (a local cluster's scheduler is that process):
#: the largest measured plus the bytes of a task x the tasks of the stage's largest map beyond
#: bio-multi's.
MAP_TASKS = "tasks of its largest map"
STORED_U, PAIRS_U = "n_stored_phrases", "n_pairs"
MEMORY = [
    {"row": "preflight", "process": "build", "law": CONSTANT, "w1": ["start"], "w2": ["start"],
     "holds": "one input file's reader at a time"},
    {"row": "encode", "process": "build", "law": CONSTANT, "w1": ["encode"], "w2": ["encode"],
     "holds": "the vocabularies and one language's token counts (8 B a line: 40 MB at 5M lines a language); "
              "its tasks a chunk of 50k lines or a shard"},
    {"row": "weights", "process": "build", "law": SENTENCES, "w1": ["weights"], "w2": ["weights"],
     "roles": ["weights|build", "after weights|build"],
     "holds": "the sorted sigma (8 B a sentence) while the top-tau cuts are found and the AUC's ranks read "
              "(session 14; before it every sentence's scores, weight columns and their sorts, ~160 B); a block "
              "of 65,536 sentences' columns"},
    {"row": "align, LM branch (tasks)", "process": "task", "law": CONSTANT,
     "w1": [], "w2": ["after tagger", "corpus.*", "after align.*", "align.*", "lmtext", "lm", "after lm", "score",
                      "after score"],
     "holds": "a shard's E-step or Viterbi (fixed cells); an LM's counts (the LM text: fixed by the "
              "in-domain text, an assumption; the copies copy it); 1M sentences' scores"},
    # score's two kinds of task, apart since session 16 (bench/_measure.py's "score.join": the samples
    # after the scoring batch). Before, one row grew the two mixed by its slope from bio to
    # bio-multi, which read bio's one partial range (375k sentences) filling to bio-multi's full
    # 1M-sentence range as growth: 15.5 GiB at the target for tasks that hold one range at most.
    {"row": "score's tasks", "process": "task", "law": CONSTANT, "w1": [], "w2": [],
     "roles": ["score|worker"],
     "holds": "the two LMs (their size set by the in-domain text: fixed, an assumption; the copies copy it) and "
              "one range of at most 1M sentences' tokens and scores"},
    {"row": "score's join (a task)", "process": "task", "law": SENTENCES, "w1": ["score"], "w2": ["score"],
     "roles": ["score.join|worker", "after score|worker"],
     "holds": "the sorted sigma (8 B a sentence) while the ranking's buckets are cut (session 14; before it "
              "every sentence's cross-entropies, sigma, line ends and order); a range's scores and its run "
              "at a time; in one process (--workers 1) also the LMs scored with (the copies copy the "
              "in-domain text: an upper bound)"},
    {"row": "extract (tasks)", "process": "task", "law": CONSTANT, "w1": [], "w2": ["extract"],
     "holds": "one shard's phrase pairs (a fixed number of sentences and tokens)"},
    # translation and pivot: measured by per-role reruns of the two stages (--stage-roles), the
    # build's process (tasks run elsewhere) apart from the workers
    {"row": "translation", "process": "build", "law": MAP_TASKS, "w1": [], "w2": [],
     "roles": ["translation|build", "after translation|build"],
     "holds": "assemble: numbers per partition (its kept entries, foreign phrases and distinct English "
              "keys, counted by its tasks; P grows with the sentences, 50k a partition) and the tasks' futures"},
    {"row": "pivot", "process": "build", "law": MAP_TASKS, "w1": [], "w2": [],
     "roles": ["pivot|build", "after pivot|build"],
     "holds": "the row ranges' cut: one row-work total per block of 131,072 rows (tasks), the targets and "
              "the ranges, and the tasks' futures"},
    {"row": "translation, pivot (tasks)", "process": "task", "law": N_E, "w1": [], "w2": [],
     "roles": ["translation|worker", "after translation|worker", "pivot|worker", "after pivot|worker"],
     "holds": "a merge's partition (1/P of the partial counts or kept entries); assemble: one partition's "
              "entries; the cut: a block's rows and their degrees; a pivot range: its rows' columns and a "
              "row_ptr of its own rows (session 14; before it n_e + 1 long, 8 B an English phrase)"},
    # ppdb2's part of this process is bounded since session 15: what it holds beyond a block or a
    # window is the fits' selected rows, each capped (a slope from bio to bio-multi reads the
    # training lists filling towards their cap, 87,647 -> 137,243 of 150,000 rows, as growth);
    # lhs's part too (a window of ids, a block of phrases: bio's block and window not full)
    {"row": "ppdb2, lhs, combine", "process": "build", "law": CONSTANT, "w1": ["ppdb2", "lhs", "combine", "tagger"],
     "w2": ["ppdb2", "after ppdb2", "lhs", "after lhs", "combine", "after combine"],
     "roles": ['ppdb2|build', 'after ppdb2|build', 'lhs|build', 'after lhs|build', 'combine|build', 'after combine|build'],
     "holds": "ppdb2 (session 15): no array with an entry per stored phrase or phrase id (the ids, slots, pivots, "
              "texts' starts and WordNet side in files read by windows or blocks); the fits' selected rows, each "
              "capped: rated rows, max_relation_pairs training and 50,000 test pairs, the training lists (4,000 "
              "lists, 150,000 rows, their features ~0.8 kB a row: at the cap ~0.03 GiB above bio-multi's) and "
              "8,000 held-out lists (no features); the reports' rows scored 16,384 at a time; a few numbers per "
              "pivot part. Session 14: the slot array, used ids and texts' starts (20 B a stored phrase) and the "
              "uncapped held-out rows. lhs, in this process beside ppdb2 (session 15): a window of 1M phrase ids' "
              "marks and used ids, a block of 500k used phrases' rows, ids or codes (the used ids and codes go "
              "to files as they come), a few kB per pivot part and per block; measured alone "
              "(bench/bench_lhs_memory.py) 40 / 53 MiB above the process's RSS at bio / bio-multi, "
              "flat on synthetic parts of 7M-28M stored phrases (bench/bench_lhs_growth.py); before it the "
              "used ids and codes (10 B a stored phrase) and a mark per phrase id, ~2.6 GiB at the target"},
    {"row": "ppdb2 (tasks)", "process": "task", "law": CONSTANT, "w1": [], "w2": [],
     "roles": ['ppdb2|worker', 'after ppdb2|worker', 'lhs|worker', 'after lhs|worker', 'combine|worker', 'after combine|worker'],
     "holds": "a pivot part's pairs (labels, apply, survey, lists: a part follows the data, about 500k "
              "kept entries, so that the parts' count follows the data) and its own phrases' rows of the per-phrase files, through bounded windows "
              "(session 14; before it an n_e slot array and whole per-phrase arrays); a phrase-side block of "
              "500k phrases; a relation fit's rated rows; the word vectors' sums a group at a time. Constant since "
              "session 14: every one of these is bounded by a block or a part, whose sizes the build fixes; each "
              "task's own peak at bio-multi 0.31-0.53 GiB (bio's parts and block are not full: a slope "
              "from bio would read their filling as growth)"},
    {"row": "store", "process": "build", "law": N_E, "w1": ["store"], "w2": ["store"], "roles": ["store|build"],
     "holds": "session 14: the used ids as bits (n_e/8 + n_f/8 B), the survey pieces under way (a chunk's "
              "distinct ids), a few numbers per chunk; before: the survey's per-id arrays (e1 pair counts over "
              "n_e, used ids), the labels; in session 10 also a block of texts (the phrase index, now tasks), "
              "before it every English phrase's rows and counts (28 B) and every foreign key (8 B)"},
    {"row": "store (tasks)", "process": "task", "law": CONSTANT, "w1": [], "w2": [], "roles": ["store|worker"],
     "holds": "a part's rows 200k at a time, its used ids as bits, SQLite's cache and sort (64 MiB each; "
              "before session 14 also its used-id masks, 1 B an English phrase, and reverse's 256 MiB cache); "
              "a block of 250k texts from its own tokens; an index shard's text sort (SQLite's, in temporary files). "
              "Constant since session 14: each task's peak is set by those fixed sizes (bench/measure_write_tasks.py: "
              "a part 270-315 MiB at --parts 4, 241-301 at --parts 8 on bio-multi, writemem-tasks-session14.json)"},
]


def task_bytes(measured: dict) -> float:
    """Bytes the build's process holds per task of one map (bench/bench_task_memory.py's result):
    the largest map's peak RSS over the first map's starting RSS, per task."""
    first, last = measured[min(measured, key=int)], measured[max(measured, key=int)]
    return (last["peak_mib"] - first["base_mib"]) * 2**20 / int(max(measured, key=int))


def largest_map(stage: str, counts: dict) -> int:
    """The tasks of the largest Engine.map of translation or pivot for these counts (the code's
    rules): translation maps its P partitions six times (merges, keys, rows, columns; P = 50k
    sentence pairs a partition, at least 8) and hashes its 2P + 9 files; pivot maps its ranges
    (500k kept entries each, at least 8), the cut's blocks of 131,072 rows twice, and hashes the
    ranges' files and their index."""
    if stage == "translation":
        parts = max(8, math.ceil(counts[SENTENCES] / 50_000))
        return 2 * parts + 9
    ranges = max(8, math.ceil(counts[ENTRIES] / 500_000))
    return max(ranges + 1, math.ceil(counts[N_E] / 131_072))


def fit_power(xs, ys):
    """Least-squares a, b of y = a * x**b on log-log axes."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    b = sum((x - mx) * (y - my) for x, y in zip(lx, ly)) / sum((x - mx) ** 2 for x in lx)
    return math.exp(my - b * mx), b


def fit_line(xs, ys):
    """Least-squares a, k of y = a + k * x."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    k = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - k * mx, k


def stage_of(key: str) -> str | None:
    """The stage family of a cpu_s_by_stage key ("align.fr" -> "align"; "after X" -> X)."""
    key = key.removeprefix("after ")
    name = key.split(".")[0]
    return name if name in FAMILIES else None


def by_family(values: dict, combine=sum) -> dict:
    """A build's per-stage figures (cpu_s_by_stage, peak_one_process_rss_gib_by_stage) by stage
    family: CPU seconds summed, peaks by their largest (``combine=max``)."""
    out: dict[str, list] = {}
    for key, v in values.items():
        name = stage_of(key)
        if name is not None:
            out.setdefault(name, []).append(v)
    return {k: combine(v) for k, v in out.items()}


def one_worker_builds(paths) -> list[tuple[int, dict]]:
    """(copies, --workers 1 build) of each result file, every --workers 1 build of it."""
    out = []
    for path in paths:
        det = json.loads(Path(path).read_text())
        ones = [b for b in det["builds"] if b["workers"] == 1 and b.get("threads") in (None, 0)]
        if not ones:
            raise SystemExit(f"{path}: no --workers 1 build (at the default threads)")
        for b in ones:
            if "cpu_s_by_stage" not in b:
                raise SystemExit(f"{path}: a --workers 1 build without cpu_s_by_stage (bench/_measure.py records it)")
            out.append((int(det.get("scale", 1)), b))
    if 1 not in {s for s, _ in out}:
        raise SystemExit("--builds: no build at 1x (the costs are grown from 1x)")
    return out


def copies_curves(builds) -> tuple[dict, dict]:
    """(CPU seconds at 1x, copies exponent) of each stage family over the builds: the mean of
    the 1x builds, and the slope of log CPU on log copies through every build, in [0, 1]."""
    cpu = [(s, by_family(b["cpu_s_by_stage"])) for s, b in builds]
    names = sorted({n for _, c in cpu for n in c})
    at1, exponents = {}, {}
    for n in names:
        ones = [c.get(n, 0.0) for s, c in cpu if s == 1]
        at1[n] = sum(ones) / len(ones)
        pts = [(s, c[n]) for s, c in cpu if c.get(n, 0.0) > 0]
        if len({s for s, _ in pts}) >= 2:
            exponents[n] = min(1.0, max(0.0, fit_power([s for s, _ in pts], [y for _, y in pts])[1]))
    return at1, exponents


def efficiency(pair: dict) -> tuple[float, float]:
    """(efficiency, utilisation): EFFICIENCY_STAGES' CPU seconds at --workers 1, and at
    --workers 2, over 2 x their wall at --workers 2. The first divides a cost measured in one
    process (it counts the tasks' own overhead against them), the second a cost measured on
    the workers (which holds that overhead already)."""
    w1 = next(b for b in pair["builds"] if b["workers"] == 1 and b.get("threads") in (None, 0))
    w2 = next(b for b in pair["builds"] if b["workers"] == 2)
    cpu1, cpu2 = by_family(w1["cpu_s_by_stage"]), by_family(w2["cpu_s_by_stage"])
    wall2 = 2 * sum(by_family(w2["stage_seconds"])[n] for n in EFFICIENCY_STAGES)
    return sum(cpu1[n] for n in EFFICIENCY_STAGES) / wall2, sum(cpu2[n] for n in EFFICIENCY_STAGES) / wall2


def size_exponents(sizes: dict) -> dict:
    """Each count's exponent over the sentences from bio to bio-multi."""
    bio, multi = sizes["bio"], sizes["bio-multi"]
    r = math.log(multi["n_sentences"] / bio["n_sentences"])
    return {k: math.log(multi[k] / bio[k]) / r for k in bio if k != "n_sentences"}


def late_split(measured: dict) -> dict:
    """A per-role rerun's (bench/measure_roles.py) CPU seconds of the late stages (LATE, side by
    side) and of the write, in the build's process and in the workers: {"late-serial",
    "late-tasks", "store-serial", "store"}."""
    out = dict.fromkeys(("late-serial", "late-tasks", "store-serial", "store"), 0.0)
    for key, sec in measured["cpu_s_by_stage_role"].items():
        stage, role = key.rsplit("|", 1)
        if role not in ("build", "worker"):
            continue
        group = "store" if stage == "store" else "late" if stage_of(stage) in LATE else None
        if group is not None:
            name = {("store", "build"): "store-serial", ("store", "worker"): "store",
                    ("late", "build"): "late-serial", ("late", "worker"): "late-tasks"}[group, role]
            out[name] += sec
    return out


_VECTORS = re.compile(r"word vectors .* PPMI and SVD ([\d.]+), phrase means [\d.]+(?:, join ([\d.]+))?\)")
_BATCH = re.compile(r"^\S+ \S+ pivot INFO\s+(\S+): (\d+) tasks in ([\d.]+) s")


def single_tasks(log_text: str, prefix: str = "ppdb2") -> dict:
    """{batch name: seconds} of a build log's batches of one task whose name starts with ``prefix``
    (the engine's lines "  NAME: 1 tasks in X s"; a name seen twice: the longer; wall seconds
    from the batch's submission: at least its task's CPU on a quiet machine, on the safe side),
    and the word vectors' PPMI-and-SVD and join tasks (CPU seconds from the stage's summary line)."""
    out = {}
    for line in log_text.splitlines():
        m = _BATCH.match(line)
        if m and m.group(1).startswith(prefix) and m.group(2) == "1":
            out[m.group(1)] = max(out.get(m.group(1), 0.0), float(m.group(3)))
        # the word vectors' steps log no line of their own: their summary's single-task steps (the
        # PPMI and SVD, the join of the phrase blocks), in CPU seconds
        v = _VECTORS.search(line)
        if v:
            out["ppdb2-vectors-svd"] = float(v.group(1))
            if v.group(2) is not None:    # a log before session 13 (the means' blocks joined by one task)
                out["ppdb2-vectors-join"] = float(v.group(2))
    return out


def longest_single(bio: dict, multi: dict, scale_multi: float, scale: float) -> tuple[str, float, float, float]:
    """(name, bio seconds, exponent, seconds at the target) of the batch that is one task at bio and
    at bio-multi (single_tasks of each) and takes longest at the target, each grown by its own
    exponent over the sentences (bio-multi is ``scale_multi`` x bio's, the target ``scale`` x);
    none: ("", 0, 0, 0)."""
    best = ("", 0.0, 0.0, 0.0)
    for name in sorted(set(bio) & set(multi)):
        if bio[name] <= 0 or multi[name] <= 0:
            continue
        b = math.log(multi[name] / bio[name]) / math.log(scale_multi)
        at = bio[name] * scale ** b
        if at > best[3]:
            best = (name, bio[name], b, at)
    return best


def preflight_seconds(start_1x: float, bio: dict, multi: dict, sentences: float) -> float:
    """Preflight's CPU seconds at ``sentences`` sentence pairs: the bitext's read-through (the
    corpus stage's check: every line of every bitext file) at bio-multi's seconds per line (its
    165 languages' small files make it the dearer of the two: 1.7 us a line against bio's 0.9),
    times the target's sentence pairs (the plan counts a pair once: bio's 387,988 "bitext lines"
    are its pairs before the length filter); the rest as at bio: the build's start-up and the checks of inputs that do not grow
    with the bitext (the in-domain text, the tagger's files, the gold), ``start_1x`` (the build's
    "start" CPU at 1x) less bio's bitext read. ``bio``, ``multi``: bench_preflight.py's recipes."""
    corpus_bio = bio["check_cpu_s"].get("corpus", 0.0)
    per_line = multi["check_cpu_s"].get("corpus", 0.0) / multi["counts"]["bitext lines"]
    return max(start_1x - corpus_bio, 0.0) + per_line * sentences


def with_write_of(roles: dict, write: dict) -> dict:
    """A per-role rerun ``roles`` whose write (the "store" stage's keys, CPU and peaks) is
    ``write``'s: a rerun of the write alone, on the late stages' rerun's work folder."""
    def merged(field):
        keep = {k: v for k, v in roles[field].items() if k.rsplit("|", 1)[0] != "store"}
        return {**keep, **{k: v for k, v in write[field].items() if k.rsplit("|", 1)[0] == "store"}}
    return {**roles, "cpu_s_by_stage_role": merged("cpu_s_by_stage_role"),
            "peak_gib_by_stage_role": merged("peak_gib_by_stage_role")}


def with_stages_of(roles: dict, rerun: dict, families=None) -> dict:
    """A per-role rerun ``roles`` with the peaks of the stages of ``families`` (and the moments
    after them) taken from ``rerun``, a rerun of those stages alone (bench/bench_stage_memory.py's
    result, whose ``measure_roles`` holds bench/measure_roles.py's figures); its CPU seconds
    are not the late stages' or the write's, and are left out. ``families``: default, those of
    RERUN_FAMILIES the rerun has a key of (so that a rerun of score alone replaces score's
    peaks and keeps the others an earlier rerun gave)."""
    inner = rerun.get("measure_roles", rerun)
    if families is None:
        families = {stage_of(k.rsplit("|", 1)[0]) for k in inner["peak_gib_by_stage_role"]} & set(RERUN_FAMILIES)
    keep = {k: v for k, v in roles["peak_gib_by_stage_role"].items() if stage_of(k.rsplit("|", 1)[0]) not in families}
    new = {k: v for k, v in inner["peak_gib_by_stage_role"].items() if stage_of(k.rsplit("|", 1)[0]) in families}
    return {**roles, "peak_gib_by_stage_role": {**keep, **new}}


#: The stages whose memory rows come from reruns of them alone (--stage-roles).
RERUN_FAMILIES = ("score", "weights", "translation", "pivot")


def measured_exponents(bio: dict, multi: dict, sizes: dict) -> dict:
    """Each split's exponent over the sentences from bio to bio-multi (late_split of each)."""
    r = math.log(sizes["bio-multi"]["n_sentences"] / sizes["bio"]["n_sentences"])
    return {k: math.log(multi[k] / bio[k]) / r for k in bio if bio[k] > 0 and multi.get(k, 0) > 0}


def grow(cpu1: dict, exponents: dict, size_exp: dict, scale: float, measured: dict | None = None) -> dict:
    """Each stage's CPU seconds at ``scale`` times bio, by its law (STAGES); ``measured``: the
    exponents of the MEASURED stages (measured_exponents)."""
    out = {}
    for name, (law, _) in STAGES.items():
        b = {CONSTANT: 0.0, LINEAR: 1.0, PAIRS: size_exp.get("n_pairs"), STORED: size_exp.get("n_stored_phrases"),
             COPIES: exponents.get(name, 1.0), MEASURED: (measured or {}).get(name)}[law]
        out[name] = cpu1.get(name, 0.0) * scale ** b if cpu1.get(name) else 0.0
    return out


def wall_hours(target_cpu: dict, nodes: int, cores: int, eff: float, as_tasks=(),
               util: float | None = None) -> dict:
    """The critical path (docstring) on ``nodes`` nodes of ``cores`` cores, in hours; the stages
    named in ``as_tasks`` run as tasks (what the build would take if they were cut so). A task
    stage's CPU measured in one process is divided by ``eff``, one measured on the workers (the
    MEASURED stages) by ``util`` (efficiency: default ``eff``)."""
    slots = nodes * cores

    def where_of(name):
        return TASKS if name in as_tasks else STAGES[name][1]

    def seconds(name):
        where = where_of(name)
        if where == TASKS:
            on_workers = STAGES[name] == (MEASURED, TASKS) and util is not None
            return target_cpu[name] / (slots * (util if on_workers else eff))
        return target_cpu[name]

    wall = seconds("start") + seconds("corpus")
    wall += max(sum(seconds(s) for s in chain) for chain in OVERLAP)
    wall += sum(seconds(s) for s in CHAIN)
    wall += max(sum(seconds(s) for s in group) for group in TOGETHER)
    wall += seconds("store-serial") + seconds("store")
    serial = sum(seconds(s) for s in STAGES if where_of(s) == SERIAL)
    return {"nodes": nodes, "total_h": wall / 3600, "one_core_h": serial / 3600,
            "spread_h": sum(seconds(s) for s in STAGES if where_of(s) != SERIAL) / 3600}


def by_stage_role(measured: dict) -> dict:
    """A per-role rerun's (bench/measure_roles.py) largest RSS by "stage|role"."""
    return {k: v["rss"] for k, v in measured["peak_gib_by_stage_role"].items()}


def target_units(sizes: dict, scale: float, sentences: float) -> dict:
    """Each count at the target: the sentences given, the rest grown from bio by their exponent
    (size_exponents); the stored phrases at most the phrases of the table (n_e)."""
    exps, bio = size_exponents(sizes), sizes["bio"]
    out = {k: bio[k] * scale ** exps[k] for k in exps}
    out[SENTENCES] = sentences
    if STORED_U in out and N_E in out:
        out[STORED_U] = min(out[STORED_U], out[N_E])
    return out


def _peak(values: dict, keys) -> float | None:
    """The largest of ``values`` (a build's RSS by stage key) over ``keys`` ("corpus.*": any
    key of that family, "after align.*" likewise)."""
    found = [v for k, v in values.items()
             if any(k == pat or (pat.endswith(".*") and k.startswith(pat[:-1])) for pat in keys)]
    return max(found) if found else None


def memory_rows(builds, bio_w2: list, multi_w2: dict, sizes: dict, units: dict, roles=None,
                per_task: float = 0.0) -> dict:
    """Each MEMORY row measured and grown to the target (``units``, target_units): a law of the
    sentences by the slope from bio to bio-multi of the per-role reruns when they hold the row's
    keys (since session 14: weights and score rerun by --stage-roles), else by the slope of the
    --workers 1 builds' RSS over the copies (x = copies x bio's sentences); a law of another count by the slope from bio to bio-multi (the per-role reruns'
    when ``roles`` = {"bio": {...}, "bio-multi": {...}} holds the row's keys, else the --workers 2
    builds'), RSS = bio's + slope x (target count - bio's); constant: the largest measured; the
    tasks of the largest map (translation, pivot): the largest measured + ``per_task`` bytes x
    (the map's tasks at the target - at bio-multi) (largest_map).
    ``builds``: (copies, --workers 1 build); ``bio_w2``: bio's --workers 2 builds."""
    bio = sizes["bio"]
    rows = {}
    for spec in MEMORY:
        w1 = [(s, _peak(by_family(b["peak_one_process_rss_gib_by_stage"], max), spec["w1"])) for s, b in builds]
        w1 = [(s, v) for s, v in w1 if v is not None]
        if roles and spec.get("roles"):
            pb, pm = (_peak(roles[n], spec["roles"]) for n in ("bio", "bio-multi"))
            source = "per-role reruns"
        else:
            pb = max((v for v in (_peak(b["peak_one_process_rss_gib_by_stage"], spec["w2"]) for b in bio_w2)
                      if v is not None), default=None)
            pm = _peak(multi_w2["peak_one_process_rss_gib_by_stage"], spec["w2"])
            source = "--workers 2 builds"
        law = spec["law"]
        row = {"process": spec["process"], "law": law, "holds": spec["holds"],
               "w1_gib_by_copies": {str(s): max(v for t, v in w1 if t == s) for s in sorted({s for s, _ in w1})},
               "bio_gib": pb, "bio_multi_gib": pm, "bio_source": source}
        measured = [v for _, v in w1] + [v for v in (pb, pm) if v is not None]
        if not measured or (law not in (SENTENCES, CONSTANT, MAP_TASKS) and None in (pb, pm)):
            row["target_gib"] = None     # not measured (e.g. no --stage-roles)
        elif law == SENTENCES and (source != "per-role reruns" or None in (pb, pm)):
            xs = [s * bio[SENTENCES] for s, _ in w1]
            a, k = fit_line(xs, [v for _, v in w1])
            row["bytes_per_unit"] = round(k * 2**30, 1)
            row["target_gib"] = round(a + max(k, 0.0) * units[SENTENCES], 2)
        elif law == CONSTANT:
            row["target_gib"] = round(max(measured), 2)
        elif law == MAP_TASKS:
            stage = spec["row"]
            row["bytes_per_unit"] = round(per_task, 1)
            row["target_unit"] = largest_map(stage, units)
            grown = per_task * max(0, row["target_unit"] - largest_map(stage, sizes["bio-multi"]))
            row["target_gib"] = round(max(measured) + grown / 2**30, 2)
        else:
            k = (pm - pb) / (sizes["bio-multi"][law] - bio[law])
            row["bytes_per_unit"] = round(k * 2**30, 1)
            row["target_unit"] = round(units[law])
            row["target_gib"] = round(pb + max(k, 0.0) * (units[law] - bio[law]), 2)
        rows[spec["row"]] = row
    return rows


def measure_sizes(work: Path) -> dict:
    """The counts of a finished work folder (the sentences, the translation table's phrases and
    entries, the pivot stage's pairs, the stored English and foreign phrases)."""
    import numpy as np

    def one(pattern):
        found = sorted(Path(work).glob(pattern))
        if len(found) != 1:
            raise SystemExit(f"{work}: expected one {pattern}, found {len(found)}")
        return found[0]

    sys_path = Path(__file__).resolve().parent.parent
    import sys
    sys.path.insert(0, str(sys_path))
    from pivot.pipeline.bundle import open_bundle

    shards = json.loads(one("encode-*/shards.json").read_text())
    trans = json.loads(one("translation-*/translation.json").read_text())
    pivot_dir = one("pivot-*/paraphrases.json").parent
    index = json.loads((pivot_dir / "paraphrases.json").read_text())
    seen_e = np.zeros(trans["n_e"], bool)
    seen_f = np.zeros(trans["n_f"], bool)
    for name in index["parts"]:
        with open_bundle(pivot_dir / name) as z:
            seen_e[z["e1"]] = True
            seen_e[z["e2"]] = True
            piv = z["pivots"]
            seen_f[piv[piv >= 0]] = True
    return {"n_sentences": int(shards["n_sentences"]), "n_pairs": int(sum(index["n_pairs"])),
            "n_e": int(trans["n_e"]), "n_f": int(trans["n_f"]), "n_entries": int(trans["n_kept"]),
            "n_stored_phrases": int(seen_e.sum()), "n_stored_foreign": int(seen_f.sum())}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes-from", nargs="+", metavar="NAME=WORK",
                    help="measure the counts of these finished work folders into --sizes, and stop")
    ap.add_argument("--builds", type=Path, nargs="+", help="bench_determinism.py results with --workers 1 builds")
    ap.add_argument("--pair", type=Path, help="a result with a --workers 2 and a --workers 1 build (the efficiency)")
    ap.add_argument("--multi", type=Path, help="the bio-multi build's result (--workers 2)")
    ap.add_argument("--sizes", type=Path, default=RESULTS / "sizes-session10.json")
    ap.add_argument("--roles", type=Path, nargs=2, metavar=("BIO", "BIO_MULTI"),
                    help="per-role reruns of the late stages and the write (bench/measure_roles.py) of bio and bio-multi")
    ap.add_argument("--write-roles", type=Path, nargs=2, metavar=("BIO", "BIO_MULTI"),
                    help="per-role reruns of the write alone (every stage reused) of bio and bio-multi, whose "
                         "store keys replace those of --roles")
    ap.add_argument("--preflight", type=Path,
                    help="bench_preflight.py's check CPU by stage of bio and bio-multi: preflight's bitext "
                         "read-through grown by the lines, the rest as measured at bio (preflight_seconds)")
    ap.add_argument("--late-logs", type=Path, nargs=2, metavar=("BIO", "BIO_MULTI"),
                    help="the build logs of the --roles reruns: their late batches of one task (single_tasks)")
    ap.add_argument("--stage-roles", type=Path, nargs=2, metavar=("BIO", "BIO_MULTI"), action="append",
                    help="per-role reruns of score, weights, translation and pivot (bench/bench_stage_memory.py) "
                         "of bio and bio-multi: their memory rows (the build's process, the tasks); given again, "
                         "a later pair replaces the stages it reran")
    ap.add_argument("--task-memory", type=Path, default=RESULTS / "task-memory-session12.json",
                    help="the build's process's bytes per task of a map (bench/bench_task_memory.py)")
    ap.add_argument("--encode-share", type=Path, default=RESULTS / "encode-share-session14.json",
                    help="bench/bench_encode.py's result: the share of encode's CPU in the build's process")
    ap.add_argument("--sentences", type=float, default=100e6)
    ap.add_argument("--cores", type=int, default=2, help="cores per node")
    ap.add_argument("--nodes", type=int, nargs="*", default=[1, 8, 32, 128])
    ap.add_argument("--json", type=Path, default=RESULTS / "projection-session10.json")
    args = ap.parse_args()

    if args.sizes_from:
        sizes = {}
        for item in args.sizes_from:
            name, _, work = item.partition("=")
            sizes[name] = measure_sizes(Path(work))
        args.sizes.write_text(json.dumps(sizes, indent=1, sort_keys=True) + "\n")
        print(json.dumps(sizes, indent=1))
        return
    if not (args.builds and args.pair and args.multi and args.roles):
        ap.error("--builds, --pair, --multi and --roles are needed (or --sizes-from)")

    builds = one_worker_builds(args.builds)
    cpu1, exponents = copies_curves(builds)
    # encode's build-process share: the largest measured (bench/bench_encode.py)
    share = max(run["build_share"] for run in json.loads(args.encode_share.read_text())["runs"])
    cpu1["encode-serial"], cpu1["encode"] = share * cpu1["encode"], (1 - share) * cpu1["encode"]
    exponents["encode-serial"] = exponents.get("encode", 1.0)
    roles_runs = [json.loads(Path(p).read_text()) for p in args.roles]
    if args.write_roles:
        roles_runs = [with_write_of(r, json.loads(Path(w).read_text())) for r, w in zip(roles_runs, args.write_roles)]
    for pair in args.stage_roles or ():
        roles_runs = [with_stages_of(r, json.loads(Path(w).read_text())) for r, w in zip(roles_runs, pair)]
    split_bio, split_multi = (late_split(r) for r in roles_runs)
    sizes = json.loads(args.sizes.read_text())
    measured = measured_exponents(split_bio, split_multi, sizes)
    cpu1.update(split_bio)       # the late stages and the write, as this code runs them on workers
    size_exp = size_exponents(sizes)
    scale = args.sentences / sizes["bio"]["n_sentences"]
    pair = json.loads(args.pair.read_text())
    eff, util = efficiency(pair)
    target = grow(cpu1, exponents, size_exp, scale, measured)
    if args.preflight:
        pre = json.loads(args.preflight.read_text())["recipes"]
        target["start"] = preflight_seconds(cpu1["start"], pre["bio"], pre["bio-multi"], args.sentences)
    single = ("", 0.0, 0.0, 0.0)
    if args.late_logs:
        single = longest_single(*(single_tasks(Path(p).read_text()) for p in args.late_logs),
                                sizes["bio-multi"]["n_sentences"] / sizes["bio"]["n_sentences"], scale)
        cpu1["late-single"], measured["late-single"], target["late-single"] = single[1], single[2], single[3]
    rows = [wall_hours(target, n, args.cores, eff, util=util) for n in args.nodes]
    # what the build would take with the largest one-core parts cut into tasks (not this code)
    moved = [wall_hours(target, n, args.cores, eff, as_tasks=WOULD_MOVE, util=util)
             for n in args.nodes]

    bio_w2 = [b for p in args.builds for b in json.loads(p.read_text())["builds"]
              if b["workers"] == 2 and json.loads(p.read_text()).get("scale", 1) == 1]
    multi = next(b for b in json.loads(args.multi.read_text())["builds"] if b["workers"] == 2)
    units = target_units(sizes, scale, args.sentences)
    roles = {name: by_stage_role(r) for name, r in zip(("bio", "bio-multi"), roles_runs)}
    per_task = task_bytes(json.loads(args.task_memory.read_text()))
    memory = memory_rows(builds, bio_w2, multi, sizes, units, roles, per_task)
    largest = max(memory, key=lambda n: memory[n]["target_gib"] or 0.0)

    out = {"builds": [str(p) for p in args.builds], "pair": str(args.pair), "multi": str(args.multi),
           "sizes": sizes, "target_sentences": args.sentences, "scale_vs_bio": round(scale, 1),
           "cores_per_node": args.cores,
           "cpu_s_1x_workers1": {k: round(v, 1) for k, v in cpu1.items()},
           "copies_exponents": {k: round(v, 3) for k, v in exponents.items()},
           "size_exponents_bio_to_multi": {k: round(v, 3) for k, v in size_exp.items()},
           "parallel_efficiency_2_workers": round(eff, 3), "utilisation_2_workers": round(util, 3),
           "roles": [str(p) for p in args.roles],
           "write_roles": [str(p) for p in args.write_roles] if args.write_roles else None,
           "stage_roles": [[str(p) for p in pair] for pair in args.stage_roles] if args.stage_roles else None,
           "task_memory": str(args.task_memory), "build_bytes_per_task": round(per_task, 1),
           "late_and_store_cpu_s": {"bio": split_bio, "bio-multi": split_multi},
           "late_logs": [str(p) for p in args.late_logs] if args.late_logs else None,
           "preflight": str(args.preflight) if args.preflight else None,
           "late_single_task": {"name": single[0], "bio_s": single[1], "exponent": round(single[2], 3),
                                "target_h": round(single[3] / 3600, 3)},
           "measured_exponents_bio_to_multi": {k: round(v, 3) for k, v in measured.items()},
           "cpu_h_at_target": {k: round(v / 3600, 2) for k, v in target.items()},
           "rows": [{k: round(v, 2) for k, v in r.items()} for r in rows],
           "rows_if_cut_into_tasks": {"stages": list(WOULD_MOVE),
                                      "rows": [{k: round(v, 2) for k, v in r.items()} for r in moved]},
           "memory_one_process": memory,
           "largest_one_process_at_target": {"stage": largest, **memory[largest]}}
    args.json.write_text(json.dumps(out, indent=1) + "\n")

    print(f"Target: {args.sentences:,.0f} sentence pairs = {scale:.0f}x bio; "
          f"nodes of {args.cores} cores; efficiency {eff:.3f} (utilisation {util:.3f}); distinct pairs ^{size_exp['n_pairs']:.2f}, "
          f"stored phrases ^{size_exp['n_stored_phrases']:.2f}.\n")
    print("| stage | CPU s at 1x | law | where | CPU h at the target |")
    print("|---|---:|---|---|---:|")
    for name, (law, where) in STAGES.items():
        b = exponents.get(name) if law == COPIES else measured.get(name) if law == MEASURED else None
        shown = f"{law} ^{b:.2f}" if b is not None else law
        print(f"| {name} | {cpu1.get(name, 0.0):.1f} | {shown} | {where} | {target[name] / 3600:.2f} |")
    print("\n| nodes | total (h) | on one core (h) | spread over the workers (h) |")
    print("|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['nodes']} | {r['total_h']:.2f} | {r['one_core_h']:.2f} | {r['spread_h']:.2f} |")
    print(f"\nWith {', '.join(WOULD_MOVE)} cut into tasks (not this code):")
    for r in moved:
        print(f"| {r['nodes']} | {r['total_h']:.2f} | {r['one_core_h']:.2f} | {r['spread_h']:.2f} |")
    print("\n| stage | process | law | --workers 1 at 1x, 2x, 4x (GiB) | bio / bio-multi (GiB) | B a unit "
          "| at the target (GiB) |")
    print("|---|---|---|---|---|---:|---:|")
    for name, r in memory.items():
        w1 = ", ".join(f"{v:.2f}" for v in r["w1_gib_by_copies"].values()) or "-"
        print(f"| {name} | {r['process']} | {r['law']} | {w1} | {r['bio_gib']} / {r['bio_multi_gib']} "
              f"| {r.get('bytes_per_unit', '-')} | {r['target_gib']} |")


if __name__ == "__main__":
    main()
