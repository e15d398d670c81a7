"""The documentation runs: every fenced block of README.md and docs/**/*.md is executed or checked.

* ```python blocks run as scripts (`python block.py`, so a script's own rules apply, such as the
  `if __name__ == "__main__":` guard that Dask's spawned workers need), each in a fresh folder
  where `bio.db` is a copy of a tiny database built once per module and `../shared/data` is the
  data root (PIVOT_DATA). A block that reads the real data is skipped, saying why, when the data
  root is absent; no other block is ever skipped. STAND_INS lists every other substitution a
  block gets (the tiny recipe for the full bio build, a tiny GENIA-pos for the tagger's 65 s
  training), each with its reason; a stand-in whose text no longer occurs in the docs fails.
  A block that cannot run here starts with `# not run: REASON`; it must still compile.
  Every block, run or not, has each `pivot.X.Y` it names (code, `import`, `from ... import`,
  and dotted names in comments) resolved: the module imported, the name looked up.
* ```console / ```bash / ```sh blocks: each `pivot ...` command (after an optional `$ `; in a
  console block only `$ ` lines are commands, the rest is output) is parsed by the real parser
  `pivot.cli.build_parser()`: the subcommand must exist, every `-x`/`--flag` token must be an
  option string of that subcommand (or a global option), a `--flag` named in the line's trailing
  comment too, and argparse must accept the whole line (choices, required arguments). A
  `python path.py ...` command needs the script, and each of its flags in the script's `--help`.
  `pivot --help`'s quick usage (pivot.cli.QUICK_USAGE) is checked the same way.
* Every fence says what it holds: an untagged fence could hide a command from these checks.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import importlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pivot import cli

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("**/*.md"))]
# The data root, as the other integration tests find it: PIVOT_DATA, else ../shared/data beside the checkout.
DATA = Path(os.environ.get("PIVOT_DATA", REPO.parent / "shared" / "data"))
DOC_DATA = "../shared/data"  # how the docs name the data root, relative to the folder a block runs in

SHELL = {"console", "bash", "sh"}
# Fences that hold no command: output, file formats, diagrams, configuration.
INERT = {"text", "yaml", "toml", "json", "tsv", "ppdb", "markdown"}
NOT_RUN = re.compile(r"#\s*not run:\s*(\S.*)")


# ------------------------------------------------------------------------------ the blocks


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    lines: list[str] = field(default_factory=list)
    closed: bool = True

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def fenced_blocks(path: Path) -> list[Block]:
    """The ``` fences of a Markdown file; an indented fence (inside a list item) loses its indent."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^( *)```(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        indent, j = len(m.group(1)), i + 1
        while j < len(lines) and not re.match(r"^ *```\s*$", lines[j]):
            j += 1
        body = [line[indent:] if line[:indent].isspace() else line for line in lines[i + 1:j]]
        out.append(Block(path, i + 1, m.group(2), body, closed=j < len(lines)))
        i = j + 1
    return out


BLOCKS = [b for doc in DOCS for b in fenced_blocks(doc)]
PYTHON = [b for b in BLOCKS if b.lang == "python"]
SHELL_BLOCKS = [b for b in BLOCKS if b.lang in SHELL]


def test_docs_are_found():
    # An empty list would make every check below vacuous.
    assert DOCS[0].is_file() and len(DOCS) > 1 and PYTHON and SHELL_BLOCKS


def test_every_fence_is_closed_and_says_what_it_holds():
    bad = [f"{b.where}: fence never closed" for b in BLOCKS if not b.closed]
    bad += [f"{b.where}: fence without a language (python, console, bash, sh, or text for output)"
            for b in BLOCKS if not b.lang]
    bad += [f"{b.where}: unknown fence language {b.lang!r} (python, {', '.join(sorted(SHELL | INERT))})"
            for b in BLOCKS if b.lang and b.lang not in SHELL | INERT | {"python"}]
    # An inert block holding a command line has the wrong tag.
    bad += [f"{b.where}: a `pivot` command in a {b.lang!r} block (tag it console or bash)"
            for b in BLOCKS if b.lang in INERT
            and any(re.match(r"^\s*(\$ )?pivot\s", line) for line in b.lines)]
    assert not bad, "\n".join(bad)


# ----------------------------------------------------------------------- names in Python


def resolve(dotted: str) -> str | None:
    """None if `pivot.a.b.c` exists (modules imported, then attributes looked up), else why not."""
    parts = dotted.split(".")
    obj = importlib.import_module(parts[0])
    for k, part in enumerate(parts[1:], start=1):
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        prefix = ".".join(parts[:k + 1])
        try:
            obj = importlib.import_module(prefix)
        except ModuleNotFoundError as exc:
            if exc.name != prefix:  # the module exists but imports something missing
                raise
            return f"{dotted}: {'.'.join(parts[:k])} has no module or name {part!r}"
    return None


def pivot_names(source: str) -> list[tuple[int, str]]:
    """(line in the block, dotted name) for every pivot name a Python block uses or mentions."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "pivot"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "pivot":
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names if a.name != "*"]
        elif isinstance(node, ast.Attribute):
            chain, cur = [], node
            while isinstance(cur, ast.Attribute):
                chain.append(cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name) and cur.id == "pivot":
                out.append((node.lineno, ".".join(["pivot", *reversed(chain)])))
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out += [(tok.start[0], m) for m in re.findall(r"\bpivot(?:\.[A-Za-z_]\w*)+", tok.string)]
    return sorted(set(out))


def name_problems(block: Block) -> list[str]:
    return [f"{block.path.relative_to(REPO)}:{block.line + n}: {why}"
            for n, name in pivot_names(block.text) if (why := resolve(name))]


# ------------------------------------------------------------------- running Python blocks


@dataclass
class StandIn:
    """What a block gets instead of what the docs assume (each documented by `why`)."""
    why: str
    replace: dict = field(default_factory=dict)  # doc text -> text; {recipe} {data}: the tiny build's
    argv: list = field(default_factory=list)  # command-line arguments of the script
    data: str = "real"  # the data root at ../shared/data: "real" (PIVOT_DATA) or "genia" (a tiny GENIA-pos)
    bio_db: bool = True  # a copy of the tiny database at bio.db
    bio_ppdb: bool = False  # the tiny database's PPDB export at bio.ppdb
    creates: list = field(default_factory=list)  # files the block must have written


# Keyed by (doc, a text that occurs in exactly one of its Python blocks).
STAND_INS = {
    ("README.md", 'pivot.build("bio", data="../shared/data", out="bio.db")'): StandIn(
        why="the bio recipe builds for minutes; the same call builds the tiny recipe from scratch (its own "
            "work directory, so every stage runs and the Dask workers, spawned, import the script again)",
        replace={'pivot.build("bio", data="../shared/data", out="bio.db")':
                 'pivot.build(recipe={recipe!r}, data={data!r}, out="bio.db")'},
        bio_db=False, creates=["bio.db"]),
    ("docs/ecosystem.md", 'tagger, info = genia_tagger("../shared/data")'): StandIn(
        why="the real GENIA-pos trains the tagger for about 65 s; a tiny GENIA-pos trains it in a moment, "
            "and bio.ppdb is the tiny database's PPDB export",
        argv=["bio.ppdb"], data="genia", bio_ppdb=True),
}


def stand_in(block: Block) -> StandIn:
    found = [s for (doc, line), s in STAND_INS.items()
             if block.path == REPO / doc and line in block.text]
    assert len(found) <= 1, f"{block.where}: more than one stand-in"
    return found[0] if found else StandIn(why="")


def test_every_stand_in_matches_one_block():
    for (doc, line), s in STAND_INS.items():
        hits = [b for b in PYTHON if b.path == REPO / doc and line in b.text]
        assert len(hits) == 1, f"stand-in for {doc} {line!r}: {len(hits)} blocks hold that line"
        for old in s.replace:
            assert old in hits[0].text, f"{hits[0].where}: the stand-in's text {old!r} is gone"


# The tiny database: tests/test_build_domain.py's recipe (every model, General + X included),
# with sentences that give the README's lookups and its SimLex-999 evaluation something to find:
# "smart"~"intelligent" (SimLex-999: 9.2, a positive at threshold 6) share the pivot
# "intelligente", and "treat"~"cure" share "soignent".
DOCS_EN = ["they treat patients", "they cure patients", "she is smart", "she is intelligent"]
DOCS_LEX = {"treat": "soignent", "cure": "soignent", "patients": "patients", "she": "elle", "is": "est",
            "smart": "intelligente", "intelligent": "intelligente"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny database, its recipe and data, a tiny GENIA-pos data root, and its PPDB export."""
    from test_build_domain import EN, LEX, write_tiny
    from test_labels import SENTENCES, _conll

    from pivot.store import labels

    tmp = tmp_path_factory.mktemp("docs")
    args = write_tiny(tmp, en=EN + DOCS_EN, lex={**LEX, **DOCS_LEX})
    assert cli.main(["-q", "build", *args, "--out", str(tmp / "bio.db"), "--workers", "1"]) == 0
    genia = tmp / "genia-root"
    (genia / labels.GENIA_DIR).mkdir(parents=True)
    for name, sentences, repeat in (("train.tsv", SENTENCES, 20), ("devel.tsv", SENTENCES[:3], 2),
                                    ("test.tsv", SENTENCES[3:], 1)):
        (genia / labels.GENIA_DIR / name).write_text(_conll(sentences, repeat), encoding="utf-8")
    cache = tmp / "cache"  # the tagger the blocks train on the tiny GENIA-pos goes here
    assert cli.main(["-q", "export", str(tmp / "bio.db"), "-o", str(tmp / "bio.ppdb")]) == 0
    return {"db": tmp / "bio.db", "recipe": Path(args[1]), "data": Path(args[3]), "genia": genia,
            "ppdb": tmp / "bio.ppdb", "cache": cache}


def not_run_reason(block: Block) -> str | None:
    m = NOT_RUN.fullmatch(block.lines[0].strip()) if block.lines else None
    return m.group(1) if m else None


RUN = [b for b in PYTHON if not not_run_reason(b)]


@pytest.mark.parametrize("block", PYTHON, ids=[b.where for b in PYTHON])
def test_python_block_compiles_and_its_pivot_names_exist(block):
    compile(block.text, block.where, "exec")  # a SyntaxError names the block's line
    problems = name_problems(block)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("block", RUN, ids=[b.where for b in RUN])
def test_python_block_runs(block, tiny, tmp_path):
    s = stand_in(block)
    code = block.text
    for old, new in s.replace.items():
        code = code.replace(old, new.format(recipe=str(tiny["recipe"]), data=str(tiny["data"])))
    if DOC_DATA in code and s.data == "real" and not DATA.is_dir():
        pytest.skip(f"{block.where} reads the real data ({DOC_DATA}), not found at {DATA} (set PIVOT_DATA)")
    # tmp/run is the block's folder; tmp/shared/data is what it calls ../shared/data.
    run = tmp_path / "run"
    run.mkdir()
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "data").symlink_to(DATA if s.data == "real" else tiny["genia"])
    if s.bio_db:
        shutil.copy(tiny["db"], run / "bio.db")  # a copy: a block that writes must not touch the fixture
    if s.bio_ppdb:
        shutil.copy(tiny["ppdb"], run / "bio.ppdb")
    (run / "block.py").write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PIVOT_DATA"}  # the block names its data itself
    env.update(PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
               PIVOT_CACHE=str(tiny["cache"]))
    done = subprocess.run([sys.executable, "block.py", *s.argv], cwd=run, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, (f"{block.where} failed (exit {done.returncode}):\n"
                                  + "\n".join(done.stderr.splitlines()[-25:]))
    for name in s.creates:
        assert (run / name).is_file(), f"{block.where} did not write {name}"


def test_not_run_marker_is_on_the_first_line_with_a_reason():
    # Anywhere else it would be an ordinary comment, and the block would run (and fail) here.
    late = [f"{b.where}: '# not run:' must be the block's first line"
            for b in PYTHON if any(NOT_RUN.fullmatch(line.strip()) for line in b.lines[1:])]
    assert not late, "\n".join(late)
    vague = [b.where for b in PYTHON if (why := not_run_reason(b)) and len(why.split()) < 3]
    assert not vague, f"'# not run:' without a reason a reader can check: {vague}"


# ------------------------------------------------------------------------ shell commands


@functools.cache
def parser():
    return cli.build_parser()


def _subparsers(p):
    return next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))


