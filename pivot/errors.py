"""Errors that reach the user: each one names the file, the line and the problem."""


class InputError(ValueError):
    """Bad input data or configuration; the message says where and what to do."""

    def __init__(self, message, path=None, line=None):
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + message)
        self.path = path
        self.line = line
