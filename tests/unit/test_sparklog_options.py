"""Option parsing of format("pylog"): Spark Kafka's names, defaults and errors (no Spark, no broker)."""
from __future__ import annotations

import pytest

from sparklog import offsets as off
from sparklog.options import OptionError, parse_batch_options, parse_stream_options, parse_write_options

BASE = {"kafka.bootstrap.servers": "h:1", "subscribe": "a, b"}


def test_defaults_match_spark_kafka():
    s = parse_stream_options(BASE)
    b = parse_batch_options(BASE)
    assert isinstance(s.starting, off.LatestSpec) and isinstance(b.starting, off.EarliestSpec)
    assert isinstance(b.ending, off.LatestSpec)
    assert s.fail_on_data_loss and not s.include_headers
    assert s.max_trigger_delay_ms == 15 * 60 * 1000
    assert s.strategy.topics == ("a", "b")
    assert s.group_id.startswith("spark-kafka-source-") and b.group_id.startswith("spark-kafka-relation-")


def test_option_names_are_case_insensitive_and_kafka_settings_pass_through():
    o = parse_stream_options({"Kafka.Bootstrap.Servers": "h:1", "SUBSCRIBEPATTERN": "ev.*", "kafka.client.id": "me",
                              "MaxOffsetsPerTrigger": "7", "includeHeaders": "TRUE", "maxTriggerDelay": "30s"})
    assert o.strategy.kind == "subscribepattern" and o.strategy.pattern == "ev.*"
    assert o.kafka_params == {"client.id": "me"} and o.bootstrap_servers == "h:1"
    assert o.max_offsets_per_trigger == 7 and o.include_headers and o.max_trigger_delay_ms == 30_000


def test_starting_spec_preference_is_global_timestamp_then_per_partition_then_offsets():
    o = parse_batch_options({**BASE, "startingTimestamp": "5", "startingOffsetsByTimestamp": '{"a":{"0":1}}',
                             "startingOffsets": "earliest"})
    assert o.starting == off.GlobalTimestampSpec(5, "error")
    o = parse_batch_options({**BASE, "startingOffsetsByTimestamp": '{"a":{"0":1}}', "startingOffsets": "earliest",
                             "startingOffsetsByTimestampStrategy": "LATEST"})
    assert o.starting == off.SpecificTimestampsSpec({("a", 0): 1}, "latest")


def test_assign_parses_partitions():
    o = parse_batch_options({"kafka.bootstrap.servers": "h:1", "assign": '{"t":[0,2]}'})
    assert o.strategy.partitions == (("t", 0), ("t", 2))
    with pytest.raises(OptionError, match="Expected e.g."):
        parse_batch_options({"kafka.bootstrap.servers": "h:1", "assign": '{"t":"0"}'})


@pytest.mark.parametrize("extra,message", [
    ({"startingOffsets": '{"a":{"0":-1}}'}, "startingOffsets for a-0 can't be latest for batch queries"),
    ({"endingOffsets": '{"a":{"0":-2}}'}, "ending offset for a-0 can't be earliest for batch queries"),
    ({"startingOffsets": '{"a":{"0":1}}', "endingOffsets": '{"a":{"1":5}}'}, "should include the same topic partitions"),
    ({"maxRecordsPerPartition": "-3"}, "maxRecordsPerPartition must be positive"),
    ({"subscribePattern": "(", "subscribe": None}, "not a valid regular expression"),
])
def test_batch_rejections(extra, message):
    opts = {**BASE, **extra}
    opts = {k: v for k, v in opts.items() if v is not None}
    with pytest.raises(OptionError, match=message.replace("(", r"\(")):
        parse_batch_options(opts)


def test_custom_group_id_is_used_as_is():
    o = parse_stream_options({**BASE, "kafka.group.id": "mine", "groupIdPrefix": "ignored"})
    assert o.group_id == "mine" and o.custom_group_id and "group.id" not in o.kafka_params


def test_write_options():
    w = parse_write_options({"kafka.bootstrap.servers": "h:1", "topic": " out ", "kafka.linger.ms": "50"})
    assert w.topic == "out" and w.kafka_params == {"linger.ms": "50"}
    with pytest.raises(OptionError, match="value.serializer"):
        parse_write_options({"kafka.bootstrap.servers": "h:1", "kafka.value.serializer": "x"})
    with pytest.raises(OptionError, match="must be specified for configuring Kafka producer"):
        parse_write_options({"topic": "t"})


