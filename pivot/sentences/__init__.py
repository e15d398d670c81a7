"""Sentence-level uses of a paraphrase database.

* :mod:`pivot.sentences.paraphrase` -- a monotone phrase-based paraphrase decoder (in the style of the
  2004 monolingual MT paper): a lattice of every span's paraphrases from the database, scored by the model's
  log p(e2|e1), a kenlm language model and an identity bias, searched with a beam.
* :mod:`pivot.sentences.identify` -- paraphrase identification on MSRP (the 2005 identification paper's
  features, DB-backed lexical alignment features, logistic regression).
* :mod:`pivot.sentences.align_eval` -- AER of the project's aligner on the Hansards gold.
* :mod:`pivot.sentences.generation_eval` -- BLEU / iBLEU of generated paraphrases.
* :mod:`pivot.sentences.msrp` -- the MSRP corpus reader.

See docs/sentences.md.
"""
