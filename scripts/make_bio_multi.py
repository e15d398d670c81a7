#!/usr/bin/env python3
"""Write recipes/bio-multi.toml: the bio recipe with every bitext of the data (DATA.md).

    python scripts/make_bio_multi.py --data ../shared/data [--out recipes/bio-multi.toml]

The generator lists the data folder (so a file added to the data appears in the recipe when
this is run again) and reads the `lang` column of the TICO-19 terminologies to map every
provider tag; the recipe it writes is plain TOML, reviewed and committed as it is. The
sections after the bitext ([preprocess] .. [eval]) are copied verbatim from recipes/bio.toml.

Grouping rules (one [[bitext]] block per pivot language):

* French and German keep the bio recipe's codes `fr` and `de` (the first-batch sources, the
  `parallel-glob` partner suffix `.fr`, the work-folder names `corpus.fr`); every other block
  is the ISO 639-3 code of the files (`eng-XXX.tsv.gz`).
* Tatoeba macro-language files contain their members (DATA.md): a group is read once,
  through the macro-language file (fas ⊇ pes, nor ⊇ nob + nno, hbs ⊇ hrv, msa ⊇ ind,
  ara ⊇ arq, pmn ⊇ pam), and the other sets' files of those members join the macro block
  (wmt-news hrv -> hbs, tico19 prs (Dari) -> fas, tico19 ind -> msa). dtp and kzj share 693
  pairs but each has its own: both are read in the dtp block (kzj was merged into dtp by ISO
  639-3 in 2016) and exact dedup drops the shared pairs.
* Tatoeba `kur` holds 94 Sorani rows (label `ckb`): the kur block drops them with a row
  filter and the ckb block (TICO-19's Sorani) takes them.
* Variants join their language: TICO-19 tir, tir_ER, tir_ET (three Tigrinya translations,
  one glob source) -> tir; GNU Health por_BR -> por.
* TICO-19 terminology provider tags are mapped to ISO 639-3 (fr_XX, fr-FR, fr -> fra -> fr;
  es-419, es-ES, es_XX -> spa; zh-CN, zh-TW, zh-Hans ... -> zho; iw -> heb; fil, tl_XX -> tgl;
  cx_PH -> ceb; ns_ZA -> nso; nb, no -> nor; hr, sr, bs -> hbs; id, ms -> msa) and then
  grouped as above. Facebook's `cb_IQ` (nominally Central Kurdish) is Kurmanji in Latin
  script ("nexweşiya giran a nefesê"), so it goes to kur, not ckb. A tag whose language has
  no other bitext gets a terms-only block of its own.
"""
from __future__ import annotations

import argparse
import gzip
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Block codes that differ from the ISO 639-3 code of the files.
ALIAS = {"fra": "fr", "deu": "de"}
# Members and variants read in another block (see the module docstring).
GROUP = {"pes": "fas", "prs": "fas", "nob": "nor", "nno": "nor", "hrv": "hbs", "srp": "hbs",
         "bos": "hbs", "ind": "msa", "zsm": "msa", "arq": "ara", "pam": "pmn", "kzj": "dtp",
         "por_BR": "por", "tir_ER": "tir", "tir_ET": "tir", "fil": "tgl"}
# Tatoeba member files that the macro-language file contains entirely: not read.
TATOEBA_SKIP = {"pes", "nob", "nno", "hrv", "ind", "arq", "pam"}

