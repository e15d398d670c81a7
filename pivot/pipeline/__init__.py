"""The build, one module per stage in data-flow order:

    corpus -> align -> lm -> score -> weights -> extract -> pivoting -> combine -> (pivot.store)

`run` wires the stages; each stage module is usable on its own.
"""
