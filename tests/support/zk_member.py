"""A cluster member in its own process, for tests that SIGKILL or SIGSTOP it: it registers a broker id
in ZooKeeper and contends for controller, then reports on stdout, one JSON line per event:
`{"event": "registered"}`, `{"event": "elected", "epoch": E}`, `{"event": "resigned"}` and, every
0.2 s while it holds (or held) a controller token, the outcome of a fenced write with the token it
was elected with: `{"event": "write", "ok": true|false, "epoch": E, "error": "moved"|kazoo error}`.

Usage: python -m tests.support.zk_member CONNECT BROKER_ID SESSION_TIMEOUT_MS
"""
from __future__ import annotations

import faulthandler
import json
import signal
import sys
import threading
import time


from broker.cluster.controller_election import ControllerElection, ControllerMovedError, ControllerToken
from broker.cluster.membership import BrokerMembership
from broker.cluster.zk_client import ZkClient
from broker.cluster.zk_layout import BrokerRegistration


_SAY = threading.Lock()


def say(**event: object) -> None:
    """One whole line per event: callbacks on kazoo's threads and the main loop print concurrently."""
    with _SAY:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()


def main() -> None:
    faulthandler.register(signal.SIGUSR2, all_threads=True)     # a test that times out dumps our threads
    connect, broker_id, session_ms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    zk = ZkClient(connect, session_timeout_ms=session_ms)
    zk.start()
    BrokerMembership(zk, BrokerRegistration(broker_id, "127.0.0.1", 10000 + broker_id)).register()
    say(event="registered")
    first: list[ControllerToken] = []
    election = ControllerElection(zk, broker_id, on_elected=lambda t: (first.append(t), say(event="elected", epoch=t.epoch)),
                                  on_resigned=lambda: say(event="resigned"))
    election.start()
    while True:
        time.sleep(0.2)
        if first:
            try:
                election.commit_fenced(first[0], lambda tx: tx.set_data("/pylog-test-fenced", str(broker_id).encode()))
                say(event="write", ok=True, epoch=first[0].epoch)
            except ControllerMovedError:
                say(event="write", ok=False, epoch=first[0].epoch, error="moved")
            except Exception as e:     # noqa: BLE001 (no session: frozen past it, or reconnecting)
                say(event="write", ok=False, epoch=first[0].epoch, error=type(e).__name__)


if __name__ == "__main__":
    main()
