"""pivot: domain-specific paraphrase databases by weighted bilingual pivoting.

The pipeline, one module per stage (see README "Design"):

    corpus -> align -> lm -> score -> weights -> extract -> pivoting -> combine -> db

>>> from pivot import ParaphraseDB            # doctest: +SKIP
>>> ParaphraseDB("bio.db").lookup("treat", k=3)  # doctest: +SKIP
"""
__version__ = "0.1.0"

from pivot.db import ParaphraseDB  # noqa: E402


def build(*args, **kwargs):
    """Run the whole pipeline for a recipe; see :func:`pivot.build.run_build`."""
    from pivot.build import run_build

    return run_build(*args, **kwargs)


__all__ = ["ParaphraseDB", "build", "__version__"]
