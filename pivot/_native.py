"""The one import site of the compiled kernels (``_align``, ``_counts``, ``_lm``, ``_export``).

Every module imports them from here (``from pivot._native import _counts``), so a source
checkout without the built extensions fails at the first import with an instruction,
instead of an opaque ImportError deep inside a stage.
"""
try:
    from pivot import _align, _counts, _export, _lm
except ImportError as exc:  # pragma: no cover - exercised only on broken installs
    raise ImportError(
        f"pivot's compiled kernels (pivot/_align.pyx, _counts.pyx, _lm.pyx, _export.pyx) are not built ({exc}). "
        "From the project root run: pip install -e ."
    ) from exc

__all__ = ["_align", "_counts", "_export", "_lm"]
