"""`pylog users`: SCRAM users (Kafka's `kafka-configs --entity-type users`, KIP-554's admin calls).

Owns: the `users` argument tree, DescribeUserScramCredentials and AlterUserScramCredentials through
confluent-kafka's AdminClient, and where a new password comes from (`--password-file`, the
PYLOG_USER_PASSWORD environment variable, or a prompt; never echoed or printed). The broker keeps
only a salted credential (salt, StoredKey, ServerKey, iterations), as Kafka does.

Must never: print a password, or report success for a user whose change the broker refused.
"""
from __future__ import annotations

import argparse
import getpass
import os
import sys

from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                   UserScramCredentialUpsertion)

from pylog.tools.client import add_connection_args, admin_client, result_or_error
from pylog.tools.errors import CliError

MECHANISMS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
PASSWORD_ENV = "PYLOG_USER_PASSWORD"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("users", help="list, add and delete SCRAM users",
                                   description="Manage SCRAM users (like kafka-configs --entity-type users).")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    lst = actions.add_parser("list", help="users and their SCRAM mechanisms and iterations")
    add_connection_args(lst)
    lst.add_argument("--user", action="append", default=[], help="only these users (repeatable)")
    add = actions.add_parser("add", help="create a user, or change its password")
    add_connection_args(add)
    add.add_argument("--user", required=True)
    add.add_argument("--mechanism", action="append", choices=sorted(MECHANISMS), default=[],
                     help="SCRAM mechanism(s) to give the user (default: both)")
    add.add_argument("--iterations", type=int, default=8192, help="PBKDF2 iterations, 4096 to 16384 (default 8192)")
    add.add_argument("--password-file", help=f"read the password from this file (else ${PASSWORD_ENV}, else a prompt)")
    delete = actions.add_parser("delete", help="delete a user's SCRAM credentials")
    add_connection_args(delete)
    delete.add_argument("--user", required=True)
    delete.add_argument("--mechanism", action="append", choices=sorted(MECHANISMS), default=[],
                        help="only this mechanism (default: every one the user has)")
    parser.set_defaults(func=run)


def _password(args: argparse.Namespace) -> bytes:
    if args.password_file:
        try:
            with open(args.password_file, encoding="utf-8") as f:
                text = f.read().rstrip("\n")
        except OSError as e:
            raise CliError(f"cannot read --password-file {args.password_file}: {e.strerror}") from None
    elif os.environ.get(PASSWORD_ENV):
        text = os.environ[PASSWORD_ENV]
    elif sys.stdin.isatty():
        text = getpass.getpass(f"password for {args.user}: ")
    else:
        raise CliError(f"no password: give --password-file FILE or set {PASSWORD_ENV}")
    if not text:
        raise CliError("the password is empty")
    return text.encode("utf-8")


def run(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    where = {"bootstrap": args.bootstrap_server}
    if args.action == "list":
        described = result_or_error(admin.describe_user_scram_credentials(args.user or None), **where)
        rows = []
        for user, description in sorted(described.items()):
            for info in description.scram_credential_infos:
                rows.append(f"{user}\t{info.mechanism.name.replace('_', '-')}\titerations={info.iterations}")
        print("\n".join(rows) if rows else "no SCRAM users")
        return 0
    if args.action == "add":
        password = _password(args)
        mechanisms = args.mechanism or sorted(MECHANISMS)
        futures = [admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            args.user, ScramCredentialInfo(MECHANISMS[m], args.iterations), password)]) for m in mechanisms]
        for f in futures:
            result_or_error(f[args.user], **where)
        print(f"user {args.user}: {', '.join(mechanisms)} set ({args.iterations} iterations)")
        return 0
    mechanisms = args.mechanism
    if not mechanisms:
        described = result_or_error(admin.describe_user_scram_credentials([args.user]), **where)
        mechanisms = [i.mechanism.name.replace("_", "-") for i in described[args.user].scram_credential_infos]
    result = admin.alter_user_scram_credentials([UserScramCredentialDeletion(args.user, MECHANISMS[m])
                                                 for m in mechanisms])
    result_or_error(result[args.user], **where)
    print(f"user {args.user}: {', '.join(mechanisms)} deleted")
    return 0