# ISO 639-1 (the providers' tags) -> ISO 639-3, from Debian iso-codes' iso_639-3.json.
ISO1 = dict(x.split(":") for x in """
af:afr am:amh ar:ara as:asm az:aze be:bel bg:bul bn:ben bs:bos ca:cat co:cos cs:ces cy:cym
da:dan de:deu el:ell eo:epo es:spa et:est eu:eus fa:fas fi:fin fr:fra fy:fry ga:gle gd:gla
gl:glg gu:guj ha:hau he:heb hi:hin hr:hrv ht:hat hu:hun hy:hye id:ind ig:ibo is:isl it:ita
ja:jpn jv:jav ka:kat kk:kaz km:khm kn:kan ko:kor ku:kur ky:kir la:lat lb:ltz lg:lug ln:lin
lo:lao lt:lit lv:lav mg:mlg mk:mkd ml:mal mn:mon mr:mar ms:msa my:mya nb:nob ne:nep nl:nld
no:nor ny:nya om:orm pa:pan pl:pol ps:pus pt:por ro:ron ru:rus sd:snd si:sin sk:slk sl:slv
sm:smo sn:sna so:som sq:sqi sr:srp ss:ssw st:sot su:sun sv:swe sw:swa ta:tam te:tel tg:tgk
th:tha tl:tgl tn:tsn tr:tur uk:ukr ur:urd uz:uzb vi:vie wo:wol xh:xho yi:yid yo:yor zh:zho
zu:zul""".split())
# Provider tags that are not ISO 639-1 (or whose ISO code is wrong for the text).
TAG_SPECIAL = {"iw": "heb", "fil": "fil", "ceb": "ceb", "hmn": "hmn", "cx": "ceb", "ns": "nso",
               "cb": "kur"}

# ICD-10 W00-Y34 place-of-occurrence subcodes (W00.0 ...): GNU Health's English names are the
# bare place ("Home", 16,540 rows over the 16 files) while translations paste the parent
# category before it ("chute de plain-pied due à la glace et la neige | domicile", "Sturz ...:
# zu Hause", "Caída ..., vivienda") or not: no usable term pair either way.
ICD10_PLACES = ["Home", "Residential institution",
                "School, other institution and public administrative area",
                "Sports and athletics area", "Street and highway", "Trade and service area",
                "Industrial and construction area", "Farm", "Other specified place",
                "Unspecified place"]

TSV = "bitext/opus-mt-testsets/tatoeba", "bitext/opus-mt-testsets/wmt-news", "bitext/tico19"
CODE = re.compile(r"eng-(.+)\.tsv\.gz$")


def block_of(code: str) -> str:
    code = GROUP.get(code, code)
    return ALIAS.get(code, code)


def tag_code(tag: str) -> str:
    base = re.split(r"[-_]", tag)[0]
    code = TAG_SPECIAL.get(base) or ISO1.get(base)
    if code is None:
        raise SystemExit(f"unmapped TICO-19 terminology tag {tag!r}: add it to ISO1 or TAG_SPECIAL")
    return code


def codes(data: Path, folder: str) -> list[str]:
    return sorted(CODE.search(p.name).group(1) for p in (data / folder).glob("eng-*.tsv.gz"))


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(v)


def source(name, fmt, **keys) -> dict:
    return {"name": name, "format": fmt, **keys}