def strip_comment(line: str) -> tuple[str, str]:
    """(command, comment): a `#` at the start of a word, outside quotes, starts the comment."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1:]
    return line, ""


def shell_commands(block: Block) -> list[tuple[int, str]]:
    """(doc line, command) for each command of a shell block, `\\`-continued lines joined."""
    out, pending = [], None
    for k, raw in enumerate(block.lines):
        n = block.line + 1 + k
        line = raw.strip()
        if pending is None:
            if block.lang == "console":
                if not line.startswith("$ "):
                    continue  # output
                line = line[2:]
            if not line or line.startswith("#"):
                continue
            start, text = n, line
        else:
            start, text = pending[0], pending[1] + " " + line
        command, _ = strip_comment(text)
        if command.endswith("\\"):
            pending = (start, command[:-1].rstrip())
            continue
        pending = None
        out.append((start, text))
    return out


# `[--flag value]` in a synopsis: the option written out, `a|b` alternatives as the first.
def _expand_optional(text: str) -> str:
    return re.sub(r"\[(-[^\]]*)\]", lambda m: re.sub(r"(\S+?)(?:\|\S+)+", r"\1", m.group(1)), text)


SEPARATORS = {"|", "||", "&&", ";", "&"}


def segments(command: str) -> list[list[str]]:
    """The simple commands of a shell line: split on | && ; &, redirections and VAR=value dropped."""
    lex = shlex.shlex(_expand_optional(command), posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = ""
    out, cur, skip = [], [], False
    for tok in lex:
        if skip:
            skip = False
        elif tok in SEPARATORS:
            out.append(cur)
            cur = []
        elif re.fullmatch(r"[<>]+&?", tok):  # a redirection: drop it, its target and a leading fd number
            if cur and cur[-1].isdigit():
                cur.pop()
            skip = True
        else:
            cur.append(tok)
    out.append(cur)
    result = []
    for seg in out:
        while seg and re.match(r"^[A-Za-z_]\w*=", seg[0]):
            seg = seg[1:]
        if seg:
            result.append(seg)
    return result


def _options(p) -> set[str]:
    return set(p._option_string_actions)


def check_pivot(args: list[str], comment: str = "") -> list[str]:
    """Problems with `pivot ARGS`: unknown subcommand or option, or argparse refusing the line."""
    top = parser()
    choices = _subparsers(top).choices
    command = next((a for a in args if not a.startswith("-")), None)
    problems = []
    if command is None:
        allowed = _options(top)
        sub = None
    elif command not in choices:
        return [f"pivot has no subcommand {command!r} (it has: {', '.join(choices)})"]
    else:
        sub = choices[command]
        allowed = _options(top) | _options(sub)
    for tok in args:
        flag = tok.split("=", 1)[0]
        if flag.startswith("-") and flag != "-" and not re.fullmatch(r"-\d+(\.\d+)?", flag) \
                and flag not in allowed:
            problems.append(f"`pivot {command or ''}` has no option {flag}")
    for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", comment):
        if sub is not None and flag not in allowed:
            problems.append(f"the comment names {flag}, which `pivot {command}` does not have")
    if problems:
        return problems
    # The whole line through argparse: choices, required arguments, numbers where numbers go.
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            cli.build_parser().parse_args(args)
        except SystemExit as exc:
            if exc.code:
                return [err.getvalue().strip().splitlines()[-1]]
    return []


@functools.cache
def script_options(script: str) -> frozenset[str] | None:
    """The option strings a script's `--help` shows (None: it has no working --help)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, script, "--help"], cwd=REPO, capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    if done.returncode != 0:
        return None
    return frozenset(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", done.stdout))


def scripts_a_doc_defines(path: Path) -> set[str]:
    """Script names a doc's own Python blocks announce in a leading comment (`# cluster.py: ...`)."""
    names = set()
    for b in PYTHON:
        if b.path == path:
            for line in b.lines:
                if not line.startswith("#"):
                    break
                names.update(re.findall(r"#\s*([\w./-]+\.py):", line))
    return names


def check_command(path: Path, command: str) -> list[str]:
    code, comment = strip_comment(command)
    problems = []
    for seg in segments(code):
        if seg[0] == "pivot":
            problems += check_pivot(seg[1:], comment)
        elif seg[0] in ("python", "python3") and len(seg) > 1:
            if seg[1:3] == ["-m", "pivot"]:
                problems += check_pivot(seg[3:], comment)
            elif seg[1].endswith(".py"):
                script = seg[1]
                if script in scripts_a_doc_defines(path):
                    continue
                if not (REPO / script).is_file():
                    problems.append(f"no script {script} in the repository")
                    continue
                known = script_options(script)
                if known is None:
                    problems.append(f"`python {script} --help` fails")
                    continue
                problems += [f"{script} has no option {tok.split('=', 1)[0]}" for tok in seg[2:]
                             if tok.startswith("-") and tok.split("=", 1)[0] not in known]
    return problems


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=[b.where for b in SHELL_BLOCKS])
def test_shell_block(block):
    problems = [f"{block.path.relative_to(REPO)}:{n}: {why}\n    {command}"
                for n, command in shell_commands(block) for why in check_command(block.path, command)]
    assert not problems, "\n".join(problems)


