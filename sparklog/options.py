"""Parse and validate the options of `format("pylog")`, with the names, defaults and errors of Spark's
built-in Kafka connector.

Owns: option names, defaults, the checks Spark's `KafkaSourceProvider` makes (same explanations), and
precise errors for every other bad value (the option's name and the allowed values). Produces plain,
picklable dataclasses. Never talks to a broker and never touches Spark objects.
"""
from __future__ import annotations

import logging
import os
import re
import uuid
from dataclasses import dataclass, field
from typing import Literal, Mapping, Optional

from kafka_protocol.security.client_settings import MECHANISMS as SECURITY_MECHANISMS
from kafka_protocol.security.client_settings import SECURITY_KEYS, ClientSecurity, SecuritySettingsError
from sparklog import offsets as off
from sparklog.errors import UserError
from sparklog.schema import (
    DEFAULT_FETCH_OFFSET_RETRIES,
    DEFAULT_FETCH_OFFSET_RETRY_MS,
    DEFAULT_MAX_TRIGGER_DELAY,
    DEFAULT_POLL_TIMEOUT_MS,
)

log = logging.getLogger(__name__)

STRATEGY_KEYS = ("subscribe", "subscribepattern", "assign")

CUSTOM_GROUP_ID_WARNING = (
    "Kafka option 'kafka.group.id' has been set on this query, it is not recommended to set this option. "
    "This option is unsafe to use since multiple concurrent queries or sources using the same group id will "
    "interfere with each other as they are part of the same consumer group. Restarted queries may also suffer "
    "interference from the previous run having the same group id. The user should have only one query per "
    "group id, and/or set the option 'kafka.session.timeout.ms' to be very small so that the Kafka consumers "
    "from the previous query are marked dead by the Kafka group coordinator before the restarted query starts "
    "running."
)

AUTO_OFFSET_RESET_ERROR = (
    "Kafka option 'auto.offset.reset' is not supported.\n"
    "Instead set the source option 'startingoffsets' to 'earliest' or 'latest'\n"
    "to specify where to start. Structured Streaming manages which offsets are consumed\n"
    "internally, rather than relying on the kafkaConsumer to do it. This will ensure that no\n"
    "data is missed when new topics/partitions are dynamically subscribed. Note that\n"
    "'startingoffsets' only applies when a new Streaming query is started, and\n"
    "that resuming will always pick up from where the query left off. See the docs for more\n"
    "details."
)

# Java-client settings with no librdkafka equivalent: accepted for drop-in compatibility, ignored.
JAVA_ONLY_KAFKA_SETTINGS = frozenset({
    "max.poll.records", "receive.buffer.bytes", "send.buffer.bytes", "default.api.timeout.ms",
    "key.serializer", "value.serializer",
})


class OptionError(UserError, ValueError):
    """A bad option: the message names the option and what is allowed (Spark's wording where it has one)."""


# Every option the source and the sink read (Spark's Kafka connector's names, plus pylog's fetcher, producer,
# commitToGroup, failOnMissingTopic, progressAddress, remoteStorage and directReads); `kafka.*` passes through to the client. Anything else is a mistake
# (a misspelt `startingOffset` would otherwise be ignored and the query start somewhere else).
SOURCE_OPTIONS = (
    "subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets", "startingTimestamp",
    "endingTimestamp", "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
    "failOnDataLoss", "includeHeaders", "minPartitions", "maxRecordsPerPartition", "maxOffsetsPerTrigger",
    "maxBytesPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay", "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries", "fetchOffset.retryIntervalMs", "groupIdPrefix", "commitToGroup", "fetcher",
    "failOnMissingTopic", "progressAddress", "remoteStorage", "directReads",
)
# remoteStorage.<setting>: the store's settings for direct reads, by delta-rs's names (remoteStorage.aws_endpoint_url,
# .aws_access_key_id, .aws_secret_access_key, .aws_region, .aws_session_token, .aws_allow_http), over the AWS_*
# variables of the process that plans the read
SOURCE_PREFIXES = ("kafka.", "remotestorage.")
REMOTE_STORAGE_KEYS = ("aws_endpoint_url", "aws_access_key_id", "aws_secret_access_key", "aws_region",
                       "aws_session_token", "aws_allow_http")
