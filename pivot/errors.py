"""Errors that reach the user: each one names the file, the line and the problem."""


def _one_line(text):
    """The message on one line: line breaks escaped (a path or a quoted line may hold them),
    lone surrogates (undecodable file names) shown as escapes, so it always prints."""
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class InputError(ValueError):
    """Bad input data or configuration; the message says where and what to do.

    ``str(error)`` is ``"<path>:<line>: <message>"`` (or ``"<path>: <message>"``, or the
    message alone), always one line. ``path`` and ``line`` stay available as attributes.
    """

    def __init__(self, message, path=None, line=None):
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(_one_line(where + str(message)))
        self.path = path
        self.line = line
        self.message = str(message)

    def __reduce__(self):
        # pickled as made (a forked preflight helper, a Dask worker send it back), so that
        # path and line survive and the text is not prefixed with them twice
        return type(self), (self.message, self.path, self.line)