def test_quick_usage():
    # `pivot --help` shows these lines; a description follows each command after 3+ spaces.
    source = (REPO / "pivot" / "cli.py").read_text(encoding="utf-8").splitlines()
    commands = [re.split(r"\s{3,}", line.strip())[0] for line in cli.QUICK_USAGE.splitlines()[1:]]
    assert len(commands) > 5 and all(c.startswith("pivot ") for c in commands)
    problems = []
    for command in commands:
        n = next((i + 1 for i, line in enumerate(source) if line.strip().startswith(command)), "?")
        problems += [f"pivot/cli.py:{n} (QUICK_USAGE): {why}\n    {command}"
                     for why in check_command(REPO / "pivot/cli.py", command)]
    assert not problems, "\n".join(problems)


# ----------------------------------------------------------- the checks themselves can fail


def test_the_checks_catch_a_renamed_flag_module_or_script():
    assert check_command(REPO / "README.md", "pivot lookup bio.db treat -k 10") == []
    assert check_command(REPO / "README.md", "pivot lookup bio.db treat --top 10") == [
        "`pivot lookup` has no option --top"]
    assert check_command(REPO / "README.md", "pivot lookup bio.db treat  # --list-model lists them") == [
        "the comment names --list-model, which `pivot lookup` does not have"]
    assert check_command(REPO / "README.md", "pivot look bio.db treat")[0].startswith(
        "pivot has no subcommand 'look'")
    # argparse's own checks: a value outside the choices, a missing required argument.
    assert "invalid choice: 'yaml'" in check_command(REPO / "README.md", "pivot lookup bio.db x --format yaml")[0]
    assert "required" in check_command(REPO / "README.md", "pivot lookup")[0]
    assert check_command(REPO / "README.md", "python bench/no_such.py --db x") == [
        "no script bench/no_such.py in the repository"]
    assert check_command(REPO / "README.md", "python bench/bench_floor.py work --db x --nope") == [
        "bench/bench_floor.py has no option --nope"]
    assert check_command(REPO / "README.md", "python -m pivot lookup bio.db x --nope | head") == [
        "`pivot lookup` has no option --nope"]
    # Python: a module that moved, and a name a module lacks.
    block = Block(REPO / "README.md", 1, "python", ["from pivot.report import evaluate_gold_files",
                                                   "# see pivot.eval.report.evaluate_gold_file"])
    assert name_problems(block) == [
        "README.md:2: pivot.report.evaluate_gold_files: pivot has no module or name 'report'",
        ("README.md:3: pivot.eval.report.evaluate_gold_file: pivot.eval.report has no module or name "
         "'evaluate_gold_file'")]


def test_shell_lines_are_split_like_a_shell():
    b = Block(REPO / "x.md", 10, "console", ["$ pivot search bio.db 'tumo*r' \\", "    --whole", "phrase  count",
                                              "$ PIVOT_DATA=d pivot build  # note"])
    assert shell_commands(b) == [(11, "pivot search bio.db 'tumo*r' --whole"), (14, "PIVOT_DATA=d pivot build  # note")]
    assert segments("pivot export bio.db --format ppdb --model general | sha256sum") == [
        ["pivot", "export", "bio.db", "--format", "ppdb", "--model", "general"], ["sha256sum"]]
    assert segments("pivot paraphrase bio.db -i in.txt 2> err.txt > out.txt && X=1 python a.py &") == [
        ["pivot", "paraphrase", "bio.db", "-i", "in.txt"], ["python", "a.py"]]
    assert _expand_optional("pivot identify d [--classifier logreg|svm] [--format json]") == (
        "pivot identify d --classifier logreg --format json")
