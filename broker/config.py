"""Broker and topic configuration: Kafka's key names, Kafka's defaults, validated at start.

Owns: the table of supported broker settings (`BROKER_DEFAULTS`), parsing `.properties` files and
`--set key=value` overrides into a typed `BrokerConfig`, and the topic-level settings (`TopicConfig`)
that a topic takes from broker defaults plus its own overrides (`retention.ms`, `segment.bytes`, ...).
Never does I/O beyond reading the properties file it is given.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from broker.config_def import ConfigDef
from broker.replication.quota import UNLIMITED, parse_throttled_replicas
from kafka_protocol.errors import InvalidConfigError, InvalidRequestError
from kafka_protocol.properties import parse_assignments, read_properties

LONG_MAX = 9223372036854775807

_int = int


def _bool(v: str | bool) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ValueError(f"expected true or false, got {v!r}")


def _str(v: Any) -> str:
    return str(v).strip()


def _timestamp_type(v: Any) -> str:
    s = str(v).strip()
    if s not in ("CreateTime", "LogAppendTime"):
        raise ValueError(f"expected CreateTime or LogAppendTime, got {s!r}")
    return s


def _cleanup_policy(v: Any) -> str:
    parts = sorted(p.strip() for p in str(v).split(",") if p.strip())
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise ValueError(f"expected delete, compact or compact,delete, got {v!r}")
    return ",".join(parts)


def _throttled_replicas(v: Any) -> str:
    return parse_throttled_replicas(str(v))


REPLICA_SELECTORS = ("org.apache.kafka.common.replica.RackAwareReplicaSelector", "RackAwareReplicaSelector")


def _replica_selector(v: Any) -> str:
    s = str(v).strip()
    if s not in REPLICA_SELECTORS:
        raise ValueError(f"the one selector built in is {REPLICA_SELECTORS[0]}, got {s!r}")
    return s


COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")


def _compression(v: Any) -> str:
    s = str(v).strip()
    if s not in COMPRESSION_TYPES:
        raise ValueError(f"expected one of {', '.join(COMPRESSION_TYPES)}, got {s!r}")
    return s


# Every broker setting and topic config, declared once (broker.config_def): Kafka's name, type, default,
# limits, the topic config it is the default of, the older settings it falls back to, and its doc.
# `None` means unset (Kafka's null default). The tables below are views of it.
CONFIG = (ConfigDef()
    .define('broker.id', 'int', _int, 0,
            "This broker's id (node.id in KRaft).")
    .define('broker.rack', 'string', _str, None,
            "This broker's rack (or zone): cluster mode places a partition's replicas on as many racks as it can "
            "(Kafka's rack-aware assignment; every broker then needs one).")
    .define('host.name', 'string', _str, '127.0.0.1',
            'Interface to listen on; --host overrides.')
    .define('port', 'int', _int, 9092,
            'Port to listen on; --port overrides.', at_least=0, at_most=65535)
    .define('advertised.host.name', 'string', _str, None,
            'Host name given to clients in Metadata; defaults to host.name.')
    .define('advertised.port', 'int', _int, None,
            'Port given to clients in Metadata; defaults to port.')
    .define('log.dirs', 'string', _str, '/tmp/kafka-logs',
            'Data directory; --data-dir overrides.')
    .define('num.partitions', 'int', _int, 1,
            'Partitions of an automatically created topic.', at_least=1)
    .define('default.replication.factor', 'int', _int, 1,
            'Replication factor of an automatically created topic.')
    .define('auto.create.topics.enable', 'boolean', _bool, True,
            'Create a topic on first Metadata/Produce request for it.')
    .define('delete.topic.enable', 'boolean', _bool, True,
            'Allow DeleteTopics.')
    .define('message.max.bytes', 'int', _int, 1048588,
            'Largest record batch accepted.', at_least=0, topic='max.message.bytes')
    .define('socket.request.max.bytes', 'int', _int, 104857600,
            'Largest request frame accepted.', at_least=1)
    .define('socket.send.buffer.bytes', 'int', _int, 102400,
            'SO_SNDBUF of client sockets (-1: OS default).')
    .define('socket.receive.buffer.bytes', 'int', _int, 102400,
            'SO_RCVBUF of client sockets (-1: OS default).')
    .define('connections.max.idle.ms', 'int', _int, 600000,
            'Close connections idle this long.')
    .define('queued.max.request.bytes', 'int', _int, 268435456,
            "Bytes of large requests being received or queued, broker-wide; a connection waits (not read) when they are in use (-1: no limit, Kafka's default).")
    .define('max.connections', 'int', _int, 2147483647,
            'Connections accepted at once; more are closed on arrival.', dynamic=True)
    .define('max.connections.per.ip', 'int', _int, 2147483647,
            'Connections accepted at once from one address.', dynamic=True)
    .define('request.arrival.timeout.ms', 'int', _int, 60000,
            "Close a connection whose request has not arrived whole in this long (pylog's; Kafka has none, so a trickling client holds its buffer).")
    .define('max.broker.partitions', 'int', _int, None,
            "Partitions this broker may hold (KIP-578's name); default: a quarter of the open-file limit, so the broker can always reopen its logs.")
    .define('fetch.max.bytes', 'int', _int, 57671680,
            'Upper bound on bytes returned by one Fetch.')
    .define('max.incremental.fetch.session.cache.slots', 'int', _int, 1000,
            'Incremental fetch sessions (KIP-227) kept at once.')
    .define('min.incremental.fetch.session.eviction.ms', 'int', _int, 120000,
            'A full session cache evicts only sessions idle this long.')
    .define('log.segment.bytes', 'int', _int, 1073741824,
            'Roll a segment at this size.', at_least=14, topic='segment.bytes')
    .define('log.roll.ms', 'int', _int, None,
            'Roll a segment this old.', at_least=1, topic='segment.ms', synonyms=('log.roll.hours',))
    .define('log.roll.hours', 'int', _int, 168,
            'Roll a segment this old, if log.roll.ms is unset.')
    .define('log.roll.jitter.ms', 'int', _int, None,
            'Random jitter subtracted from segment.ms.', topic='segment.jitter.ms', synonyms=('log.roll.jitter.hours',))
    .define('log.roll.jitter.hours', 'int', _int, 0,
            'Jitter in hours, if log.roll.jitter.ms is unset.')
    .define('log.retention.ms', 'int', _int, None,
            'Delete segments older than this; -1 keeps forever.', at_least=-1, topic='retention.ms', synonyms=('log.retention.minutes', 'log.retention.hours'))
    .define('log.retention.minutes', 'int', _int, None,
            'Retention in minutes, if log.retention.ms is unset.')
    .define('log.retention.hours', 'int', _int, 168,
            'Retention in hours, if neither of the above is set.')
    .define('log.retention.bytes', 'int', _int, -1,
            'Delete old segments above this partition size.', at_least=-1, topic='retention.bytes')
    .define('log.retention.check.interval.ms', 'int', _int, 300000,
            'How often retention is checked.', at_least=1)
    .define('log.segment.delete.delay.ms', 'int', _int, 60000,
            "Delay before a deleted segment's files are removed.", topic='file.delete.delay.ms')
    .define('log.index.interval.bytes', 'int', _int, 4096,
            'Bytes between offset index entries.', at_least=0, topic='index.interval.bytes')
    .define('log.index.size.max.bytes', 'int', _int, 10485760,
            'Largest offset index; a full index rolls the segment.', at_least=8, topic='segment.index.bytes')
    .define('log.flush.interval.messages', 'int', _int, LONG_MAX,
            'fsync after this many messages.', at_least=1, topic='flush.messages')
    .define('log.flush.interval.ms', 'int', _int, None,
            'fsync data older than this.', at_least=0, topic='flush.ms', synonyms=('log.flush.scheduler.interval.ms',))
    .define('log.flush.scheduler.interval.ms', 'int', _int, LONG_MAX,
            'How often the flusher checks log.flush.interval.ms.')
    .define('log.flush.offset.checkpoint.interval.ms', 'int', _int, 60000,
            'How often the recovery point is checkpointed.')
    .define('log.cleanup.policy', 'list', _cleanup_policy, 'delete',
            'delete, compact or compact,delete.', topic='cleanup.policy')
    .define('log.cleaner.enable', 'boolean', _bool, True,
            'Run the log cleaner for compacted topics.')
    .define('log.cleaner.delete.retention.ms', 'int', _int, 86400000,
            'How long tombstones are kept.', topic='delete.retention.ms')
    .define('log.cleaner.min.cleanable.ratio', 'double', float, 0.5,
            'Dirty ratio that triggers cleaning.', topic='min.cleanable.dirty.ratio')
    .define('log.message.timestamp.type', 'string', _timestamp_type, 'CreateTime',
            'CreateTime or LogAppendTime.', topic='message.timestamp.type')
    .define('compression.type', 'string', _compression, 'producer',
            'Codec batches are stored in: producer (as sent), uncompressed, gzip, snappy, lz4 or zstd (recompressed on append).', topic='compression.type')
    .define('min.insync.replicas', 'int', _int, 1,
            'Minimum in-sync replicas for acks=all.', at_least=1, topic='min.insync.replicas')
    .define('num.recovery.threads.per.data.dir', 'int', _int, 1,
            'Threads used for log recovery at start.')
    .define('producer.id.expiration.ms', 'int', _int, 86400000,
            "Forget idle producers' sequence state after this.")
    .define('offsets.topic.num.partitions', 'int', _int, 50,
            'Partitions of __consumer_offsets.')
    .define('offsets.retention.minutes', 'int', _int, 10080,
            'Keep committed offsets of empty groups this long.')
    .define('offsets.topic.segment.bytes', 'int', _int, 104857600,
            'segment.bytes of __consumer_offsets.')
    .define('offsets.retention.check.interval.ms', 'int', _int, 600000,
            'How often expired committed offsets are removed.')
    .define('offset.metadata.max.bytes', 'int', _int, 4096,
            'Largest metadata string an offset commit may carry.')
    .define('log.cleaner.backoff.ms', 'int', _int, 15000,
            'How often the log cleaner looks for partitions to compact.')
    .define('group.initial.rebalance.delay.ms', 'int', _int, 3000,
            'Wait for more members before the first rebalance.')
    .define('group.min.session.timeout.ms', 'int', _int, 6000,
            'Smallest session timeout a member may ask for.')
    .define('group.max.session.timeout.ms', 'int', _int, 1800000,
            'Largest session timeout a member may ask for.')
    .define('zookeeper.connect', 'string', _str, None,
            'ZooKeeper connect string (host:port[,host:port][/chroot]); set, the broker joins a cluster (cluster mode); unset runs the embedded single broker.')
    .define('zookeeper.session.timeout.ms', 'int', _int, 18000,
            'ZooKeeper session timeout: a broker silent this long is dead.')
    .define('zookeeper.connection.timeout.ms', 'int', _int, None,
            'Wait this long for a ZooKeeper session at start (default: zookeeper.session.timeout.ms).')
    .define('metrics.port', 'int', _int, None,
            'Serve Prometheus metrics on this port at /metrics (off when unset; 0 picks a free port).')
    .define('metrics.host', 'string', _str, '127.0.0.1',
            'The address the metrics endpoint listens on (loopback unless set).')
    .define('password.encoder.secret', 'password', _str, None,
            'The secret that dynamic passwords (AlterConfigs of ssl.*.password, ...) are encrypted with when the broker '
            'keeps them; without it they are refused, as in Kafka.')
    .define('password.encoder.old.secret', 'password', _str, None,
            'The previous password.encoder.secret, while rotating it: stored passwords are decoded with it and '
            'encrypted again with the new one.')
    .define('password.encoder.keyfactory.algorithm', 'string', _str, 'PBKDF2WithHmacSHA512',
            'How the encryption key is derived from the secret (PBKDF2WithHmacSHA512, ...SHA256, ...SHA1).')
    .define('password.encoder.cipher.algorithm', 'string', _str, 'AES/CBC/PKCS5Padding',
            'The cipher of stored dynamic passwords.')
    .define('password.encoder.key.length', 'int', _int, 128,
            'Bits of the key derived from password.encoder.secret.')
    .define('password.encoder.iterations', 'int', _int, 4096,
            'PBKDF2 iterations of the key derived from password.encoder.secret.')
    .define('zookeeper.set.acl', 'boolean', _bool, False,
            "Create znodes with ACLs, as Kafka does: only the brokers' ZooKeeper user may change them, and SCRAM "
            "credentials are readable by it alone; needs zookeeper.sasl.jaas.config.")
    .define('zookeeper.sasl.jaas.config', 'password', _str, None,
            "The brokers' SASL login to ZooKeeper (DIGEST-MD5): the line of the JAAS Client section Kafka reads, "
            'org.apache.zookeeper.server.auth.DigestLoginModule required username="kafka" password="...";')
    .define('zookeeper.sasl.client.username', 'string', _str, 'zookeeper',
            "ZooKeeper's SASL service name (ZooKeeper's zookeeper.sasl.client.username).")
    .define('controller.socket.timeout.ms', 'int', _int, 30000,
            "The controller gives up waiting for a broker's answer after this long and sends the request again.")
    .define('replica.selector.class', 'string', _replica_selector, None,
            "Cluster mode: org.apache.kafka.common.replica.RackAwareReplicaSelector lets a consumer that names its "
            "rack (client.rack) fetch from an in-sync follower in that rack (KIP-392); unset: consumers fetch "
            "from leaders. Followers serve consumers' fetches (v11+) either way.")
    .define('leader.replication.throttled.rate', 'int', _int, UNLIMITED,
            "Bytes per second this broker serves, as leader, to followers of throttled replicas "
            "(leader.replication.throttled.replicas).", at_least=0, dynamic=True)
    .define('follower.replication.throttled.rate', 'int', _int, UNLIMITED,
            "Bytes per second this broker fetches, as follower, for throttled replicas "
            "(follower.replication.throttled.replicas).", at_least=0, dynamic=True)
    .define('replica.alter.log.dirs.io.max.bytes.per.second', 'int', _int, UNLIMITED,
            "Accepted (Kafka's tools clear it); pylog moves no replica between data directories.", at_least=0,
            dynamic=True)
    .define('replication.quota.window.num', 'int', _int, 11,
            'Samples the replication throttles measure their rate over.', at_least=1)
    .define('replication.quota.window.size.seconds', 'int', _int, 1,
            'Length of one replication throttle sample.', at_least=1)
    .define('replica.lag.time.max.ms', 'int', _int, 30000,
            'A follower that has not caught up for this long leaves the ISR.')
    .define('replica.fetch.wait.max.ms', 'int', _int, 500,
            "Longest a follower's fetch waits at the leader for new data.")
    .define('replica.fetch.max.bytes', 'int', _int, 1048576,
            'Bytes a follower asks for per partition per fetch.')
    .define('replica.fetch.response.max.bytes', 'int', _int, 10485760,
            'Bytes a follower asks for per fetch.')
    .define('replica.fetch.backoff.ms', 'int', _int, 1000,
            'Pause of a follower after a failed fetch.')
    .define('replica.high.watermark.checkpoint.interval.ms', 'int', _int, 5000,
            'How often high watermarks are checkpointed.')
    .define('offsets.topic.replication.factor', 'int', _int, 3,
            'Replication factor of __consumer_offsets (cluster mode).')
    .define('offsets.commit.timeout.ms', 'int', _int, 5000,
            'An offset commit waits this long for every in-sync replica of its __consumer_offsets partition (cluster mode).')
    .define('transaction.max.timeout.ms', 'int', _int, 900000,
            'Longest transaction timeout a producer may ask for (INVALID_TRANSACTION_TIMEOUT above it).', at_least=1)
    .define('transaction.state.log.num.partitions', 'int', _int, 50,
            'Partitions of __transaction_state.', at_least=1)
    .define('transaction.state.log.replication.factor', 'int', _int, 3,
            'Replication factor of __transaction_state (cluster mode).', at_least=1)
    .define('transaction.state.log.min.isr', 'int', _int, 2,
            'min.insync.replicas of __transaction_state (cluster mode).', at_least=1)
    .define('transaction.state.log.segment.bytes', 'int', _int, 104857600,
            'segment.bytes of __transaction_state.', at_least=1)
    .define('transaction.abort.timed.out.transaction.cleanup.interval.ms', 'int', _int, 10000,
            'How often the coordinator aborts transactions open longer than their timeout.', at_least=1)
    .define('transactional.id.expiration.ms', 'int', _int, 604800000,
            'A transactional id unused for this long (and not in a transaction) is forgotten.', at_least=1)
    .define('transaction.remove.expired.transaction.cleanup.interval.ms', 'int', _int, 3600000,
            'How often expired transactional ids are removed.', at_least=1)
    .define('transaction.partition.verification.enable', 'boolean', _bool, True,
            'Refuse a transactional produce to a partition not added to its transaction (KIP-890).')
    # --- listeners and security (issue 28): Kafka's names; a listener's own value is listener.name.<name>.<setting>
    .define('listeners', 'list', _str, None,
            'Listeners as NAME://host:port, comma-separated (PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093); unset: one PLAINTEXT listener on host.name and port.')
    .define('advertised.listeners', 'list', _str, None,
            'The addresses clients are given in Metadata, per listener name; default: listeners.')
    .define('listener.security.protocol.map', 'list', _str, 'PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL',
            'The security protocol of each listener name.')
    .define('inter.broker.listener.name', 'string', _str, None,
            'The listener brokers use to talk to each other (cluster mode); default: the one whose protocol is security.inter.broker.protocol.')
    .define('security.inter.broker.protocol', 'string', _str, 'PLAINTEXT',
            'The security protocol between brokers, when inter.broker.listener.name is unset.')
    .define('allow.unauthenticated.remote.listeners', 'boolean', _bool, False,
            "pylog's: start even though a PLAINTEXT or SSL-without-client-certificates listener is bound beyond loopback, where anyone who reaches it may do anything.")
    .define('sasl.enabled.mechanisms', 'list', _str, 'SCRAM-SHA-256,SCRAM-SHA-512',
            'SASL mechanisms of the SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka defaults to GSSAPI, which pylog lacks).')
    .define('sasl.jaas.config', 'password', _str, None,
            "JAAS login module of a listener's mechanism, usually given as listener.name.<listener>.<mechanism>.sasl.jaas.config; PLAIN's users are its user_<name>=\"<password>\" options.")
    .define('sasl.mechanism.inter.broker.protocol', 'string', _str, 'PLAIN',
            'SASL mechanism between brokers over a SASL inter-broker listener (Kafka defaults to GSSAPI).')
    .define('connections.max.reauth.ms', 'int', _int, 0,
            'Session lifetime of a SASL login (KIP-368): a client must log in again within it (0: no limit).', at_least=0)
    .define('connection.failed.authentication.delay.ms', 'int', _int, 100,
            'A failed login is answered after this delay, then the connection is closed.', at_least=0)
    .define('ssl.keystore.type', 'string', _str, None,
            'PEM or PKCS12 (default: PKCS12 for a .p12/.pfx file, else PEM); convert a JKS store with keytool.',
            dynamic=True)
    .define('ssl.keystore.location', 'string', _str, None,
            "The broker's private key and certificate chain: a PEM file with both, or a PKCS12 file.", dynamic=True)
    .define('ssl.keystore.password', 'password', _str, None,
            'Password of a PKCS12 keystore.', dynamic=True)
    .define('ssl.key.password', 'password', _str, None,
            'Password of an encrypted PEM private key.', dynamic=True)
    .define('ssl.keystore.key', 'password', _str, None,
            'The private key as PEM text (with ssl.keystore.certificate.chain), instead of a file.', dynamic=True)
    .define('ssl.keystore.certificate.chain', 'string', _str, None,
            'The certificate chain as PEM text, with ssl.keystore.key.', dynamic=True)
    .define('ssl.truststore.type', 'string', _str, None,
            'PEM or PKCS12, as ssl.keystore.type.', dynamic=True)
    .define('ssl.truststore.location', 'string', _str, None,
            'CA certificates that client certificates (ssl.client.auth) must chain to.', dynamic=True)
    .define('ssl.truststore.password', 'password', _str, None,
            'Password of a PKCS12 truststore.', dynamic=True)
    .define('ssl.truststore.certificates', 'string', _str, None,
            'Trusted CA certificates as PEM text, instead of a file.', dynamic=True)
    .define('ssl.client.auth', 'string', _str, 'none',
            'required, requested or none: whether TLS clients must present a certificate (mTLS).')
    .define('ssl.enabled.protocols', 'list', _str, 'TLSv1.2,TLSv1.3',
            'TLS versions accepted.')
    .define('ssl.cipher.suites', 'list', _str, None,
            "TLSv1.2 cipher suites, OpenSSL's names (default: OpenSSL's).")
    .define('ssl.endpoint.identification.algorithm', 'string', _str, 'https',
            "https: a broker checks a peer broker's host name against its certificate; empty: it does not.")
    .define('authorizer.class.name', 'string', _str, '',
            'kafka.security.authorizer.AclAuthorizer turns on ACLs (Kafka 3.9 ZooKeeper mode\'s authorizer); empty: every request is allowed.')
    .define('super.users', 'string', _str, None,
            'Principals allowed everything, separated by semicolons: User:admin;User:ops.')
    .define('allow.everyone.if.no.acl.found', 'boolean', _bool, False,
            'With ACLs on: a resource no ACL names is open to everyone (else closed to all but super users).')
    .define('ssl.principal.mapping.rules', 'string', _str, 'DEFAULT',
            "The principal of an mTLS client from its certificate's name: RULE:pattern/replacement/[LU], ..., DEFAULT.")
    .define('auto.leader.rebalance.enable', 'boolean', _bool, True,
            'The controller moves leadership back to preferred replicas.')
    .define('leader.imbalance.check.interval.seconds', 'int', _int, 300,
            'How often the controller checks preferred leaders.')
    .define('leader.imbalance.per.broker.percentage', 'int', _int, 10,
            "The auto leader rebalance moves a broker's leaderships back when more than this percentage of the "
            'partitions it is the preferred replica of are led elsewhere.')
    .define('controlled.shutdown.enable', 'boolean', _bool, True,
            'On SIGTERM, move leadership away before stopping (cluster mode).')
    .define('controlled.shutdown.timeout.ms', 'int', _int, 30000,
            "Longest a controlled shutdown waits for leadership to move (pylog's; Kafka counts retries).")
    .define('log.message.timestamp.before.max.ms', 'int', _int, LONG_MAX,
            "Reject records this much older than the broker's clock.", at_least=0, topic='message.timestamp.before.max.ms')
    .define('log.message.timestamp.after.max.ms', 'int', _int, LONG_MAX,
            "Reject records this much newer than the broker's clock.", at_least=0, topic='message.timestamp.after.max.ms')
    .define('log.message.timestamp.difference.max.ms', 'int', _int, LONG_MAX,
            'Deprecated bound on both.', at_least=0, topic='message.timestamp.difference.max.ms')
    .define('compression.gzip.level', 'int', _int, -1,
            "gzip level when a topic's compression.type recompresses to gzip.", topic='compression.gzip.level')
    .define('compression.lz4.level', 'int', _int, 9,
            "lz4 level when a topic's compression.type recompresses to lz4.", topic='compression.lz4.level')
    .define('compression.zstd.level', 'int', _int, 3,
            "zstd level when a topic's compression.type recompresses to zstd.", topic='compression.zstd.level')
    .define('log.cleaner.min.compaction.lag.ms', 'int', _int, 0,
            "Accepted; pylog's cleaner compacts only sealed segments.", at_least=0, topic='min.compaction.lag.ms')
    .define('log.cleaner.max.compaction.lag.ms', 'int', _int, LONG_MAX,
            'Accepted.', at_least=1, topic='max.compaction.lag.ms')
    .define('unclean.leader.election.enable', 'boolean', _bool, False,
            'Elect a replica outside the ISR when no ISR replica is live (acknowledged records may be lost).', topic='unclean.leader.election.enable')
    .define('log.preallocate', 'boolean', _bool, False,
            'Accepted; segment files are not preallocated.', topic='preallocate')
    .define('log.message.downconversion.enable', 'boolean', _bool, True,
            'Accepted; pylog serves record batch v2 only.', topic='message.downconversion.enable')
    .define('log.message.format.version', 'string', _str, '3.0-IV1',
            'Accepted; pylog writes record batch v2 only.', topic='message.format.version')
    .define('log.local.retention.ms', 'int', _int, -2,
            'Tiered topics (remote.storage.enable): how long a segment stays on the local disk once uploaded '
            '(-2: retention.ms).', at_least=-2, topic='local.retention.ms')
    .define('log.local.retention.bytes', 'int', _int, -2,
            'Tiered topics: the local bytes a partition keeps once its segments are uploaded (-2: retention.bytes).',
            at_least=-2, topic='local.retention.bytes')
    .define('remote.log.storage.system.enable', 'boolean', _bool, False,
            'Tiered storage (KIP-405): upload the closed segments of topics with remote.storage.enable to '
            'remote.log.storage.url and serve their old offsets from there.')
    .define('remote.log.storage.url', 'string', _str, '',
            'Where tiered segments go: s3://bucket/prefix (reached with the standard AWS variables: '
            'AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION) or, for tests, a local directory.')
    .define('remote.log.manager.task.interval.ms', 'int', _int, 30000,
            'How often closed segments are uploaded and remote retention is applied.', at_least=1)
    .define('remote.log.reader.cache.bytes', 'int', _int, 64 * 1024 * 1024,
            'Bytes of remote segment data kept in memory for fetches of tiered offsets (read ahead).', at_least=0)
    .define('remote.log.orphan.grace.ms', 'int', _int, 600_000,
            'Cluster mode: how old an object without metadata (an upload that did not finish) must be before the '
            "partition's leader deletes it; younger, it may be a deposed leader's upload still running.", at_least=0)
    .define('remote.fetch.max.wait.ms', 'int', _int, 500,
            'How long a fetch of tiered offsets waits for the object store before answering without them.',
            at_least=1)
    .define_topic('follower.replication.throttled.replicas', 'string', _throttled_replicas, '',
                  "Replicas (partition:broker,... or *) whose replication the follower throttles at "
                  "follower.replication.throttled.rate (a reassignment's tool sets it).")
    .define_topic('leader.replication.throttled.replicas', 'string', _throttled_replicas, '',
                  "Replicas (partition:broker,... or *) whose replication the leader throttles at "
                  "leader.replication.throttled.rate (a reassignment's tool sets it).")
    .define_topic('remote.storage.enable', 'boolean', _bool, False,
                  'Tiered storage for this topic: closed segments go to remote.log.storage.url (needs '
                  'remote.log.storage.system.enable on the broker).')
    .define_topic('remote.log.copy.disable', 'boolean', _bool, False, 'Accepted; no tiered storage.')
    .define_topic('remote.log.delete.on.disable', 'boolean', _bool, False, 'Accepted; no tiered storage.')
)

BROKER_SETTINGS: dict[str, tuple[Any, Callable[[Any], Any], str]] = {k.name: (k.default, k.parse, k.doc) for k in CONFIG}
# Topic-level config name -> the broker setting it defaults from.
TOPIC_TO_BROKER_KEY: dict[str, str] = CONFIG.topic_to_broker()
# Topic configs with no broker setting behind them: (default, parser); accepted and reported as Kafka does.
TOPIC_ONLY: dict[str, tuple[Any, Callable[[Any], Any]]] = {t: (k.default, k.parse) for t, k in CONFIG.topic_only.items()}
TOPIC_KEYS: frozenset[str] = frozenset(TOPIC_TO_BROKER_KEY) | frozenset(TOPIC_ONLY)
# TopicConfig fields that topic_defaults() resolves by hand (synonym chains, parsing); the others copy their setting
_DERIVED_TOPIC_FIELDS = frozenset({
    "cleanup_policy", "compression_type", "delete_retention_ms", "file_delete_delay_ms", "flush_messages", "flush_ms",
    "index_interval_bytes", "max_message_bytes", "message_timestamp_type", "min_cleanable_dirty_ratio",
    "min_insync_replicas", "retention_bytes", "retention_ms", "segment_bytes", "segment_index_bytes",
    "segment_jitter_ms", "segment_ms"})


LISTENER_PREFIX = "listener.name."
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# the settings a listener may give its own value of (listener.name.<listener>.<setting>)
LISTENER_SETTINGS: tuple[str, ...] = tuple(k.name for k in CONFIG if k.name.startswith(("ssl.", "sasl."))
                                           and k.name not in ("sasl.mechanism.inter.broker.protocol",)) \
    + ("connections.max.reauth.ms",)


def _listener_base(key: str) -> str:
    """The setting behind listener.name.<listener>.[<mechanism>.]<setting>."""
    setting = key[len(LISTENER_PREFIX):].partition(".")[2]
    head, _, rest = setting.partition(".")
    return rest if head.upper() in SASL_MECHANISMS else setting


def is_password(key: str) -> bool:
    """A password setting, given directly or as a listener's own (listener.name.<l>.[<mechanism>.]<setting>)."""
    base = _listener_base(key) if key.startswith(LISTENER_PREFIX) else key
    return base in CONFIG and CONFIG[base].sensitive