SINK_OPTIONS = ("topic", "producer", "includeHeaders", "deliveryGuarantee", "transactionalIdPrefix")
DELIVERY_GUARANTEES = ("at-least-once", "exactly-once")
DEFAULT_TRANSACTION_TIMEOUT_MS = 300_000    # the exactly-once sink's kafka.transaction.timeout.ms
_SPARK_SET = ("path", "checkpointLocation")   # options Spark itself may hand a data source


def check_known(options: Mapping[str, str], known: tuple[str, ...], what: str,
                prefixes: tuple[str, ...] = ("kafka.",)) -> None:
    """An OptionError naming the first unknown option and the closest known one; options starting with one of
    `prefixes` pass through (the Kafka client's, a store's)."""
    import difflib

    names = {k.lower(): k for k in known + _SPARK_SET}
    for key in options:
        k = str(key).lower()
        if k.startswith(prefixes) or k in names:
            continue
        close = difflib.get_close_matches(k, list(names), n=1, cutoff=0.6)
        hint = (f"did you mean '{names[close[0]]}'?" if close else
                f"the options are {', '.join(known)} and " + " and ".join(p + "*" for p in prefixes))
        raise OptionError(f"Unknown option '{key}' for the {what}: {hint}")


@dataclass(frozen=True)
class Strategy:
    """Which partitions to read: exactly one of subscribe / subscribePattern / assign."""

    kind: str                                   # "subscribe" | "subscribepattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str = ""
    partitions: tuple[off.TopicPartition, ...] = ()


Fetcher = Literal["auto", "native", "librdkafka"]
FETCHERS: tuple[str, ...] = ("auto", "native", "librdkafka")


@dataclass(frozen=True)
class ReadOptions:
    bootstrap_servers: str
    kafka_params: dict[str, str]                # without the security settings (see `security`)
    strategy: Strategy
    starting: off.OffsetSpec
    ending: off.OffsetSpec
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: Optional[int] = None
    max_records_per_partition: Optional[int] = None
    max_offsets_per_trigger: Optional[int] = None
    max_bytes_per_trigger: Optional[int] = None   # bytes as stored in the log (see planner.byte_limit)
    min_offsets_per_trigger: Optional[int] = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    fetch_offset_retries: int = DEFAULT_FETCH_OFFSET_RETRIES
    fetch_offset_retry_ms: int = DEFAULT_FETCH_OFFSET_RETRY_MS
    group_id: str = ""                          # consumer group.id (never joined, never committed)
    custom_group_id: bool = False               # group_id came from kafka.group.id (used as is)
    commit_to_group: Optional[str] = None       # mirror committed batch ends into this group
    fetcher: Fetcher = "auto"                   # how executors read records (see sparklog.reader_settings)
    fail_on_missing_topic: bool = True          # batch reads: a subscribed topic the broker lacks is an error
    security: ClientSecurity | None = ClientSecurity()   # None: only librdkafka speaks it (GSSAPI, OAUTHBEARER)
    progress_address: Optional[str] = None      # executors report rows read there (sparklog.read_progress)
    remote_storage: Optional[str] = None        # the brokers' remote.log.storage.url: direct reads (sparklog.direct_reads)
    remote_storage_env: tuple[tuple[str, str], ...] = ()   # the driver's AWS_* variables, for the executors

    @property
    def librdkafka_params(self) -> dict[str, str]:
        return librdkafka_params(self.kafka_params, self.security)


Producer = Literal["auto", "native", "librdkafka"]
PRODUCERS: tuple[str, ...] = ("auto", "native", "librdkafka")


@dataclass(frozen=True)
class WriteOptions:
    bootstrap_servers: str
    kafka_params: dict[str, str] = field(default_factory=dict)
    topic: Optional[str] = None
    producer: Producer = "auto"                 # how executors produce (see sparklog.writer)
    exactly_once: bool = False                  # deliveryGuarantee=exactly-once: Kafka transactions
    transactional_id_prefix: str = "pylog-sink-"
    transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS
    security: ClientSecurity | None = ClientSecurity()

    @property
    def librdkafka_params(self) -> dict[str, str]:
        return librdkafka_params(self.kafka_params, self.security)


# --- small typed parsers ---------------------------------------------------------------------------

