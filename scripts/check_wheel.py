#!/usr/bin/env python3
"""The wheel check: build what users install, install it alone, and run every subcommand from it.

    python scripts/check_wheel.py [--data DIR] [--keep] [--wheel FILE]

`.ci/run` calls it after the editable test run (which cannot see a module left out of the wheel:
there the checkout itself is on sys.path). Needs the checkout's `pip install -e ".[test]"` (for
`build`, and for the tests' input writers it borrows) and the network or pip's cache for the
build's and the venv's dependencies. It takes about 5 minutes on 2 cores, half of it compiling
the kernels.

1. Packaging. The checkout's files (`git ls-files`: tracked and not ignored, as they are in the
   working tree, so an editable install's build/, *.so and *.egg-info never leak in) are copied to
   a temporary folder; `python -m build` makes the sdist there, then the wheel twice at once: from
   the copy and from the unpacked sdist alone. The sdist must hold every module and kernel source,
   the recipes and the build files; both wheels the same files (byte for byte, but for the
   compiled kernels), and exactly the package: every module, one compiled kernel per .pyx and the
   shipped recipes.
2. A fresh venv gets the sdist's wheel with the extras `serve` and `sentences`; `pivot` must
   import from its site-packages with the checkout nowhere on sys.path.
3. From a temporary folder outside the checkout, every subcommand runs on tiny inputs (the two
   recipes the tests build, written by the tests' own functions, and MSRP pairs written here), and
   each checks the exit code and the output against values traced by hand below.

One line per step, then `N passed, M failed`; the exit code is 1 when any step failed. The
temporary folder (builds, logs, venv, inputs) is removed, unless a step failed or `--keep` is
given; `--wheel FILE` skips step 1 and installs FILE.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXTRAS = "serve,sentences"  # datasette for `serve`; scikit-learn and sacrebleu for `identify`


class Failed(Exception):
    """A step's check did not hold; the message says what was expected and what came."""


def expect(condition, message):
    if not condition:
        raise Failed(message)


# ---------------------------------------------------------------------------------------------
# Tiny inputs
# ---------------------------------------------------------------------------------------------

# The inputs of the two builds are the tests' own, written by their writers (imported from tests/
# by this script's Python, the checkout's; the venv under test never sees the checkout).
#
# tests/test_cli.py's three-sentence recipe, aligned by hand (0-0 1-1 2-2):
#     we treat it | nous soignons le;  we cure it | nous soignons le;  they treat it | ils traitent le
# p(cure|treat) = p(cure|soignons) p(soignons|treat) = 1/2 * 1/2 = 0.25 and
# p(treat|cure) = p(treat|soignons) p(soignons|cure) = 1/2 * 1 = 0.5. The phrases that share a pivot
# are treat~cure (soignons), "we treat"~"we cure" (nous soignons), "treat it"~"cure it" (soignons le)
# and "we treat it"~"we cure it" (nous soignons le): 4 pairs, 8 exported lines (both directions).
# No learned score and no relations in that recipe ([ppdb2] learn = false, wordnet = false): the
# line carries General's -ln p both ways, the pivot count and the (empty) well-formedness flags.
TREAT_CURE_PPDB = ("[X] ||| treat ||| cure ||| -logp(e2|e1)=1.38629 -logp(e1|e2)=0.693147 NumPivots=1 "
                   "Form=none ||| 0-0 ||| OtherRelated")
TINY_PAIRS = {("treat", "cure"), ("we treat", "we cure"), ("treat it", "cure it"), ("we treat it", "we cure it")}
# Phrases matching 'tre*' and their counts in the three sentences (a stored phrase takes part in a pair).
TINY_SEARCH = [("treat", 2), ("treat it", 2), ("we treat", 1), ("we treat it", 1)]
#
# tests/test_build_domain.py's domain recipe: twelve sentences word for word, whose foreign side maps
# synonyms to one word (divides, splits -> divise; ...), six of them about cells and proteins; an
# in-domain text about cells, a gold set that tunes the combination and a control set in [eval].

