"""The failures a console page shows: each an HTTP status and one sentence naming the problem and what to do.

Must never: carry a stack trace or a token into the sentence; app.py renders these and nothing else as errors.
"""
from __future__ import annotations


class ConsoleError(Exception):
    """A page that cannot be shown; `str(e)` is the sentence the user reads."""

    status = 500
    title = "Error"


class BadInput(ConsoleError):
    status, title = 400, "Bad request"


class Unauthorized(ConsoleError):
    status, title = 401, "Token needed"


class Forbidden(ConsoleError):
    status, title = 403, "Not allowed"


class NotFound(ConsoleError):
    status, title = 404, "Not found"


class Conflict(ConsoleError):
    status, title = 409, "Refused"


class BrokerError(ConsoleError):
    status, title = 502, "Broker error"


class BrokerUnavailable(ConsoleError):
    status, title = 503, "Broker unavailable"
