"""The one import site of the compiled kernels.

A source checkout without the built extension fails here with an instruction,
instead of an opaque ImportError deep inside a stage.
"""
try:
    from pivot import _counts  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only on broken installs
    raise ImportError(
        "pivot's compiled kernel (pivot/_counts.pyx) is not built. "
        "From the project root run: pip install -e ."
    ) from exc

__all__ = ["_counts"]