JAAS_PLAIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
              'password="s3 \\"cret\\"";')
JAAS_SCRAM = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="b";'


def test_sparks_security_options_reach_the_native_client_and_librdkafka_in_their_own_names():
    opts = parse_batch_options({"kafka.bootstrap.servers": "b:1", "subscribe": "t", "kafka.security.protocol": "SASL_SSL",
                                "kafka.sasl.jaas.config": JAAS_PLAIN, "kafka.ssl.truststore.location": "/ca.pem",
                                "kafka.ssl.truststore.type": "PEM"})
    assert opts.security is not None and opts.security.protocol == "SASL_SSL"
    assert (opts.security.mechanism, opts.security.username, opts.security.password) == ("PLAIN", "alice", 's3 "cret"')
    assert dict(opts.security.ssl_settings) == {"ssl.truststore.location": "/ca.pem", "ssl.truststore.type": "PEM"}
    assert not any(k.startswith(("sasl.", "ssl.", "security.")) for k in opts.kafka_params)
    rd = opts.librdkafka_params
    assert (rd["sasl.username"], rd["sasl.password"], rd["sasl.mechanism"]) == ("alice", 's3 "cret"', "PLAIN")
    assert rd["ssl.ca.location"] == "/ca.pem" and "ssl.truststore.location" not in rd and "sasl.jaas.config" not in rd
    assert "s3" not in repr(opts.security)
    from sparklog.reader_settings import ReaderSettings
    settings = ReaderSettings.from_options(opts)
    assert settings.native and settings.client is not None and settings.client.security == opts.security


def test_security_options_that_cannot_work_are_rejected_with_what_to_do():
    base = {"kafka.bootstrap.servers": "b:1", "subscribe": "t"}
    with pytest.raises(OptionError, match="GSSAPI or OAUTHBEARER"):
        parse_batch_options({**base, "kafka.sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;"})
    with pytest.raises(OptionError, match="SCRAM-SHA-256 or SCRAM-SHA-512"):
        parse_batch_options({**base, "kafka.security.protocol": "SASL_SSL", "kafka.sasl.jaas.config": JAAS_SCRAM})
    with pytest.raises(OptionError, match="needs a user and password"):
        parse_batch_options({**base, "kafka.security.protocol": "SASL_PLAINTEXT"})
    with pytest.raises(OptionError, match="security.protocol=TLS"):
        parse_batch_options({**base, "kafka.security.protocol": "TLS"})
    with pytest.raises(OptionError, match="librdkafka reads a PEM truststore only"):
        parse_batch_options({**base, "kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": "/t.p12",
                             "fetcher": "librdkafka"}).librdkafka_params
    scram = parse_batch_options({**base, "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
                                 "kafka.sasl.jaas.config": JAAS_SCRAM})
    assert scram.security is not None and (scram.security.username, scram.security.mechanism) == ("a", "SCRAM-SHA-512")


def test_the_native_fetcher_speaks_tls_and_sasl_and_librdkafka_keeps_the_mechanisms_it_alone_has():
    from sparklog.reader_settings import ReaderSettings

    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    assert ReaderSettings.from_options(parse_batch_options(base)).native
    for extra in ({"kafka.security.protocol": "SSL"},
                  {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.jaas.config": JAAS_PLAIN}):
        assert ReaderSettings.from_options(parse_batch_options({**base, **extra})).native, extra
    for extra in ({"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "GSSAPI"}, {"fetcher": "librdkafka"}):
        s = ReaderSettings.from_options(parse_batch_options({**base, **extra}))
        assert not s.native and s.client is None, extra
    gssapi = parse_batch_options({**base, "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "GSSAPI",
                                  "kafka.sasl.kerberos.service.name": "kafka"})
    assert gssapi.security is None and gssapi.librdkafka_params["sasl.mechanism"] == "GSSAPI"
    with pytest.raises(OptionError, match="fetcher 'native' logs in with PLAIN or SCRAM only"):
        parse_batch_options({**base, "fetcher": "native", "kafka.security.protocol": "SASL_SSL",
                             "kafka.sasl.mechanism": "OAUTHBEARER"})
    with pytest.raises(OptionError, match="fetcher must be one of auto, native, librdkafka, not 'fast'"):
        parse_batch_options({**base, "fetcher": "fast"})


def test_native_client_settings_come_from_kafka_options():
    from sparklog.reader_settings import ReaderSettings

    s = ReaderSettings.from_options(parse_batch_options({
        "kafka.bootstrap.servers": "h:1", "subscribe": "t", "kafka.isolation.level": "read_committed",
        "kafka.max.partition.fetch.bytes": "1024", "kafka.client.id": "me"}))
    assert s.client is not None and s.client.read_committed and s.client.partition_max_bytes == 1024
    assert s.client.client_id == "me"
    with pytest.raises(OptionError, match="kafka.isolation.level"):
        ReaderSettings.from_options(parse_batch_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t",
                                                         "kafka.isolation.level": "dirty"}))
    with pytest.raises(OptionError, match="kafka.fetch.max.bytes.*integer"):
        ReaderSettings.from_options(parse_batch_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t",
                                                         "kafka.fetch.max.bytes": "lots"}))