MSRP_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"
GREEK = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def msrp_rows():
    """30 MSRP pairs, separable by construction: a positive pair is six words + "treat" against the
    same six + "cure" (6 of 7 words shared, edit distance 1), a negative pair two sentences with no
    word in common (rotations of GREEK six apart)."""
    rows = []
    for i in range(30):
        s = " ".join(GREEK[(i + j) % 12] for j in range(6))
        other = " ".join(GREEK[(i + 6 + j) % 12] for j in range(6))
        rows.append((1, i, i + 100, s + " treat", s + " cure") if i % 2 else (0, i, i + 100, s, other))
    return rows


def write_inputs(run_dir: Path, inputs: dict) -> str:
    sys.path.insert(0, str(REPO / "tests"))
    import test_build_domain
    import test_cli

    tiny, bio = run_dir / "tiny", run_dir / "bio"
    tiny.mkdir()
    bio.mkdir()
    test_cli.write_recipe(tiny)            # tiny/tiny.toml, tiny/data/c.{en,fr,align}
    test_build_domain.write_tiny(bio)      # bio/tinybio.toml, bio/data/...
    rows = msrp_rows()
    for name, part in (("train.txt", rows[:20]), ("test.txt", rows[20:])):
        text = "".join(line + "\n" for line in [MSRP_HEADER] + ["\t".join(map(str, r)) for r in part])
        (run_dir / name).write_text(text, encoding="utf-8")
    inputs.update(tiny_db=tiny / "tiny.db", bio_db=bio / "tinybio.db", bio_en=test_build_domain.EN,
                  bio_sentences=test_build_domain.BIO, test_labels=[r[0] for r in rows[20:]])
    return "tests/test_cli.py's and tests/test_build_domain.py's recipes, 30 MSRP pairs"


# ---------------------------------------------------------------------------------------------
# Running things
# ---------------------------------------------------------------------------------------------

def run(cmd, *, cwd, env=None, timeout=600, log: Path | None = None) -> subprocess.CompletedProcess:
    """Run cmd with no stdin; a non-zero exit fails the step with stderr's last line (or the log's)."""
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout, check=False)
    if log is not None:
        log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines() or ["(no output)"]
        where = f"; log: {log}" if log is not None else ""
        raise Failed(f"exit {proc.returncode}: {lines[-1]}{where}")
    return proc


class Steps:
    """Runs named steps, prints one line each, counts them."""

    def __init__(self):
        self.passed = self.failed = 0

    def __call__(self, name, check, *args):
        t0 = time.perf_counter()
        try:
            detail, ok = check(*args) or "", True
        except Failed as exc:
            detail, ok = str(exc), False
        except subprocess.TimeoutExpired as exc:
            detail, ok = f"timed out after {exc.timeout:.0f} s", False
        except Exception as exc:  # a defect of this script or of an input it did not foresee: still one line
            detail, ok = f"{type(exc).__name__}: {exc} ({traceback.extract_tb(exc.__traceback__)[-1].lineno})", False
        self.passed += ok
        self.failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'}  {name:<34} {time.perf_counter() - t0:6.1f} s  {detail}", flush=True)
        return ok

    def summary(self) -> int:
        print(f"{self.passed} passed, {self.failed} failed", flush=True)
        return 1 if self.failed else 0


# ---------------------------------------------------------------------------------------------
# 1. Packaging
# ---------------------------------------------------------------------------------------------

def checkout_files() -> list[str]:
    """The checkout's files: tracked, and untracked ones that .gitignore does not exclude (a new
    module not yet added counts; build output, *.so, .venv/ and .tools/ do not)."""
    out = run(["git", "-C", REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO).stdout
    return [name for name in out.split("\0") if name and (REPO / name).is_file()]


def copy_checkout(src: Path) -> str:
    names = checkout_files()
    for name in names:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, src / name)
    return f"{len(names)} files"


def build_sdist(src: Path, dist: Path, logs: Path) -> str:
    run([sys.executable, "-m", "build", "--sdist", "--outdir", dist / "sdist", src], cwd=src,
        timeout=900, log=logs / "build-sdist.log")
    (sdist,) = (dist / "sdist").glob("*.tar.gz")
    return sdist.name