def render_setting(value: Any) -> str | None:
    """A setting's value as Kafka prints it (booleans in lower case; None stays None)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


# Broker settings that may change while the broker runs (Kafka's dynamic broker configs, KIP-226): the
# topic defaults and those declared dynamic.
DYNAMIC_BROKER_KEYS: frozenset[str] = CONFIG.dynamic_keys()
# Kafka's synonym chains: a setting and the older ones it falls back to, in order.
BROKER_SYNONYMS: dict[str, tuple[str, ...]] = CONFIG.synonyms()
# Kafka's ConfigSource codes, as DescribeConfigs reports them.
SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT, SOURCE_STATIC, SOURCE_DEFAULT = 2, 3, 4, 5
DYNAMIC_SCOPES = ("broker", "default")     # `<broker.id>` and the cluster-wide default ("")


@dataclass(frozen=True)
class TopicConfig:
    """Effective settings of one topic: broker defaults with the topic's overrides applied. Built from
    `BrokerConfig.topic_defaults()` (or `TopicConfig.default()`), never restating a default."""

    cleanup_policy: str
    compression_type: str
    delete_retention_ms: int
    file_delete_delay_ms: int
    flush_messages: int
    flush_ms: int
    index_interval_bytes: int
    max_message_bytes: int
    message_timestamp_type: str
    min_cleanable_dirty_ratio: float
    min_insync_replicas: int
    retention_bytes: int
    retention_ms: int
    segment_bytes: int
    segment_index_bytes: int
    segment_jitter_ms: int
    segment_ms: int
    message_timestamp_before_max_ms: int
    message_timestamp_after_max_ms: int
    message_timestamp_difference_max_ms: int
    compression_gzip_level: int
    compression_lz4_level: int
    compression_zstd_level: int
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int
    unclean_leader_election_enable: bool
    preallocate: bool
    message_downconversion_enable: bool
    message_format_version: str
    local_retention_ms: int
    local_retention_bytes: int
    follower_replication_throttled_replicas: str
    leader_replication_throttled_replicas: str
    remote_storage_enable: bool
    remote_log_copy_disable: bool
    remote_log_delete_on_disable: bool
    # The topic's explicit overrides, by Kafka name (for DescribeConfigs' "is default" flag).
    overrides: Mapping[str, str] = field(default_factory=dict, compare=False)

    @classmethod
    def default(cls, **changes: Any) -> "TopicConfig":
        """The settings of a topic on a broker with default settings (BROKER_SETTINGS holds the defaults),
        with `changes` (attribute names) applied: for tests and tools that need a TopicConfig."""
        return dataclasses.replace(BrokerConfig().topic_defaults(), **changes)

    @staticmethod
    def attr(name: str) -> str:
        return name.replace(".", "_")

    def value_of(self, name: str) -> Any:
        return getattr(self, self.attr(name))

    def with_overrides(self, overrides: Mapping[str, str]) -> "TopicConfig":
        """A copy with `overrides` (Kafka topic names) applied; raises InvalidConfigError naming the key."""
        values: dict[str, Any] = {}
        for name, raw in overrides.items():
            if name not in TOPIC_KEYS:
                raise InvalidConfigError(f"Unknown topic config '{name}'")
            values[self.attr(name)] = parse_topic_value(name, raw)
        merged = {**self.overrides, **{k: str(v) for k, v in overrides.items()}}
        return dataclasses.replace(self, overrides=merged, **values)


def parse_topic_value(name: str, raw: Any) -> Any:
    """Parse and range-check one topic-level value; InvalidConfigError names the key and the problem."""
    key = CONFIG.topic_key(name)
    parser = key.parse if key is not None else _int
    try:
        value = parser(raw)
    except (TypeError, ValueError) as e:
        why = "Not a number of type LONG" if parser is _int else str(e)    # Kafka's wording
        raise InvalidConfigError(f"Invalid value {raw} for configuration {name}: {why}") from None
    problem = key.problem(value) if key is not None else None
    if problem is not None:
        raise InvalidConfigError(f"Invalid value {raw!r} for configuration {name}: {problem}")
    return value


class BrokerConfig:
    """Typed broker settings. Read values with `cfg["log.segment.bytes"]` or the properties below."""

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._values: dict[str, Any] = {k: d for k, (d, _, _) in BROKER_SETTINGS.items()}
        self._explicit: set[str] = set()
        # dynamic settings (KIP-226), by scope; a broker's own win over the cluster-wide default
        self._dynamic: dict[str, dict[str, Any]] = {scope: {} for scope in DYNAMIC_SCOPES}
        self._listener_values: dict[str, Any] = {}    # listener.name.<listener>.<setting>, as given
        for key, raw in (values or {}).items():
            self.set(key, raw)
        self.validate()

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: list[str] | Mapping[str, Any] | None = None) -> "BrokerConfig":
        values: dict[str, Any] = {}
        if path is not None:
            values.update(read_properties(path))
        if isinstance(overrides, Mapping):
            values.update(overrides)
        else:
            values.update(parse_assignments(overrides or [], "--set"))
        return cls(values)

    def set(self, key: str, raw: Any) -> None:
        if key == "log.dir":
            key = "log.dirs"
        if key.startswith(LISTENER_PREFIX):
            self._listener_values[key] = self._parse_listener_setting(key, raw)
            self._explicit.add(key)
            return
        if key not in BROKER_SETTINGS:
            raise InvalidConfigError(f"Unknown broker setting '{key}' (see conf/broker.properties for the supported ones)")
        _, parser, _ = BROKER_SETTINGS[key]
        try:
            self._values[key] = parser(raw) if raw is not None else None
        except (TypeError, ValueError) as e:
            raise InvalidConfigError(f"Invalid value {raw!r} for broker setting {key}: {e}") from None
        self._explicit.add(key)

    def __getitem__(self, key: str) -> Any:
        for scope in DYNAMIC_SCOPES:
            if key in self._dynamic[scope]:
                return self._dynamic[scope][key]
        if key.startswith(LISTENER_PREFIX):
            return self._listener_values.get(key)
        return self._values[key]

    @staticmethod
    def _parse_listener_setting(key: str, raw: Any) -> Any:
        """A `listener.name.<listener>.<setting>` value, parsed as its setting (or `<mechanism>.sasl.jaas.config`)."""
        listener, _, setting = key[len(LISTENER_PREFIX):].partition(".")
        base = _listener_base(key)
        if not listener or base not in LISTENER_SETTINGS:
            raise InvalidConfigError(f"Unknown broker setting '{key}': a listener may set "
                                     f"listener.name.<listener>.<setting> for the ssl.*, sasl.* and "
                                     f"connections.max.reauth.ms settings, and <mechanism>.sasl.jaas.config")
        if listener != listener.lower():
            raise InvalidConfigError(f"Broker setting '{key}': listener names are written in lower case after "
                                     f"listener.name. (listener.name.{listener.lower()}.{setting})")
        try:
            return BROKER_SETTINGS[base][1](raw) if raw is not None else None
        except (TypeError, ValueError) as e:
            raise InvalidConfigError(f"Invalid value for broker setting {key}: {e}") from None

    def for_listener(self, listener: str, key: str, mechanism: str | None = None) -> Any:
        """`key` as listener `listener` sees it: its own value (listener.name.<listener>.[<mechanism>.]key,
        dynamic first) or the broker's."""
        prefix = f"{LISTENER_PREFIX}{listener.lower()}."
        names = ([f"{prefix}{mechanism.lower()}.{key}"] if mechanism else []) + [f"{prefix}{key}"]
        for name in names:
            value = self[name]
            if value is not None:
                return value
        return self[key]

    def listener_settings(self, listener: str) -> dict[str, Any]:
        """Every ssl.* and sasl.* setting as `listener` sees it (tls.server_context's input)."""
        return {key: self.for_listener(listener, key) for key in LISTENER_SETTINGS}

    def is_explicit(self, key: str) -> bool:
        return key in self._explicit

    # --- dynamic settings (KIP-226) -------------------------------------------------------------

    def dynamic(self, scope: str) -> dict[str, str | None]:
        """The dynamic settings of `scope` ("broker" or "default"), rendered as strings."""
        return {k: render_setting(v) for k, v in sorted(self._dynamic[scope].items())}

    def set_dynamic(self, scope: str, settings: Mapping[str, str], *, check_only: bool = False) -> None:
        """Replace `scope`'s dynamic settings; InvalidRequestError names any that cannot change at run time."""
        fixed = sorted(k for k in settings if (k in BROKER_SETTINGS and k not in DYNAMIC_BROKER_KEYS)
                       or (k.startswith(LISTENER_PREFIX) and _listener_base(k) not in DYNAMIC_BROKER_KEYS))
        if fixed:
            raise InvalidRequestError(f"Cannot update these configs dynamically: {', '.join(fixed)}")
        parsed: dict[str, Any] = {}
        for key, raw in settings.items():
            if key.startswith(LISTENER_PREFIX):
                try:
                    parsed[key] = self._parse_listener_setting(key, raw)
                except InvalidConfigError as e:
                    raise InvalidRequestError(str(e)) from None
                continue
            if key not in BROKER_SETTINGS:
                continue                      # Kafka accepts (and ignores) names it does not know
            parser = BROKER_SETTINGS[key][1]
            try:
                parsed[key] = parser(raw)
            except (TypeError, ValueError) as e:
                why = "Not a number of type INT" if parser is _int else str(e)    # Kafka's wording
                raise InvalidRequestError(f"Invalid value {raw} for configuration {key}: {why}") from None
            problem = CONFIG[key].problem(parsed[key])
            if problem is not None:
                raise InvalidRequestError(f"Invalid value {raw} for configuration {key}: {problem}")
        if not check_only:
            self._dynamic[scope] = parsed

    def sources(self, key: str) -> list[tuple[str, Any, int]]:
        """(name, value, source) of every level that sets `key` or a synonym, strongest first (Kafka's
        synonyms); empty when nothing sets `key` itself (Kafka then reports no value and no synonyms,
        though an older synonym such as log.retention.hours decides the effective value)."""
        out: list[tuple[str, Any, int]] = []
        if BROKER_SETTINGS[key][0] is None and key not in self._explicit \
                and not any(key in self._dynamic[scope] for scope in DYNAMIC_SCOPES):
            return out
        for name in BROKER_SYNONYMS.get(key, (key,)):
            for scope, source in zip(DYNAMIC_SCOPES, (SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT)):
                if name in self._dynamic[scope]:
                    out.append((name, self._dynamic[scope][name], source))
            if name in self._explicit:
                out.append((name, self._values[name], SOURCE_STATIC))
            default = BROKER_SETTINGS[name][0]
            if default is not None:
                out.append((name, default, SOURCE_DEFAULT))
        return out

    def validate(self) -> None:
        """Every setting within its declared limits (the same limits its topic config has)."""
        for key in CONFIG:
            problem = key.problem(self._values[key.name])
            if problem is not None:
                why = "must not be negative" if problem == "must be at least 0" else problem
                raise InvalidConfigError(f"Invalid value {self._values[key.name]!r} for broker setting {key.name}: "
                                         f"{why}")

    # Derived values, resolved the way Kafka resolves them.
    @property
    def retention_ms(self) -> int:
        v = self
        if v["log.retention.ms"] is not None:
            return v["log.retention.ms"]
        if v["log.retention.minutes"] is not None:
            return v["log.retention.minutes"] * 60_000
        return v["log.retention.hours"] * 3_600_000

    @property
    def roll_ms(self) -> int:
        v = self
        return v["log.roll.ms"] if v["log.roll.ms"] is not None else v["log.roll.hours"] * 3_600_000

    @property
    def roll_jitter_ms(self) -> int:
        v = self
        ms = v["log.roll.jitter.ms"]
        return ms if ms is not None else v["log.roll.jitter.hours"] * 3_600_000

    @property
    def flush_ms(self) -> int:
        v = self
        return v["log.flush.interval.ms"] if v["log.flush.interval.ms"] is not None else v["log.flush.scheduler.interval.ms"]

    @property
    def data_dir(self) -> Path:
        return Path(self._values["log.dirs"].split(",")[0])

    @property
    def advertised_host(self) -> str:
        return self._values["advertised.host.name"] or self._values["host.name"]

    @property
    def advertised_port(self) -> int:
        return self._values["advertised.port"] or self._values["port"]

    def topic_defaults(self) -> TopicConfig:
        """The TopicConfig a topic without overrides gets (dynamic defaults included)."""
        v = self
        return TopicConfig(
            cleanup_policy=v["log.cleanup.policy"],
            compression_type=v["compression.type"],
            delete_retention_ms=v["log.cleaner.delete.retention.ms"],
            file_delete_delay_ms=v["log.segment.delete.delay.ms"],
            flush_messages=v["log.flush.interval.messages"],
            flush_ms=self.flush_ms,
            index_interval_bytes=v["log.index.interval.bytes"],
            max_message_bytes=v["message.max.bytes"],
            message_timestamp_type=v["log.message.timestamp.type"],
            min_cleanable_dirty_ratio=v["log.cleaner.min.cleanable.ratio"],
            min_insync_replicas=v["min.insync.replicas"],
            retention_bytes=v["log.retention.bytes"],
            retention_ms=self.retention_ms,
            segment_bytes=v["log.segment.bytes"],
            segment_index_bytes=v["log.index.size.max.bytes"],
            segment_jitter_ms=self.roll_jitter_ms,
            segment_ms=self.roll_ms,
            **{TopicConfig.attr(t): v[b] for t, b in TOPIC_TO_BROKER_KEY.items()
               if TopicConfig.attr(t) not in _DERIVED_TOPIC_FIELDS},
            **{TopicConfig.attr(t): default for t, (default, _) in TOPIC_ONLY.items()},
        )




SETTINGS_INTRO = ("Every setting of `pylog broker` (server.properties, `--set key=value`), generated from its one "
                  "declaration in `broker/config.py` (`CONFIG`): `python -m broker.config > docs/SETTINGS.md`. Names, "
                  "types and defaults are Kafka's; a dynamic setting may also be changed while the broker runs, "
                  "per broker or cluster-wide (AlterConfigs or IncrementalAlterConfigs, as Kafka's kafka-configs "
                  "--entity-type brokers sends them); a broker setting with a topic config is that topic config's default, with the same limits.")


def settings_page() -> str:
    """docs/SETTINGS.md: every setting, from CONFIG."""
    from broker.config_def import settings_page as page

    return page(CONFIG, "Broker settings", SETTINGS_INTRO)


if __name__ == "__main__":
    print(settings_page(), end="")
