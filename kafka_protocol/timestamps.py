"""The one rule for times users type: epoch milliseconds, or ISO-8601 in UTC unless it names a zone.

Used by every command and job setting that takes a point in time (`pylog groups --to-datetime`,
`reprocess.from=timestamp:...`), so the same text means the same instant everywhere, whatever the
machine's local time zone. Raises ValueError with the accepted forms.
"""
from __future__ import annotations

import datetime as dt

FORMS = "epoch milliseconds or ISO-8601 such as 2024-01-31T10:00:00.000 (UTC unless a zone such as +02:00 is given)"


def parse_instant_ms(text: str) -> int:
    """Epoch milliseconds of `text`."""
    s = text.strip()
    if s.isdigit():
        return int(s)
    try:
        when = dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is not a time: expected {FORMS}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp() * 1000)
