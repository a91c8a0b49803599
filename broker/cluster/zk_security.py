"""How a broker logs in to ZooKeeper and which ACLs its znodes get (Kafka's `zookeeper.set.acl`).

Kafka's brokers log in to a secured ZooKeeper with SASL (the JAAS `Client` section) and, with
`zookeeper.set.acl=true`, create every znode so that only their own user may change it and anyone may
read it, except the sensitive ones (SCRAM credentials under `/config/users`, `/config/brokers`,
`/delegation_token`) that their user alone may read (Kafka's `ZkData.defaultAcls`). pylog does the same
with kazoo's SASL (DIGEST-MD5, through pure-sasl): `zookeeper.sasl.jaas.config` carries that `Client`
line. Every broker of a cluster must log in as the same user, as in Kafka. Pure: no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kazoo.security import ACL, CREATOR_ALL_ACL, READ_ACL_UNSAFE

from kafka_protocol.errors import InvalidConfigError
from kafka_protocol.security import jaas

SENSITIVE_ROOTS = ("/config/users", "/config/brokers", "/delegation_token")


@dataclass(frozen=True)
class ZkSecurity:
    username: str | None = None
    password: str | None = None
    service: str = "zookeeper"
    set_acl: bool = False

    def __repr__(self) -> str:                 # never print a password
        return f"ZkSecurity(user={self.username!r}, set_acl={self.set_acl})"

    def sasl_options(self) -> dict[str, str] | None:
        """kazoo's `sasl_options`, None without a login."""
        if self.username is None:
            return None
        return {"mechanism": "DIGEST-MD5", "username": self.username, "password": self.password or "",
                "service": self.service}

    def default_acl(self) -> list[ACL] | None:
        """The ACL of a znode created without an explicit one: the creator (this user) all, the world read."""
        return list(CREATOR_ALL_ACL) + list(READ_ACL_UNSAFE) if self.set_acl else None

    def acl_for(self, path: str) -> list[ACL] | None:
        """The ACL of a znode at `path` (Kafka's ZkData.defaultAcls): the sensitive ones are this user's alone."""
        if not self.set_acl:
            return None
        if any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOTS):
            return list(CREATOR_ALL_ACL)
        return self.default_acl()


def zk_security(config: Any) -> ZkSecurity:
    """The broker's ZooKeeper login and ACL mode, checked: ACLs without a login would lock every broker out."""
    line = config["zookeeper.sasl.jaas.config"]
    username = password = None
    if line:
        try:
            entry = jaas.parse(str(line))
        except jaas.JaasError as e:
            raise InvalidConfigError(f"zookeeper.sasl.jaas.config: {e}") from None
        if not entry.username or entry.password is None:
            raise InvalidConfigError('zookeeper.sasl.jaas.config needs username="..." and password="..." '
                                     "(the user ZooKeeper's JAAS Server section lists as user_<name>)")
        username, password = entry.username, entry.password
    if config["zookeeper.set.acl"] and username is None:
        raise InvalidConfigError("zookeeper.set.acl=true, but the brokers do not log in to ZooKeeper: set "
                                 'zookeeper.sasl.jaas.config=\'org.apache.zookeeper.server.auth.DigestLoginModule '
                                 'required username="kafka" password="...";\'')
    return ZkSecurity(username, password, str(config["zookeeper.sasl.client.username"]),
                      bool(config["zookeeper.set.acl"]))
