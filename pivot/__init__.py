"""pivot: domain-specific paraphrase databases by weighted bilingual pivoting.

The pipeline, one module per stage in `pivot/pipeline/` (see README "Design"):

    corpus -> align -> lm -> score -> weights -> extract -> pivoting -> combine -> store

`pivot/store/` is the SQLite database, `pivot/eval/` evaluates a finished database.
This module only re-exports; nothing inside the package imports it.

>>> from pivot import ParaphraseDB            # doctest: +SKIP
>>> ParaphraseDB("bio.db").lookup("treat", k=3)  # doctest: +SKIP
"""
from pivot._version import __version__
from pivot.store.db import ParaphraseDB


def build(*args, **kwargs):
    """Run the whole pipeline for a recipe; see :func:`pivot.pipeline.run.run_build`."""
    from pivot.pipeline.run import run_build

    return run_build(*args, **kwargs)


__all__ = ["ParaphraseDB", "build", "__version__"]