def test_max_bytes_per_trigger_takes_byte_strings():
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    assert parse_stream_options({**base, "maxBytesPerTrigger": "100m"}).max_bytes_per_trigger == 100 << 20
    assert parse_stream_options({**base, "maxBytesPerTrigger": "4096"}).max_bytes_per_trigger == 4096
    for bad in ("0", "-1", "10x", "lots"):
        with pytest.raises(OptionError, match="maxBytesPerTrigger.*positive byte count"):
            parse_stream_options({**base, "maxBytesPerTrigger": bad})


def test_the_native_producer_speaks_tls_and_sasl_and_librdkafka_keeps_the_mechanisms_it_alone_has():
    from sparklog.options import native_producer

    base = {"kafka.bootstrap.servers": "h:1", "topic": "t"}
    assert native_producer(parse_write_options(base))
    assert native_producer(parse_write_options({**base, "producer": "NATIVE"}))
    assert native_producer(parse_write_options({**base, "kafka.security.protocol": "SSL"}))
    for extra in ({"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "GSSAPI"}, {"producer": "librdkafka"}):
        assert not native_producer(parse_write_options({**base, **extra})), extra
    with pytest.raises(OptionError, match="producer 'native' logs in with PLAIN or SCRAM only"):
        parse_write_options({**base, "producer": "native", "kafka.security.protocol": "SASL_SSL",
                             "kafka.sasl.mechanism": "GSSAPI"})
    with pytest.raises(OptionError, match="producer must be one of auto, native, librdkafka, not 'rust'"):
        parse_write_options({**base, "producer": "rust"})


def test_native_producer_settings_follow_the_java_clients_rules():
    from sparklog.client_configs import native_producer

    base = {"kafka.bootstrap.servers": "h:1", "topic": "t"}
    c = native_producer(parse_write_options(base))
    assert (c.acks, c.idempotent, c.codec, c.max_request_bytes) == (-1, True, 0, 1_048_576)
    assert c.max_batch_bytes <= c.max_request_bytes - 512     # a batch always fits in a request
    c = native_producer(parse_write_options({**base, "kafka.acks": "1", "kafka.compression.type": "LZ4",
                                             "kafka.max.request.size": "100000", "kafka.message.timeout.ms": "5000"}))
    assert (c.acks, c.idempotent, c.codec, c.max_batch_bytes, c.delivery_timeout_ms) == (1, False, 3, 99_488, 5000)
    with pytest.raises(OptionError, match="Must set kafka.acks to all in order to use the idempotent producer"):
        native_producer(parse_write_options({**base, "kafka.acks": "0", "kafka.enable.idempotence": "true"}))
    with pytest.raises(OptionError, match="'kafka.compression.type': none, gzip, snappy, lz4, zstd"):
        native_producer(parse_write_options({**base, "kafka.compression.type": "brotli"}))
    with pytest.raises(OptionError, match="'kafka.acks'"):
        native_producer(parse_write_options({**base, "kafka.acks": "most"}))


def test_misspelt_and_unknown_options_are_errors_naming_the_closest_option():
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    with pytest.raises(OptionError, match="Unknown option 'startingOffset' for the pylog source: did you mean "
                                          "'startingOffsets'"):
        parse_stream_options({**base, "startingOffset": "earliest"})
    with pytest.raises(OptionError, match="did you mean 'maxOffsetsPerTrigger'"):
        parse_batch_options({**base, "maxOffsetPerTrigger": "5"})
    with pytest.raises(OptionError, match="Unknown option 'frobnicate' .* the options are subscribe"):
        parse_stream_options({**base, "frobnicate": "1"})
    with pytest.raises(OptionError, match="Unknown option 'topics' for the pylog sink: did you mean 'topic'"):
        parse_write_options({"kafka.bootstrap.servers": "h:1", "topics": "t"})
    # kafka.* passes through, option names are case-insensitive, and Spark's own path/checkpointLocation are fine
    parse_stream_options({**base, "kafka.client.id": "x", "STARTINGOFFSETS": "earliest", "path": "p",
                          "checkpointLocation": "c"})


def test_an_unreachable_bootstrap_server_fails_in_seconds_naming_it():
    import socket
    import time

    from sparklog.reachability import BrokerUnreachableError, check_reachable

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                   # nothing listens there now
    started = time.monotonic()
    with pytest.raises(BrokerUnreachableError, match=rf"cannot reach any Kafka broker .*127.0.0.1:{port}: "
                                                     r"Connection refused.*check the host and port"):
        check_reachable(f"127.0.0.1:{port}", timeout_s=1.0)
    assert time.monotonic() - started < 5
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    try:
        check_reachable(f"127.0.0.1:{port},127.0.0.1:{listening.getsockname()[1]}", timeout_s=1.0)
    finally:
        listening.close()


def test_a_user_error_leaves_an_entry_point_without_our_frames_and_a_bug_keeps_them():
    import traceback

    from sparklog.errors import UserError, in_one_line

    def deep() -> None:
        raise OptionError("option 'x' must be a number, got 'y'")

    @in_one_line
    class Source:
        def reader(self) -> None:
            deep()

        def read(self, bug: bool):
            yield 1
            if bug:
                raise KeyError("a bug")
            deep()

    with pytest.raises(UserError) as one:
        Source().reader()
    frames = traceback.extract_tb(one.value.__traceback__)
    assert [f.name for f in frames][1:] == ["call"], frames          # the caller, then neither reader nor deep
    with pytest.raises(OptionError) as gen:
        list(Source().read(False))
    assert "deep" not in [f.name for f in traceback.extract_tb(gen.value.__traceback__)]
    with pytest.raises(KeyError) as bug:
        list(Source().read(True))
    assert "read" in [f.name for f in traceback.extract_tb(bug.value.__traceback__)]


def test_remote_storage_turns_direct_reads_on_with_the_stores_settings_over_the_environment(monkeypatch):
    from sparklog.reader_settings import ReaderSettings
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "from-env")
    assert parse_batch_options(BASE).remote_storage is None
    o = parse_batch_options({**BASE, "remoteStorage": "s3://b/tiered", "remoteStorage.aws_access_key_id": "opt"})
    assert o.remote_storage == "s3://b/tiered"
    env = dict(o.remote_storage_env)
    assert (env["AWS_REGION"], env["AWS_ACCESS_KEY_ID"]) == ("eu-west-1", "opt"), "the option wins over the variable"
    assert ReaderSettings.from_options(o).remote_storage == "s3://b/tiered"
    assert parse_batch_options({**BASE, "remoteStorage": "s3://b/t", "directReads": "false"}).remote_storage is None
    with pytest.raises(OptionError, match="remoteStorage.aws_endpoint_url"):
        parse_batch_options({**BASE, "remoteStorage": "s3://b/t", "remoteStorage.endpoint": "x"})
    with pytest.raises(OptionError, match="remote.log.storage.url"):
        parse_batch_options({**BASE, "remoteStorage": "gs://b/t"})


def test_a_producer_snapshot_names_the_transactions_open_at_its_offset():
    import json
    from kafka_protocol.remote_segments import open_transaction_starts
    snap = json.dumps({"version": 2, "offset": 900, "producers": [
        {"id": 1, "epoch": 0, "txn_first_offset": 850}, {"id": 2, "epoch": 0, "txn_first_offset": None}]}).encode()
    assert open_transaction_starts(snap) == [850]
