"""Consumers of a finished database: gold readers, average precision and bootstrap, report, plots.

Evaluation reads a database, never runs a build. The one exception is the coverage ceiling
(`ceiling.py`), which reads a build's work directory: its bundles (pivot.pipeline.bundle) under
the build's own pruning rules (pivot.pipeline.pruning).
"""
