"""User-facing errors.

Bad input must reach the user as one paragraph that names where the problem is and what was
expected, never as a traceback. Every layer raises :class:`InputError` (or a subclass) for bad
input; the CLI catches it, prints ``str(err)`` and exits with code 2. Bugs stay ordinary
exceptions.
"""

from __future__ import annotations


class KubeberthError(Exception):
    """Base class for errors that are the user's to fix, not ours."""


class InputError(KubeberthError):
    """Bad input: a file, a line or field in it, what is wrong and what was expected."""

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        field: str | None = None,
        expected: str | None = None,
    ) -> None:
        self.message = message
        self.source = source
        self.line = line
        self.field = field
        self.expected = expected
        super().__init__(self.render())

    def render(self) -> str:
        where = ""
        if self.source:
            where = self.source
            if self.line is not None:
                where += f":{self.line}"
        parts = []
        if where:
            parts.append(f"{where}:")
        if self.field:
            parts.append(f"field {self.field}:")
        parts.append(self.message.rstrip("."))
        text = " ".join(parts) + "."
        if self.expected:
            text += f" Expected {self.expected.rstrip('.')}."
        return text

    def at(self, *, source: str | None = None, line: int | None = None,
           field: str | None = None) -> InputError:
        """Return a copy located more precisely; inner layers know the field, outer the file."""
        joined = field
        if field and self.field:
            sep = "" if self.field.startswith("[") else "."
            joined = f"{field}{sep}{self.field}"
        elif self.field:
            joined = self.field
        return type(self)(
            self.message,
            source=source or self.source,
            line=line if line is not None else self.line,
            field=joined,
            expected=self.expected,
        )
