"""The one exception type the CLI turns into a one-line message."""


class CompressError(Exception):
    """Bad input or an unmet precondition, described in one sentence for the user.

    The message says what was wrong and what to do. The CLI prints it on one line and
    exits with ``exit_code`` (2 for bad input by default).
    """

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code
