"""Recipes: TOML files that say which data a build reads and with which parameters.

`pivot build --domain bio` reads `recipes/bio.toml` beside the package; `--recipe FILE`
reads any other. Paths inside a recipe are relative to the data root, which comes from
`--data DIR` or the PIVOT_DATA environment variable.
"""
from __future__ import annotations

import hashlib
import os
import tomllib
from pathlib import Path

from pivot.errors import InputError

RECIPES_DIR = Path(__file__).resolve().parent.parent / "recipes"
DATA_ENV = "PIVOT_DATA"

# Every parameter a recipe may omit, with its default. The build records the merged values.
DEFAULTS = {
    "preprocess": {"max_tokens": 80, "max_ratio": 9.0, "dedup": True},
    "align": {"method": "ibm2", "model": 3, "length": 1.0, "pharaoh": {}},
    "extract": {"max_phrase_len": 5, "shard_sentences": 50_000},
    "pivot": {"min_p_f_given_e": 0.001, "min_p_e_given_f": 0.001, "max_e_per_f": 100, "top_n": 20,
              "min_phrase_count": 2},
}


# Sections a recipe may leave out entirely; when present, missing keys get these defaults
# and keys marked None must be given. Without [domain] a build makes the General model only;
# without [combine] it makes no General+X combinations.
OPTIONAL = {
    "domain": {"in_domain": None, "general": {}, "order": 5, "estimator": "pivot", "seed": 0,
               "taus": [], "report_in_domain_sources": []},
    "combine": {"gold": None, "format": "simlex", "threshold": 6.0, "n_tune": 1000, "seed": 0},
    "eval": {"sets": []},
}


def available_domains() -> list[str]:
    return sorted(p.stem for p in RECIPES_DIR.glob("*.toml"))


def recipe_path(domain: str | None = None, recipe: str | os.PathLike | None = None) -> Path:
    if recipe is not None:
        path = Path(recipe)
        if not path.is_file():
            raise InputError("recipe file not found", path)
        return path
    path = RECIPES_DIR / f"{domain}.toml"
    if not path.is_file():
        raise InputError(
            f"no recipe for domain {domain!r} (known: {', '.join(available_domains()) or 'none'}); "
            "pass --recipe FILE for your own", path
        )
    return path


def load_recipe(path: Path) -> dict:
    """Parse and validate a recipe; fill in defaults; keep the file's hash for the signature."""
    raw = path.read_bytes()
    try:
        recipe = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"not a valid TOML recipe: {exc}", path) from exc
    for section, defaults in DEFAULTS.items():
        given = recipe.get(section, {})
        unknown = set(given) - set(defaults)
        if unknown:
            raise InputError(
                f"[{section}] has unknown keys {sorted(unknown)}; known: {sorted(defaults)}", path
            )
        recipe[section] = {**defaults, **given}
    for section, defaults in OPTIONAL.items():
        if section not in recipe:
            continue
        given = recipe[section]
        unknown = set(given) - set(defaults)
        if unknown:
            raise InputError(
                f"[{section}] has unknown keys {sorted(unknown)}; known: {sorted(defaults)}", path
            )
        missing = [k for k, v in defaults.items() if v is None and k not in given]
        if missing:
            raise InputError(f"[{section}] needs {missing}", path)
        recipe[section] = {**defaults, **given}
    if recipe.get("domain", {}).get("estimator", "pivot") not in ("pivot", "lmplz"):
        raise InputError("[domain] estimator must be 'pivot' (the built-in modified Kneser-Ney) or 'lmplz'", path)
    bitexts = recipe.get("bitext")
    if not bitexts:
        raise InputError("a recipe needs at least one [[bitext]] with a lang and sources", path)
    seen = set()
    for i, bitext in enumerate(bitexts):
        lang = bitext.get("lang")
        if not lang or not bitext.get("sources"):
            raise InputError(f"[[bitext]] number {i + 1} needs `lang` and `sources`", path)
        if lang in seen or lang == "en":
            raise InputError(f"[[bitext]] language {lang!r} is repeated or English", path)
        seen.add(lang)
    recipe.setdefault("name", path.stem)
    recipe["_path"] = str(path)
    recipe["_sha256"] = hashlib.sha256(raw).hexdigest()
    return recipe


def resolve_data_root(data: str | os.PathLike | None) -> Path:
    """The data root from --data, else PIVOT_DATA; a clear error if neither points to a folder."""
    value = data if data is not None else os.environ.get(DATA_ENV)
    if not value:
        raise InputError(
            f"no data root: pass --data DIR or set {DATA_ENV}=DIR (for the shipped recipes, "
            "the folder that holds bitext/, mono/ and gold/, e.g. ../shared/data)"
        )
    root = Path(value).expanduser()
    if not root.is_dir():
        origin = "--data" if data is not None else DATA_ENV
        raise InputError(f"data root does not exist (set by {origin}); point it at the folder holding bitext/ and mono/", root)
    return root.resolve()


def source_files(source: dict, data_root: Path, lang: str) -> list[Path]:
    """The files one recipe source reads, in a fixed order (for fingerprints and readers)."""
    fmt = source.get("format")
    if fmt == "parallel":
        files = [data_root / source["en"], data_root / source["f"]]
    elif fmt == "parallel-glob":
        ens = sorted(data_root.glob(source["en"]))
        if not ens:
            raise InputError(
                f"source {source.get('name')!r}: no file matches {source['en']!r} under the data root "
                f"(set by --data or {DATA_ENV})", data_root
            )
        files = [p for en in ens for p in (en, en.with_suffix("." + lang))]
    elif fmt == "tsv-zip":
        files = [data_root / source["path"]]
    elif fmt == "tsv-gz":
        # `path` may be a glob (*, ?, [...]): its matches, sorted, as the reader takes them.
        if any(c in source["path"] for c in "*?["):
            files = sorted(data_root.glob(source["path"]))
            if not files:
                raise InputError(
                    f"source {source.get('name')!r}: no file matches {source['path']!r} under the "
                    f"data root (set by --data or {DATA_ENV})", data_root
                )
        else:
            files = [data_root / source["path"]]
    else:
        raise InputError(f"source {source.get('name')!r}: unknown format {fmt!r} "
                         "(parallel, parallel-glob, tsv-zip, tsv-gz)")
    for f in files:
        if not f.is_file():
            raise InputError(
                f"source {source.get('name')!r}: file missing; the data root is set by --data DIR "
                f"or {DATA_ENV}", f
            )
    return files


def fingerprint_files(paths: list[Path]) -> dict[str, str]:
    """sha256 of each file's bytes, so a changed corpus invalidates the stages built on it."""
    out = {}
    for p in paths:
        h = hashlib.sha256()
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        out[str(p)] = h.hexdigest()
    return out