def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def parse_bool(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise OptionError(f"Invalid value '{value}' for option '{name}': allowed values are true, false")


def parse_positive_int(name: str, value: str, message: Optional[str] = None) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise OptionError(f"Invalid value '{value}' for option '{name}': expected a positive integer") from None
    if n <= 0:
        raise OptionError(message or f"{name} must be positive")
    return n


_BYTE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30}


def parse_bytes(name: str, value: str) -> int:
    """A positive byte count: `1048576`, `512k`, `100m`, `2g` (binary units, as Spark's byte strings)."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", value)
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _BYTE_UNITS or int(m.group(1)) <= 0:
        raise OptionError(f"Invalid value '{value}' for option '{name}': expected a positive byte count such as "
                          "1048576, 512k, 100m or 2g")
    return int(m.group(1)) * _BYTE_UNITS[unit]


_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(name: str, value: str) -> int:
    """Spark's time strings: `15m`, `10s`, `500ms`, `1h`; a bare number is milliseconds."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", value.lower())
    if not m or m.group(2) not in ("", *_TIME_UNITS_MS):
        raise OptionError(f"Invalid value '{value}' for option '{name}': expected a duration such as "
                          "'500ms', '10s', '15m', '1h' (units: us, ms, s, m, min, h, d)")
    return int(int(m.group(1)) * _TIME_UNITS_MS.get(m.group(2) or "ms", 1))


def kafka_params(opts: Mapping[str, str]) -> dict[str, str]:
    """The `kafka.*` options with the prefix removed, minus Java-only settings (ignored with a warning).
    Security settings are still among them: `split_security` takes them out."""
    out: dict[str, str] = {}
    for k, v in opts.items():
        if k.startswith("kafka."):
            name = k[len("kafka."):]
            if name in JAVA_ONLY_KAFKA_SETTINGS:
                log.warning("Kafka option 'kafka.%s' has no librdkafka equivalent and is ignored", name)
                continue
            out[name] = v
    return out


def split_security(params: dict[str, str]) -> tuple[ClientSecurity | None, dict[str, str]]:
    """The connection's security (Kafka's Java names or librdkafka's, kafka_protocol.security) and the other
    settings. None: a SASL mechanism only librdkafka speaks (GSSAPI, OAUTHBEARER), whose settings stay as given."""
    mechanism = (params.get("sasl.mechanism") or params.get("sasl.mechanisms") or "").strip().upper()
    jaas_line = params.get("sasl.jaas.config", "")
    if (mechanism and mechanism not in SECURITY_MECHANISMS) or (
            jaas_line and not any(m in jaas_line for m in ("PlainLoginModule", "ScramLoginModule"))):
        if jaas_line:
            raise OptionError("Kafka option 'kafka.sasl.jaas.config' is a Java JAAS setting; only PlainLoginModule and "
                              "ScramLoginModule with username and password translate to the Kafka client used here. "
                              "For GSSAPI or OAUTHBEARER set the librdkafka options instead (e.g. "
                              "kafka.sasl.kerberos.service.name, kafka.sasl.oauthbearer.method)")
        return None, params
    try:
        security = ClientSecurity.from_settings(params)
    except SecuritySettingsError as e:
        raise OptionError(f"Kafka option 'kafka.{e}") from None
    return security, {k: v for k, v in params.items() if k not in SECURITY_KEYS}


def librdkafka_params(kafka: dict[str, str], security: ClientSecurity | None) -> dict[str, str]:
    """The settings a librdkafka client gets: the `kafka.*` options and the security in librdkafka's names."""
    if security is None:
        return dict(kafka)
    try:
        return {**kafka, **security.librdkafka()}
    except SecuritySettingsError as e:
        raise OptionError(f"Kafka option 'kafka.{e}") from None


# --- offsets specs -----------------------------------------------------------------------------------

def _timestamp_strategy(opts: Mapping[str, str]) -> str:
    raw = opts.get("startingoffsetsbytimestampstrategy", "error")
    v = raw.strip().lower()
    if v not in ("error", "latest"):
        raise OptionError(f"Invalid value '{raw}' for option 'startingOffsetsByTimestampStrategy': "
                          "allowed values are error, latest")
    return v


