"""The console's one write: resetting a consumer group's committed offsets, guarded three times.

Owns: the rules around it: the console must have been started with --allow-offset-reset; the plan is shown
before anything changes and applies only when the group's name is typed again (with the form key of this
console's own page); a group with members is refused, as `pylog groups reset-offsets` refuses it. The plan itself
is pylog.tools.groups' (the same targets, the same clamping to [log start, high watermark], the same commit), fed
the namespace its --to-earliest/--to-latest/--to-offset flags would make.
Must never: commit without the typed confirmation, or while the group has members.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

from pylog.console.access import same_secret
from pylog.console.cluster_view import ClusterView, translated
from pylog.console.errors import BadInput, Conflict, Forbidden
from pylog.tools.errors import CliError
from pylog.tools.groups import (
    EARLIEST,
    LATEST,
    check_inactive,
    commit_offsets,
    committed_offsets,
    group_description,
    list_offsets,
    plan_offsets,
    reset_targets,
)

TARGETS = ("earliest", "latest", "offset")


@dataclass(frozen=True)
class ResetRequest:
    group: str
    topic: str | None               # None: every topic the group has offsets for
    to: str                         # earliest | latest | offset
    offset: int | None = None


@dataclass(frozen=True)
class PlannedOffset:
    topic: str
    partition: int
    current: int                    # -1: none committed
    new: int


def check_allowed(allowed: bool) -> None:
    if not allowed:
        raise Forbidden("resetting offsets is off in this console: start it with --allow-offset-reset to allow it "
                        "(or use pylog groups reset-offsets)")


def parse_request(group: str, topic: str | None, to: str | None, offset: str | None) -> ResetRequest:
    if to not in TARGETS:
        raise BadInput(f"bad reset target '{to}': choose one of {', '.join(TARGETS)}")
    new: int | None = None
    if to == "offset":
        text = (offset or "").strip()
        if not text.isdigit():
            raise BadInput(f"bad offset '{offset or ''}': a reset to an offset needs a whole number from 0 up")
        new = int(text)
    return ResetRequest(group, topic or None, to, new)


def _as_flags(bootstrap: str, request: ResetRequest) -> argparse.Namespace:
    """What `pylog groups reset-offsets` would have parsed for the same request."""
    return argparse.Namespace(
        bootstrap_server=bootstrap, group=request.group, all_topics=request.topic is None,
        topic=[request.topic] if request.topic else None, to_earliest=request.to == "earliest",
        to_latest=request.to == "latest", to_offset=request.offset, shift_by=None, to_datetime=None,
        by_duration=None)


def plan(cluster: ClusterView, request: ResetRequest) -> list[PlannedOffset]:
    """The new offset of each partition; Conflict while the group has members."""
    admin = cluster.admin()
    flags = _as_flags(cluster.bootstrap, request)
    with translated():
        try:
            check_inactive(request.group, group_description(admin, flags, request.group))
        except CliError as e:
            raise Conflict(f"{e} Stop its consumers, then reset.") from None
        committed = committed_offsets(admin, flags, request.group)
        if request.topic is None and not committed:
            raise BadInput(f"group '{request.group}' has no committed offsets: choose a topic to reset")
        targets = reset_targets(admin, flags, committed)
        low = list_offsets(admin, flags, {tp: EARLIEST for tp in targets})
        high = list_offsets(admin, flags, {tp: LATEST for tp in targets})
        new = plan_offsets(flags, targets, committed, low, high, {})
    return [PlannedOffset(t, p, committed.get((t, p), -1), o) for (t, p), o in sorted(new.items())]


def apply(cluster: ClusterView, request: ResetRequest, typed_group: str, form_key: str,
          given_key: str | None) -> list[PlannedOffset]:
    """Commit the plan, made again now, once the group's name was typed again on this console's own form."""
    if not same_secret(form_key, given_key):
        raise Forbidden("this reset did not come from this console's own form: open the group's page and "
                        "start the reset again")
    if typed_group != request.group:
        raise BadInput(f"the name typed ('{typed_group}') is not the group's ('{request.group}'): nothing was "
                       f"changed, type the group's name exactly to confirm")
    planned = plan(cluster, request)
    with translated():
        commit_offsets(cluster.admin(), _as_flags(cluster.bootstrap, request), request.group,
                       {(r.topic, r.partition): r.new for r in planned})
    return planned
