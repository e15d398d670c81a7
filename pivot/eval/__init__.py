"""Consumers of a finished database: gold readers, average precision and bootstrap, report, plots.

Nothing here imports `pivot.pipeline`: evaluation reads a database, never a build.
"""