def offset_spec(opts: Mapping[str, str], ts_key: str, by_ts_key: str, offsets_key: str,
                default: off.OffsetSpec) -> off.OffsetSpec:
    """Spark's preference order: global timestamp, then per-partition timestamps, then offsets."""
    strategy = _timestamp_strategy(opts)
    if ts_key in opts:
        raw = opts[ts_key].strip()
        try:
            return off.GlobalTimestampSpec(int(raw), strategy)
        except ValueError:
            raise OptionError(f"Expected a single long value, got {raw}") from None
    if by_ts_key in opts:
        try:
            return off.SpecificTimestampsSpec(off.parse_partition_timestamps(opts[by_ts_key].strip()), strategy)
        except ValueError as e:
            raise OptionError(f"Invalid value for option '{by_ts_key}': {e}") from None
    if offsets_key in opts:
        raw = opts[offsets_key].strip()
        if raw.lower() == "latest":
            return off.LatestSpec()
        if raw.lower() == "earliest":
            return off.EarliestSpec()
        try:
            return off.SpecificOffsetsSpec(off.parse_partition_offsets(raw))
        except ValueError as e:
            raise OptionError(f"Invalid value for option '{offsets_key}': allowed values are earliest, latest "
                              f"or a JSON string of offsets per partition. {e}") from None
    return default


def starting_spec(opts: Mapping[str, str], default: off.OffsetSpec) -> off.OffsetSpec:
    return offset_spec(opts, "startingtimestamp", "startingoffsetsbytimestamp", "startingoffsets", default)


def ending_spec(opts: Mapping[str, str]) -> off.OffsetSpec:
    return offset_spec(opts, "endingtimestamp", "endingoffsetsbytimestamp", "endingoffsets", off.LatestSpec())


# --- validation ----------------------------------------------------------------------------------------

