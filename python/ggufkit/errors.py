"""The exception every ggufkit failure about a file raises."""


class GGUFError(ValueError):
    """A file or argument the library refused.

    A ValueError, as gguf-py raises for a bad file, carrying the library's error: ``code`` (a stable
    name such as ``"truncated"`` or ``"duplicate_key"``), ``offset`` (the byte offset in the file, or
    None), ``record`` (the key or tensor concerned, or ``""``) and ``file``.
    """

    def __init__(self, message: str, code: str = "invalid_argument", offset: int | None = None,
                 record: str = "", file: str = ""):
        super().__init__(message)
        self.code = code
        self.offset = offset
        self.record = record
        self.file = file