def sdist_holds_the_sources(dist: Path) -> str:
    (sdist,) = (dist / "sdist").glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        top = tar.getnames()[0].split("/")[0]
        names = {n[len(top) + 1:] for n in tar.getnames() if n.startswith(top + "/")}
    files = checkout_files()
    wanted = {n for n in files if n.startswith("pivot/") and n.endswith((".py", ".pyx"))}
    wanted |= {n for n in files if n.startswith("recipes/") and n.endswith(".toml")}
    wanted |= {"README.md", "pyproject.toml", "setup.py", "MANIFEST.in"}
    missing = sorted(wanted - names)
    generated = sorted(n for n in names if n.endswith((".so", ".cpp", ".c")))
    expect(not missing, f"missing from the sdist: {', '.join(missing)}")
    expect(not generated, f"built files in the sdist: {', '.join(generated)}")
    return f"{len(wanted)} sources present, no built files"


def build_wheels(src: Path, dist: Path, logs: Path) -> str:
    """The wheel from the copied checkout and from the unpacked sdist, side by side (one core each)."""
    (sdist,) = (dist / "sdist").glob("*.tar.gz")
    unpacked = dist / "unpacked"
    # The "data" filter (plain files and folders inside the target only) exists from Python 3.11.4.
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    with tarfile.open(sdist) as tar:
        tar.extractall(unpacked, **safe)
    (sdist_src,) = unpacked.iterdir()
    jobs = {"checkout": src, "sdist": sdist_src}
    procs = {}
    for name, folder in jobs.items():
        with open(logs / f"build-wheel-{name}.log", "w") as log:
            procs[name] = subprocess.Popen([sys.executable, "-m", "build", "--wheel", "--outdir",
                                            str(dist / f"wheel-{name}"), str(folder)],
                                           cwd=folder, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    codes = {name: proc.wait(timeout=1800) for name, proc in procs.items()}
    failed = [f"from the {name}: exit {code} (log: {logs}/build-wheel-{name}.log)"
              for name, code in codes.items() if code != 0]
    expect(not failed, "; ".join(failed))
    return ", ".join(next((dist / f"wheel-{name}").glob("*.whl")).name for name in jobs)


def wheel_members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def wheels_agree(dist: Path) -> str:
    (from_checkout,) = (dist / "wheel-checkout").glob("*.whl")
    (from_sdist,) = (dist / "wheel-sdist").glob("*.whl")
    a, b = wheel_members(from_checkout), wheel_members(from_sdist)
    expect(set(a) == set(b), f"only from the checkout: {sorted(set(a) - set(b))}; "
                             f"only from the sdist: {sorted(set(b) - set(a))}")
    # The compiled kernels may differ in embedded build paths; RECORD holds their hashes.
    differ = sorted(n for n in a if a[n] != b[n] and not n.endswith((".so", "/RECORD")))
    expect(not differ, f"different bytes: {', '.join(differ)}")
    # Exactly the package: every module, one kernel per .pyx, the recipes as pivot.recipes_data.
    files = checkout_files()
    package = {n for n in b if ".dist-info/" not in n}
    wanted = {n for n in files if n.startswith("pivot/") and n.endswith(".py")}
    wanted |= {"pivot/recipes_data/" + Path(n).name for n in files if re.fullmatch(r"recipes/[^/]+\.toml", n)}
    kernels = {n[:-len(".pyx")] for n in files if re.fullmatch(r"pivot/[^/]+\.pyx", n)}
    compiled = {n for n in package if n.endswith(".so")}
    missing = sorted(wanted - package) + sorted(k for k in kernels if not any(c.startswith(k + ".") for c in compiled))
    extra = sorted(package - wanted - compiled) + sorted(c for c in compiled if c.split(".")[0] not in kernels)
    expect(not missing, f"missing from the wheel: {', '.join(missing)}")
    expect(not extra, f"not part of the package: {', '.join(extra)}")
    return f"{len(package)} files, the same in both; {len(compiled)} kernels"


# ---------------------------------------------------------------------------------------------
# 2. The fresh venv
# ---------------------------------------------------------------------------------------------

def make_venv(venv: Path, wheel: Path, logs: Path) -> str:
    run([sys.executable, "-m", "venv", venv], cwd=venv.parent, timeout=300)
    env = dict(os.environ, PIP_ROOT_USER_ACTION="ignore", PIP_DISABLE_PIP_VERSION_CHECK="1")
    # --no-compile: no .pyc for the ~60 dependencies up front (a third of the install's time); each
    # is compiled when first imported.
    run([venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-compile", f"{wheel}[{EXTRAS}]"],
        cwd=venv.parent, env=env, timeout=1200, log=logs / "pip-install.log")
    return f"{wheel.name}[{EXTRAS}]"


def clean_env(venv: Path) -> dict:
    """The environment of a user of the venv: its bin first, nothing of the checkout's."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


IMPORT_PROBE = """
import importlib, json, pkgutil, sys, sysconfig
import pivot
broken, names = [], ["pivot"]
for mod in pkgutil.walk_packages(pivot.__path__, "pivot."):
    names.append(mod.name)
    if mod.name == "pivot.__main__":  # runs the CLI
        continue
    try:
        importlib.import_module(mod.name)
    except Exception as exc:
        broken.append(f"{mod.name}: {type(exc).__name__}: {exc}")
print(json.dumps({"file": pivot.__file__, "path": sys.path, "site": [sysconfig.get_path("purelib"),
                  sysconfig.get_path("platlib")],
                  "names": names, "broken": broken}))
"""


def imports_from_site_packages(venv: Path, run_dir: Path, env: dict) -> str:
    probe = json.loads(run([venv / "bin" / "python", "-c", IMPORT_PROBE], cwd=run_dir, env=env).stdout)
    file = Path(probe["file"]).resolve()
    site = [Path(p).resolve() for p in probe["site"]]
    expect(any(file.is_relative_to(s) for s in site), f"pivot imported from {file}, not from {site[0]}")
    inside = [p for p in probe["path"] if p and Path(p).resolve().is_relative_to(REPO)]
    expect(not inside, f"the checkout is on sys.path: {inside}")
    # The checkout's modules (pivot/a/b.py is pivot.a.b, pivot/a/__init__.py is pivot.a, pivot/_k.pyx
    # the kernel pivot._k) against those installed: a package left out of the wheel shows here too.
    modules = {re.sub(r"(/__init__)?\.(py|pyx)$", "", n).replace("/", ".")
               for n in checkout_files() if n.startswith("pivot/") and n.endswith((".py", ".pyx"))}
    missing = sorted(modules - set(probe["names"]))
    expect(not missing, f"not installed: {', '.join(missing)}")
    expect(not probe["broken"], f"modules that do not import: {'; '.join(probe['broken'])}")
    return f"{file.parent}; all {len(modules)} modules import"


# ---------------------------------------------------------------------------------------------
# 3. Every subcommand, from the venv
# ---------------------------------------------------------------------------------------------

class Commands:
    def __init__(self, venv: Path, run_dir: Path, env: dict, inputs: dict, data: Path):
        self.python, self.pivot = venv / "bin" / "python", venv / "bin" / "pivot"
        self.dir, self.env, self.inputs, self.data = run_dir, env, inputs, data

    def __call__(self, *args, timeout=600):
        return run([self.pivot, *args], cwd=self.dir, env=self.env, timeout=timeout)

    def version_flag(self):
        """pivot/_version.py against the version the wheel's metadata declares (pyproject.toml's)."""
        metadata = run([self.python, "-c", "import importlib.metadata as m; print(m.version('pivot-paraphrase'))"],
                       cwd=self.dir, env=self.env).stdout.strip()
        out = run([self.python, "-m", "pivot", "--version"], cwd=self.dir, env=self.env).stdout.strip()
        expect(out == f"pivot {metadata}", f"expected 'pivot {metadata}' (the installed metadata), got {out!r}")
        return out

    def build_tiny(self):
        db = self.inputs["tiny_db"]
        self("-q", "build", "--recipe", "tiny/tiny.toml", "--data", "tiny/data", "--out", db,
             "--work", "tiny/work", "--workers", "1")
        expect(db.is_file(), f"no database at {db}")
        return f"{db.name}, {db.stat().st_size} bytes"

    def lookup_table(self):
        lines = self("lookup", self.inputs["tiny_db"], "treat").stdout.splitlines()
        # rank, paraphrase, score (General's p(e2|e1) here), p(e2|e1), p(e1|e2)
        expect(len(lines) == 2 and lines[1].split()[:5] == ["1", "cure", "0.2500", "0.2500", "0.5000"],
               f"expected one row '1 cure 0.2500 0.2500 0.5000 ...', got {lines}")
        return lines[1].strip()

    def lookup_json(self):
        out = json.loads(self("lookup", self.inputs["tiny_db"], "treat", "--format", "json").stdout)
        got = [(p["paraphrase"], p["score"], p["p_rev"], p["pivots"]) for p in out["paraphrases"]]
        expect(got == [("cure", 0.25, 0.5, ["fr:soignons"])], f"expected cure 0.25 0.5 [fr:soignons], got {got}")
        expect(out["signature"].startswith("pivot:"), f"no signature: {out['signature']!r}")
        return "cure 0.25, p_rev 0.5, pivot fr:soignons"

    def lookup_ppdb(self):
        out = self("lookup", self.inputs["tiny_db"], "treat", "--format", "ppdb").stdout.strip()
        expect(out == TREAT_CURE_PPDB, f"expected {TREAT_CURE_PPDB!r}, got {out!r}")
        return "-logp(e2|e1)=1.38629 -logp(e1|e2)=0.693147"

    def export(self):
        path = self.dir / "tiny.ppdb"
        self("-q", "export", self.inputs["tiny_db"], "--format", "ppdb", "-o", path)
        lines = path.read_text(encoding="utf-8").splitlines()
        fields = [line.split(" ||| ") for line in lines]
        expect(all(len(f) == 6 for f in fields), "a line without six ' ||| ' fields")
        pairs = sorted((f[1], f[2]) for f in fields)
        want = sorted([*TINY_PAIRS, *((b, a) for a, b in TINY_PAIRS)])
        expect(pairs == want, f"expected the 8 pairs {want}, got {pairs}")
        expect(TREAT_CURE_PPDB in lines, "no treat -> cure line as lookup prints it")
        return f"{len(lines)} lines"

    def search(self):
        out = json.loads(self("search", self.inputs["tiny_db"], "tre*", "--format", "json").stdout)
        got = [(m["phrase"], m["count"]) for m in out["matches"]]
        expect(got == TINY_SEARCH, f"expected {TINY_SEARCH}, got {got}")
        return ", ".join(f"{p} ({n})" for p, n in got)

    def serve(self):
        """datasette on a port the OS picks (`--port 0`; pivot prints the URL), one GET of the
        canned `paraphrases` query of the General model, then Ctrl-C."""
        proc = subprocess.Popen([str(self.pivot), "serve", str(self.inputs["tiny_db"]), "--host", "127.0.0.1",
                                 "--port", "0"], cwd=self.dir, env=self.env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            ready, _, _ = select.select([proc.stdout], [], [], 60)
            line = proc.stdout.readline() if ready else ""
            match = re.search(r" at (http://127\.0\.0\.1:\d+/\w+) ", line)
            expect(match, f"no 'serving ... at URL' line within 60 s (got {line!r}, exit {proc.poll()})")
            url = match.group(1) + "/paraphrases.json?_shape=array&phrase=treat&model=general"
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1, never a proxy
            deadline = time.monotonic() + 30
            while True:  # uvicorn starts listening just after the line is printed
                try:
                    with opener.open(url, timeout=10) as response:
                        status, body = response.status, response.read().decode("utf-8")
                    break
                except (ConnectionError, urllib.error.URLError) as exc:
                    expect(time.monotonic() < deadline and proc.poll() is None, f"GET {url}: {exc}")
                    time.sleep(0.2)
            rows = json.loads(body)
            expect(status == 200 and [(r["paraphrase"], r["score"]) for r in rows] == [("cure", 0.25)],
                   f"GET {url}: expected 200 and cure 0.25, got {status} {body[:200]!r}")
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                code = proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise Failed("did not stop within 20 s of Ctrl-C (killed)")
        return f"GET …/paraphrases.json: 200, cure 0.25; stopped by Ctrl-C (exit {code})"

    def build_bio(self):
        """The domain recipe with the default Dask workers (one process per core: they too import
        the installed pivot). General: "divides" and "splits" are aligned only to "divise", which is
        aligned once to each, so p(splits|divides) = p(splits|divise) p(divise|divides) = 1/2 * 1."""
        db = self.inputs["bio_db"]
        self("-q", "build", "--recipe", "bio/tinybio.toml", "--data", "bio/data", "--out", db, "--work", "bio/work")
        out = json.loads(self("lookup", db, "divides", "--format", "json", "-k", "1").stdout)
        got = [(p["paraphrase"], p["score"]) for p in out["paraphrases"]]
        expect(got == [("splits", 0.5)], f"expected divides -> splits 0.5, got {got}")
        models = json.loads(self("lookup", db, "divides", "--model", "general+ml-weighted", "--format", "json").stdout)
        expect(models["paraphrases"], "the combined model general+ml-weighted proposes nothing for divides")
        return "divides -> splits 0.5; general+ml-weighted answers"

    def score(self):
        """The bitext ranked by sigma = H_tgt - H_gen, lowest (most in-domain) first: the six
        sentences about cells and proteins rank above the six about food and music."""
        ranked = self.dir / "ranked.tsv"
        self("-q", "score", "--recipe", "bio/tinybio.toml", "--data", "bio/data", "--work", "bio/work", "-o", ranked)
        rows = [line.split("\t") for line in ranked.read_text(encoding="utf-8").splitlines()]
        n = len(self.inputs["bio_en"])
        expect(len(rows) == n and all(len(r) == 4 for r in rows), f"expected {n} rows of 4 fields, got {len(rows)}")
        sigma = [float(r[0]) for r in rows]
        expect(sigma == sorted(sigma), "not sorted by sigma")
        first = {r[3] for r in rows[:6]}
        expect(first == self.inputs["bio_sentences"], f"the first six are not the biological ones: {sorted(first)}")
        return f"{len(rows)} sentences, the 6 biological first"

    def eval(self):
        """The recipe's control set: binds/attaches (positive) and "we eat"/"we devour" (negative)
        are candidates, pizza/music shares no pivot. General, the better direction of each pair:
        p(attaches|binds) = p(attaches|lie) p(lie|binds) = 1/2 * 1 = 0.5 (0.5 reversed too); "we eat"
        occurs twice and "we devour" once, all as "nous mange": p(we eat|we devour) = 2/3 * 1.
        The negative ranks first: AP = precision at the positive = 1/2."""
        report = self.dir / "report" / "results.md"
        out = self("eval", self.inputs["bio_db"], "--recipe", "bio/tinybio.toml", "--data", "bio/data",
                   "--report", report, "--n-boot", "50").stdout
        expect("## control: 2 candidates (1 positive) of 3 gold pairs" in out, f"no control header in {out[:300]!r}")
        expect("| general | 50.0" in out, "General's AP is not 50.0")
        pngs = sorted((report.parent / "figures").glob("*.png"))
        expect(report.is_file() and "## control" in report.read_text(encoding="utf-8"), f"no report at {report}")
        expect(pngs and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs), "no PNG figures")
        return f"General AP 50.0; report + {len(pngs)} figures"

    def paraphrase(self):
        """Every span of "the cell divides" that has a paraphrase turns divides into splits (the and
        cell pivot only to themselves), so with --force-change the output is "the cell splits".
        The LM is the build's, found in the work dir beside the database."""
        out = self("-q", "paraphrase", self.inputs["bio_db"], "--force-change", "the cell divides").stdout
        expect(out == "the cell splits\n", f"expected 'the cell splits', got {out!r}")
        return "the cell divides -> the cell splits"

    def identify(self):
        pred = self.dir / "pred.tsv"
        out = self("-q", "identify", self.inputs["tiny_db"], "--train", "train.txt", "--test", "test.txt",
                   "--predictions", pred, "--n-boot", "20").stdout
        expect("majority baseline" in out and "string + DB" in out, f"no results table in {out[:300]!r}")
        labels = [int(line.split("\t")[0]) for line in pred.read_text().splitlines()]
        expect(labels == self.inputs["test_labels"],
               f"separable pairs misclassified: {labels} != {self.inputs['test_labels']}")
        return f"{len(labels)} test pairs, all right"

    def align_eval(self):
        """ibm2 trained on the Hansards gold sentences alone (--no-bitext: quick); the counts are
        the gold files' own: one sentence a line, one link a line, S for sure."""
        gold = self.data / "gold" / "hansards-align"
        expect((gold / "test.e").is_file(), f"no Hansards gold at {gold} (set PIVOT_DATA or --data)")
        out = json.loads(self("-q", "align-eval", "--data", self.data, "--no-bitext", "--format", "json").stdout)
        n_sentences = len((gold / "test.e").read_text(encoding="utf-8").splitlines())
        links = (gold / "test.wa.nonullalign").read_text().splitlines()
        n_sure = sum(line.split()[-1] == "S" for line in links)
        got = (out["gold_pairs"], out["training_pairs"], out["sure_links"], out["possible_links_incl_sure"])
        want = (n_sentences, n_sentences, n_sure, len(links))
        expect(got == want, f"expected gold pairs, training pairs, sure, possible links = {want}, got {got}")
        expect(0 < out["aer"] < 1, f"AER {out['aer']}")
        return f"{n_sentences} pairs, AER {out['aer']}"


# ---------------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("PIVOT_DATA", REPO.parent / "shared" / "data")),
                    help="data root holding gold/hansards-align, for align-eval (default: $PIVOT_DATA, else "
                         "../shared/data beside the checkout)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--wheel", type=Path, help="install this wheel instead of building one (skips the packaging)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="pivot-wheel-check-")).resolve()
    if tmp.is_relative_to(REPO):
        sys.exit(f"check_wheel.py: the temporary folder {tmp} is inside the checkout; set TMPDIR elsewhere")
    src, dist, logs, venv, run_dir = tmp / "src", tmp / "dist", tmp / "logs", tmp / "venv", tmp / "run"
    for folder in (src, dist, logs, run_dir):
        folder.mkdir()
    print(f"wheel check in {tmp}", flush=True)
    steps = Steps()
    try:
        if args.wheel:
            wheel = args.wheel.resolve()
            print(f"packaging skipped: installing {wheel}", flush=True)
        else:
            packaging = [("copy the checkout's files", copy_checkout, src),
                         ("sdist from the checkout", build_sdist, src, dist, logs),
                         ("the sdist holds the sources", sdist_holds_the_sources, dist),
                         ("wheels from checkout and sdist", build_wheels, src, dist, logs),
                         ("the two wheels agree", wheels_agree, dist)]
            for name, check, *check_args in packaging:
                if not steps(name, check, *check_args):
                    return steps.summary()  # nothing after it can run
            (wheel,) = (dist / "wheel-sdist").glob("*.whl")
        if not steps("fresh venv with the wheel", make_venv, venv, wheel, logs):
            return steps.summary()
        env = clean_env(venv)
        steps("pivot imports from site-packages", imports_from_site_packages, venv, run_dir, env)
        inputs = {}
        steps("tiny inputs", write_inputs, run_dir, inputs)
        cmd = Commands(venv, run_dir, env, inputs, args.data.resolve())
        for name, check in [("python -m pivot --version", cmd.version_flag),
                            ("build (3 sentences, no Dask)", cmd.build_tiny),
                            ("lookup (table)", cmd.lookup_table),
                            ("lookup --format json", cmd.lookup_json),
                            ("lookup --format ppdb", cmd.lookup_ppdb),
                            ("export --format ppdb", cmd.export),
                            ("search", cmd.search),
                            ("serve", cmd.serve),
                            ("build (domain recipe, Dask)", cmd.build_bio),
                            ("score", cmd.score),
                            ("eval", cmd.eval),
                            ("paraphrase", cmd.paraphrase),
                            ("identify", cmd.identify),
                            ("align-eval", cmd.align_eval)]:
            steps(name, check)
        return steps.summary()
    finally:
        if args.keep or steps.failed:
            print(f"kept {tmp} (its logs/ hold the builds' and pip's output)", flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