def _strategy(opts: Mapping[str, str]) -> Strategy:
    given = [k for k in STRATEGY_KEYS if k in opts]
    if not given:
        raise OptionError("One of the following options must be specified for Kafka source: "
                          "subscribe, subscribepattern, assign. See the docs for more details.")
    if len(given) > 1:
        raise OptionError("Only one of the following options can be specified for Kafka source: "
                          "subscribe, subscribepattern, assign. See the docs for more details.")
    kind = given[0]
    value = opts[kind]
    if kind == "assign":
        if not value.strip().startswith("{"):
            raise OptionError(f"No topicpartitions to assign as specified value for option 'assign' is '{value}'")
        try:
            return Strategy(kind, partitions=tuple(off.parse_partitions(value.strip())))
        except ValueError as e:
            raise OptionError(f"Invalid value for option 'assign': {e}") from None
    if kind == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OptionError(f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'")
        return Strategy(kind, topics=topics)
    pattern = value.strip()
    if not pattern:
        raise OptionError(f"Pattern to subscribe is empty as specified value for option 'subscribePattern' is '{value}'")
    try:
        re.compile(pattern)
    except re.error as e:
        raise OptionError(f"Invalid value '{value}' for option 'subscribePattern': not a valid regular expression ({e})") from None
    return Strategy(kind, pattern=pattern)


def _check_kafka_params(opts: Mapping[str, str]) -> None:
    if "kafka.auto.offset.reset" in opts:
        raise OptionError(AUTO_OFFSET_RESET_ERROR)
    if "kafka.key.deserializer" in opts:
        raise OptionError("Kafka option 'key.deserializer' is not supported as keys are deserialized as byte "
                          "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize the keys.")
    if "kafka.value.deserializer" in opts:
        raise OptionError("Kafka option 'value.deserializer' is not supported as values are deserialized as byte "
                          "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize the values.")
    for c in ("enable.auto.commit", "interceptor.classes"):
        if f"kafka.{c}" in opts:
            raise OptionError(f"Kafka option '{c}' is not supported")
    if "kafka.bootstrap.servers" not in opts or not opts["kafka.bootstrap.servers"].strip():
        raise OptionError("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer")
    if "kafka.group.id" in opts:
        if not opts["kafka.group.id"].strip():
            raise OptionError("Invalid value '' for option 'kafka.group.id': a consumer group id must not be "
                              "empty; remove the option to let each query generate its own group id")
        log.warning(CUSTOM_GROUP_ID_WARNING)
        if "groupidprefix" in opts:
            log.warning("Option groupIdPrefix will be ignored as option kafka.group.id has been set.")


def validate_general(options: Mapping[str, str]) -> dict[str, str]:
    """Checks shared by batch and streaming reads (Spark's `validateGeneralOptions`); returns lowercased options."""
    opts = _lower(options)
    _strategy(opts)
    if "minpartitions" in opts:
        parse_positive_int("minPartitions", opts["minpartitions"], "minPartitions must be positive")
    if "maxrecordsperpartition" in opts:
        parse_positive_int("maxRecordsPerPartition", opts["maxrecordsperpartition"],
                           "maxRecordsPerPartition must be positive")
    _check_kafka_params(opts)
    mn = parse_positive_int("minOffsetsPerTrigger", opts["minoffsetspertrigger"]) if "minoffsetspertrigger" in opts else None
    mx = parse_positive_int("maxOffsetsPerTrigger", opts["maxoffsetspertrigger"]) if "maxoffsetspertrigger" in opts else None
    if mn is not None and mx is not None and mn > mx:
        raise OptionError(f"The value of minOffsetPerTrigger({mn}) is higher than the maxOffsetsPerTrigger({mx}).")
    if "maxtriggerdelay" in opts:
        parse_duration_ms("maxTriggerDelay", opts["maxtriggerdelay"])
    if "maxbytespertrigger" in opts:
        parse_bytes("maxBytesPerTrigger", opts["maxbytespertrigger"])
        if split_security(kafka_params(opts))[0] is None:
            raise OptionError("maxBytesPerTrigger reads partition sizes with pylog's own client, which speaks PLAIN "
                              "and SCRAM logins only; use maxOffsetsPerTrigger with GSSAPI or OAUTHBEARER")
    for name in ("failOnDataLoss", "includeHeaders", "failOnMissingTopic"):
        if name.lower() in opts:
            parse_bool(name, opts[name.lower()])
    if "committogroup" in opts and not opts["committogroup"].strip():
        raise OptionError("Invalid value '' for option 'commitToGroup': expected a consumer group id")
    _timestamp_strategy(opts)
    return opts


def _check_unmatched(start: off.OffsetSpec, end: off.OffsetSpec) -> None:
    """Spark's `checkOffsetLimitValidity` for batch queries."""
    pairs: list[tuple[dict, dict, str]] = []
    if isinstance(start, off.SpecificOffsetsSpec) and isinstance(end, off.SpecificOffsetsSpec):
        pairs.append((start.offsets, end.offsets, "offset"))
    if isinstance(start, off.SpecificTimestampsSpec) and isinstance(end, off.SpecificTimestampsSpec):
        pairs.append((start.timestamps, end.timestamps, "timestamp"))
    for s, e, what in pairs:
        if set(s) != set(e):
            raise OptionError("Kafka data source in batch query should include the same topic partitions in start "
                              f"offset and end offset. Start {what}: {sorted(s)}, end {what}: {sorted(e)}")
        for tp, so in s.items():
            eo = e[tp]
            if so >= 0 and eo >= 0 and so > eo:
                raise OptionError(f"The start {what} {so} for topic {tp[0]} partition {tp[1]} is greater than the "
                                  f"end {what} {eo} in the batch query. Please check the options.")


def _client_choice(name: str, value: str, allowed: tuple[str, ...], security: ClientSecurity | None) -> str:
    """The `fetcher` / `producer` option: auto (native unless the connection needs a SASL mechanism only
    librdkafka speaks), native, librdkafka."""
    v = value.strip().lower()
    if v not in allowed:
        raise OptionError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    if v == "native" and security is None:
        raise OptionError(f"{name} 'native' logs in with PLAIN or SCRAM only; this connection's SASL mechanism needs "
                          f"librdkafka: use {name} 'auto' or 'librdkafka'")
    return v


def _fetcher(value: str, security: ClientSecurity | None) -> Fetcher:
    return _client_choice("fetcher", value, FETCHERS, security)   # type: ignore[return-value]


def _read_options(opts: dict[str, str], starting: off.OffsetSpec, ending: off.OffsetSpec, prefix: str) -> ReadOptions:
    security, params = split_security(kafka_params(opts))
    custom = "group.id" in params
    group_id = params.pop("group.id", None) or f"{opts.get('groupidprefix', prefix)}-{uuid.uuid4()}"
    remote = _remote_storage(opts)
    return ReadOptions(
        bootstrap_servers=params.pop("bootstrap.servers"),
        kafka_params=params,
        strategy=_strategy(opts),
        starting=starting,
        ending=ending,
        fail_on_data_loss=parse_bool("failOnDataLoss", opts.get("failondataloss", "true")),
        include_headers=parse_bool("includeHeaders", opts.get("includeheaders", "false")),
        min_partitions=int(opts["minpartitions"]) if "minpartitions" in opts else None,
        max_records_per_partition=int(opts["maxrecordsperpartition"]) if "maxrecordsperpartition" in opts else None,
        max_offsets_per_trigger=int(opts["maxoffsetspertrigger"]) if "maxoffsetspertrigger" in opts else None,
        max_bytes_per_trigger=parse_bytes("maxBytesPerTrigger", opts["maxbytespertrigger"])
        if "maxbytespertrigger" in opts else None,
        min_offsets_per_trigger=int(opts["minoffsetspertrigger"]) if "minoffsetspertrigger" in opts else None,
        max_trigger_delay_ms=parse_duration_ms("maxTriggerDelay", opts.get("maxtriggerdelay", DEFAULT_MAX_TRIGGER_DELAY)),
        poll_timeout_ms=parse_positive_int("kafkaConsumer.pollTimeoutMs", opts.get("kafkaconsumer.polltimeoutms", str(DEFAULT_POLL_TIMEOUT_MS))),
        fetch_offset_retries=parse_positive_int("fetchOffset.numRetries", opts.get("fetchoffset.numretries", str(DEFAULT_FETCH_OFFSET_RETRIES))),
        fetch_offset_retry_ms=parse_positive_int("fetchOffset.retryIntervalMs", opts.get("fetchoffset.retryintervalms", str(DEFAULT_FETCH_OFFSET_RETRY_MS))),
        group_id=group_id,
        custom_group_id=custom,
        commit_to_group=opts["committogroup"].strip() if "committogroup" in opts else None,
        fetcher=_fetcher(opts.get("fetcher", "auto"), security),
        fail_on_missing_topic=parse_bool("failOnMissingTopic", opts.get("failonmissingtopic", "true")),
        security=security,
        progress_address=_progress_address(opts.get("progressaddress")),
        remote_storage=remote,
        remote_storage_env=_remote_storage_env(opts) if remote else (),
    )


def _remote_storage_env(opts: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The AWS_* variables the executors' store client takes: this process's, overridden by remoteStorage.*."""
    env = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    for key, value in opts.items():
        if key.startswith("remotestorage."):
            name = key.removeprefix("remotestorage.")
            if name not in REMOTE_STORAGE_KEYS:
                raise OptionError(f"Unknown option 'remoteStorage.{name}' for the pylog source: the store settings "
                                  f"are {', '.join('remoteStorage.' + k for k in REMOTE_STORAGE_KEYS)}")
            env[name.upper()] = value
    return tuple(sorted(env.items()))


def _remote_storage(opts: Mapping[str, str]) -> str | None:
    """`remoteStorage` (the brokers' remote.log.storage.url) unless `directReads` is false: where executors read
    tiered offsets themselves."""
    url = opts.get("remotestorage", "").strip() or None
    if not parse_bool("directReads", opts.get("directreads", "true")):
        return None
    if url is not None and not (url.startswith("s3://") or "://" not in url or url.startswith("file://")):
        raise OptionError(f"option remoteStorage must be the brokers' remote.log.storage.url (s3://bucket/prefix or "
                          f"a directory), got {url!r}")
    return url


def _progress_address(value: str | None) -> str | None:
    if value is None:
        return None
    from sparklog.read_progress import parse_address

    try:
        parse_address(value)
    except ValueError as e:
        raise OptionError(f"{e} (the jobs set it for their progress bars; leave it out otherwise)") from None
    return value.strip()


def parse_stream_options(options: Mapping[str, str]) -> ReadOptions:
    """Options of `spark.readStream.format("pylog")` (Spark's `validateStreamOptions`); starts at latest."""
    check_known(options, SOURCE_OPTIONS, "pylog source", prefixes=SOURCE_PREFIXES)
    opts = _lower(options)
    if "endingoffsets" in opts:
        raise OptionError("ending offset not valid in streaming queries")
    if "endingoffsetsbytimestamp" in opts or "endingtimestamp" in opts:
        raise OptionError("ending timestamp not valid in streaming queries")
    opts = validate_general(opts)
    return _read_options(opts, starting_spec(opts, off.LatestSpec()), off.LatestSpec(), "spark-kafka-source")


def parse_batch_options(options: Mapping[str, str]) -> ReadOptions:
    """Options of `spark.read.format("pylog")` (Spark's `validateBatchOptions`); earliest to latest."""
    check_known(options, SOURCE_OPTIONS, "pylog source", prefixes=SOURCE_PREFIXES)
    opts = _lower(options)
    start = starting_spec(opts, off.EarliestSpec())
    if isinstance(start, off.LatestSpec):
        raise OptionError("starting offset can't be latest for batch queries on Kafka")
    if isinstance(start, off.SpecificOffsetsSpec):
        for tp, o in start.offsets.items():
            if o == off.LATEST:
                raise OptionError(f"startingOffsets for {off.format_tp(tp)} can't be latest for batch queries on Kafka")
    end = ending_spec(opts)
    if isinstance(end, off.EarliestSpec):
        raise OptionError("ending offset can't be earliest for batch queries on Kafka")
    if isinstance(end, off.SpecificOffsetsSpec):
        for tp, o in end.offsets.items():
            if o == off.EARLIEST:
                raise OptionError(f"ending offset for {off.format_tp(tp)} can't be earliest for batch queries on Kafka")
    _check_unmatched(start, end)
    opts = validate_general(opts)
    for name in ("maxOffsetsPerTrigger", "maxBytesPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
        if name.lower() in opts:
            log.warning("%s option ignored in batch queries", name)
    return _read_options(opts, start, end, "spark-kafka-relation")


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Options of `df.write.format("pylog")` and `writeStream` (Spark's `kafkaParamsForProducer`)."""
    check_known(options, SINK_OPTIONS, "pylog sink")
    opts = _lower(options)
    if "kafka.key.serializer" in opts:
        raise OptionError("Kafka option 'key.serializer' is not supported as keys are serialized with ByteArraySerializer.")
    if "kafka.value.serializer" in opts:
        raise OptionError("Kafka option 'value.serializer' is not supported as value are serialized with ByteArraySerializer.")
    if "kafka.bootstrap.servers" not in opts or not opts["kafka.bootstrap.servers"].strip():
        raise OptionError("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer")
    security, params = split_security(kafka_params(opts))
    topic = opts["topic"].strip() if "topic" in opts else None
    if topic == "":
        raise OptionError("Invalid value '' for option 'topic': expected a topic name")
    producer = _client_choice("producer", opts.get("producer", "auto"), PRODUCERS, security)
    guarantee = opts.get("deliveryguarantee", "at-least-once").strip().lower()
    if guarantee not in DELIVERY_GUARANTEES:
        raise OptionError(f"Invalid value '{opts['deliveryguarantee']}' for option 'deliveryGuarantee': allowed "
                          f"values are {', '.join(DELIVERY_GUARANTEES)}")
    exactly_once = guarantee == "exactly-once"
    if "transactional.id" in params:
        raise OptionError("Kafka option 'transactional.id' is not supported: set deliveryGuarantee=exactly-once, "
                          "and the sink derives one transactional id per task (transactionalIdPrefix sets its prefix)")
    timeout = params.pop("transaction.timeout.ms", None)
    prefix = opts.get("transactionalidprefix", "pylog-sink-")
    if exactly_once and producer == "librdkafka":
        raise OptionError("deliveryGuarantee=exactly-once needs the sink's own producer: remove producer=librdkafka")
    write = WriteOptions(bootstrap_servers=params.pop("bootstrap.servers"), kafka_params=params, topic=topic,
                         producer=producer, exactly_once=exactly_once,  # type: ignore[arg-type]
                         transactional_id_prefix=prefix,
                         transaction_timeout_ms=DEFAULT_TRANSACTION_TIMEOUT_MS if timeout is None
                         else parse_positive_int("kafka.transaction.timeout.ms", timeout), security=security)
    if exactly_once and not native_producer(write):
        raise OptionError("deliveryGuarantee=exactly-once needs the sink's own producer, which logs in with PLAIN or "
                          "SCRAM only: this connection's SASL mechanism is not supported with it")
    return write


def native_producer(opts: WriteOptions) -> bool:
    """Whether the sink's own Produce client writes, rather than librdkafka (SASL mechanisms it lacks)."""
    return opts.producer == "native" or (opts.producer == "auto" and opts.security is not None)