def build_blocks(data: Path) -> dict[str, list[dict]]:
    blocks: dict[str, list[dict]] = defaultdict(list)
    # First batch, as in recipes/bio.toml.
    blocks["fr"] += [
        source("wmt-medline", "parallel", en="bitext/wmt-biomed-fr-en/train/medline_d1.en",
               f="bitext/wmt-biomed-fr-en/train/medline_d1.fr"),
        source("wmt-scielo", "parallel", en="bitext/wmt-biomed-fr-en/train/scielo_d1.en",
               f="bitext/wmt-biomed-fr-en/train/scielo_d1.fr"),
        source("wmt-edp", "parallel", en="bitext/wmt-biomed-fr-en/train/edp_d1.en",
               f="bitext/wmt-biomed-fr-en/train/edp_d1.fr"),
        source("wmt-test", "parallel-glob", en="bitext/wmt-biomed-fr-en/test/*.en"),
        source("tatoeba-fr", "tsv-zip", path="bitext/tatoeba-fr-en/fra-eng.zip",
               member="fra-eng/fra.txt"),
    ]
    blocks["de"] += [source("tatoeba-de", "tsv-zip", path="bitext/tatoeba-de-en/deu-eng.zip",
                            member="deu.txt")]
    # Tatoeba Challenge test sets.
    for code in codes(data, TSV[0]):
        if code in TATOEBA_SKIP:
            continue
        path = f"{TSV[0]}/eng-{code}.tsv.gz"
        if code == "kur":        # 94 Sorani rows: to the ckb block
            blocks["kur"].append(source("tatoeba", "tsv-gz", path=path, exclude={"3": "ckb"}))
            blocks["ckb"].append(source("tatoeba", "tsv-gz", path=path, where={"3": "ckb"}))
            continue
        name = "tatoeba-kzj" if code == "kzj" else "tatoeba"
        blocks[block_of(code)].append(source(name, "tsv-gz", path=path))
    # Multi30k captions (no section headers in captions).
    for code, lang in (("fr", "fr"), ("de", "de")):
        blocks[lang].append(source("multi30k", "parallel", en="bitext/multi30k/train.en.gz",
                                   f=f"bitext/multi30k/train.{code}.gz", drop_headers=False))
    # WMT news test sets.
    for code in codes(data, TSV[1]):
        blocks[block_of(code)].append(source("wmt-news", "tsv-gz", path=f"{TSV[1]}/eng-{code}.tsv.gz"))
    # TICO-19.
    for code in codes(data, TSV[2]):
        if code in ("tir_ER", "tir_ET"):
            continue
        if code == "tir":
            blocks["tir"].append(source("tico19", "tsv-gz", path=f"{TSV[2]}/eng-tir*.tsv.gz"))
            continue
        name = f"tico19-{code}" if code in GROUP else "tico19"           # prs in fas, ind in msa
        blocks[block_of(code)].append(source(name, "tsv-gz", path=f"{TSV[2]}/eng-{code}.tsv.gz"))
    # WMT biomedical Medline test sets: named like the French training Medline so that
    # [domain] report_in_domain_sources counts them as in-domain by origin.
    for code, lang in (("pt", "por"), ("de", "de"), ("zh", "zho")):
        blocks[lang].append(source("wmt-medline", "tsv-gz", path=f"bitext/wmt-biomed-{code}-en/medline.tsv.gz",
                                   drop_headers=True))
    # Term lists.
    for code in codes(data, "bitext/terms/gnuhealth"):
        name = "gnuhealth" if "_" not in code else f"gnuhealth-{code}"     # por_BR beside por
        blocks[block_of(code)].append(source(
            name, "tsv-gz", path=f"bitext/terms/gnuhealth/eng-{code}.tsv.gz", kind="terms",
            where={"4": "model:gnuhealth.*"}, exclude={"1": ICD10_PLACES, "2": "nan"}))
    for code in codes(data, "bitext/terms/hpo"):
        blocks[block_of(code)].append(source(
            "hpo", "tsv-gz", path=f"bitext/terms/hpo/eng-{code}.tsv.gz", kind="terms",
            where={"4": "rdfs:label"}, exclude={"6": "machine"}))
    tags = defaultdict(set)
    with gzip.open(data / "bitext/terms/tico19-terminologies.tsv.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            tags[block_of(tag_code(line.split("\t")[2]))].add(line.split("\t")[2])
    for lang, lang_tags in tags.items():
        blocks[lang].append(source("tico19-terms", "tsv-gz", path="bitext/terms/tico19-terminologies.tsv.gz",
                                   kind="terms", where={"3": sorted(lang_tags)}))
    return blocks


HEADER = '''\
# The biology recipe with EVERY bitext of the data (both batches of ../shared/data/DATA.md):
# the first batch's French and German and every language of the second batch, one
# [[bitext]] block per pivot language. Written by scripts/make_bio_multi.py (its docstring
# gives the grouping rules); the sections after the bitext are recipes/bio.toml's, verbatim.
#
# Paths are relative to the data root, set by `pivot build --data DIR` or PIVOT_DATA.
# Source formats: see pivot/pipeline/corpus.py. `tsv-gz` reads English from column 1 and the
# foreign side from column 2; `where = { N = value(s) }` keeps a row only when column N
# (1-based) matches, `exclude = { N = value(s) }` drops it when column N matches; a `*` in a
# value matches any run of characters. `kind = "terms"` marks a term list (recorded per
# source in the corpus folder's meta.json["source_kinds"]).
#
# Choices (DATA.md gotchas):
#   * Tatoeba macro-language files hold their members: each group is read once, through the
#     macro-language file (fas, nor, hbs, msa, ara, pmn); the member files pes, nob, nno,
#     hrv, ind, arq, pam are not read, and other sets' files of members join the macro block
#     (wmt-news hrv -> hbs, tico19 prs -> fas, tico19 ind -> msa). dtp and kzj share 693
#     pairs: both are read in the dtp block and exact dedup keeps one copy.
#   * Tatoeba eng-fra / eng-deu repeat 6,077 / 5,727 pairs of the first-batch Tatoeba zips:
#     dedup across the sources of a language drops the exact repeats (credited to the zip).
#   * TICO-19 has ONE English side for all 36 languages (3,089 sentences), and WMT news
#     2008-2013 is multi-parallel: the same English sentence recurs in many blocks. Counts
#     over the English side of all blocks together (the general LM sample, phrase counts)
#     see those sentences once per language.
#   * Term lists (kind = "terms"): GNU Health keeps msgctxt `model:gnuhealth.*` (ICD-10, ICD-9-CM
#     and ICPM names, occupations, specialties, drug forms, routes, dose units) and drops the
#     user-interface strings (field:, help:, view:, selection:, report:, wizard_button:, and
#     the menus, actions and messages of model:ir.*); it also drops the ICD-10 place-of-
#     occurrence subcodes (English "Home", "Farm", ...: 16,540 rows whose translations paste
#     the parent category before the place, "chute de plain-pied ... | domicile") and the 228
#     Spanish ICD-10 rows translated "nan" (a spreadsheet NaN upstream). HPO keeps labels
#     (predicate rdfs:label, not the French IAO:0000115 definitions) and drops the DeepL rows
#     (translator_kind machine: 2,899 German, 2,899 Italian). TICO-19 terminologies are
#     split by their `lang` provider tag into the language blocks (tags -> ISO 639-3; a
#     language with no other bitext gets a terms-only block). Facebook's cb_IQ is Kurmanji
#     in Latin script: -> kur.
#   * Section headings of the WMT biomedical Medline TSVs are dropped (drop_headers), as in
#     the French training files; their sources are named "wmt-medline" in every language so
#     [domain] report_in_domain_sources counts them as in-domain by origin.
#   * Tokenisation: the Moses rules of the block's language when Moses has them (fr, de,
#     por -> pt, zho -> zh, ...), English rules otherwise (the Moses fallback). Moses does not
#     segment Chinese, Japanese, Thai, Khmer, Burmese or Lao: a sentence there is a few long
#     "tokens", and pairs exceeding [preprocess] max_ratio are dropped (zho 3%, tha 6%).
#
# Measured with write_bitext ([preprocess] as below; about 70 s for all blocks on one core):
#   {n_kept} pairs kept in {n_langs} pivot languages ({n_sent} sentence pairs, {n_terms}
#   term pairs); fr {fr_kept}, de {de_kept}, then rus, ces, zho, spa ({n10k} languages with
#   >= 10k sentence pairs, {n1k} with >= 1k); {n_termonly} languages have term pairs only.
#
# Attribution (keep when redistributing results):
#   WMT biomedical fr-en (Medline, Scielo, EDP): research use; cite as the data's CITATION.cff says.
#   WMT biomedical pt-en (rsn86/wmt-biomedical-test_set-pt_en), de-en and zh-en
#     (hsing-wang/WMT2020_BioMedical) Medline test sets: WMT biomedical task data, research use.
#   Tatoeba fr-en, de-en: CC-BY 2.0, tatoeba.org via manythings.org.
#   Tatoeba Challenge test sets (Helsinki-NLP/OPUS-MT-testsets): CC-BY 2.0 FR, tatoeba.org.
#   WMT news test sets 2008-2022 (via Helsinki-NLP/OPUS-MT-testsets): research use.
#   Multi30k: research use.
#   TICO-19 and the TICO-19 terminologies (Facebook, Google): CC0.
#   GNU Health catalogues: GPL-3.0-or-later (ICD content: WHO).
#   Human Phenotype Ontology translations (obophenotype/hpo-translations): HPO licence, free use
#     with attribution.
#   GENIA and the bio-ner corpora: CC BY 4.0 (GENIA project licence for GENIA).
#   OpenStax Biology, Concepts of Biology, Microbiology: CC BY 4.0.
name = "bio-multi"
description = "Biology paraphrases from every bitext of the data ({n_langs} pivot languages: WMT biomedical fr/pt/de/zh, Tatoeba, WMT news, Multi30k, TICO-19, GNU Health, HPO and TICO-19 term lists), Moore-Lewis toward GENIA, bio-ner and OpenStax biology text"

# ---------------------------------------------------------------- bitext
'''


MEASURED = HEADER[HEADER.index("#\n# Measured with write_bitext"):HEADER.index("#\n# Attribution")]


def measure(blocks: dict[str, list[dict]], data: Path, preprocess: dict) -> dict:
    """Run write_bitext on every block (into a temporary folder); the header's figures."""
    import tempfile
    import time

    from pivot.pipeline.corpus import write_bitext

    kept, kinds_kept, sent = {}, {"sentences": 0, "terms": 0}, {}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for lang, sources in blocks.items():
            meta = write_bitext(sources, lang, data, Path(tmp) / lang, quiet=True, **preprocess)
            src = meta["stats"]["sources"]
            kept[lang] = meta["n_pairs"]
            for name, kind in zip(meta["source_names"], meta["source_kinds"]):
                kinds_kept[kind] += src[name]["kept"]
            sent[lang] = sum(src[n]["kept"] for n, k in zip(meta["source_names"], meta["source_kinds"])
                             if k == "sentences")
            print(f"  {lang}: {meta['n_pairs']} pairs", flush=True)
    print(f"measured in {time.perf_counter() - t0:.0f} s")
    return {"n_kept": f"{sum(kept.values()):,}", "n_sent": f"{kinds_kept['sentences']:,}",
            "n_terms": f"{kinds_kept['terms']:,}", "fr_kept": f"{kept['fr']:,}",
            "de_kept": f"{kept['de']:,}", "n10k": str(sum(v >= 10_000 for v in sent.values())),
            "n1k": str(sum(v >= 1_000 for v in sent.values())),
            "n_termonly": str(sum(v == 0 for v in sent.values()))}


def render(blocks: dict[str, list[dict]], bio_text: str, figures: dict | None) -> str:
    order = ["fr", "de"] + sorted(k for k in blocks if k not in ("fr", "de"))
    header = HEADER if figures else HEADER.replace(MEASURED, "")
    for key, value in {**(figures or {}), "n_langs": str(len(order))}.items():
        header = header.replace("{" + key + "}", value)
    out = [header]
    for lang in order:
        kinds = {s.get("kind", "sentences") for s in blocks[lang]}
        note = "  # term lists only" if kinds == {"terms"} else ""
        out.append(f"[[bitext]]\nlang = \"{lang}\"{note}\nsources = [\n")
        for s in blocks[lang]:
            out.append(f"  {toml_value(s)},\n")
        out.append("]\n\n")
    rest = bio_text[bio_text.index("# ---------------------------------------------------------------- preprocessing"):]
    out.append(rest)
    return "".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, type=Path, help="the data root (../shared/data)")
    ap.add_argument("--out", type=Path, default=ROOT / "recipes" / "bio-multi.toml")
    ap.add_argument("--measure", action="store_true",
                    help="run write_bitext on every block (about 2 minutes) and write the "
                         "measured pair counts into the recipe's header")
    args = ap.parse_args()
    blocks = build_blocks(args.data)
    bio_text = (ROOT / "recipes" / "bio.toml").read_text(encoding="utf-8")
    figures = None
    if args.measure:
        import tomllib
        preprocess = {"max_tokens": 80, "max_ratio": 9.0, **tomllib.loads(bio_text).get("preprocess", {})}
        figures = measure(blocks, args.data, preprocess)
    text = render(blocks, bio_text, figures)
    args.out.write_text(text, encoding="utf-8")
    n_src = sum(len(v) for v in blocks.values())
    print(f"{args.out}: {len(blocks)} pivot languages, {n_src} sources")


if __name__ == "__main__":
    main()
