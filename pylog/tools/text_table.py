"""Tables as the operator tools print them: columns padded to their widest cell, in Kafka's tools' layouts."""
from __future__ import annotations


def print_table(header: list[str], rows: list[list[str]], gap: str = " ") -> None:
    """`header` and `rows` with each column as wide as its widest cell, `gap` between columns."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    for line in [header, *rows]:
        print(gap.join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())
