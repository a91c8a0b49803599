"""The pylog-delta options the jobs set (`writer_options`) read back as the sink reads them (`SinkOptions`)."""
from __future__ import annotations

import pytest

from connectors.delta_sink import SinkOptionError, SinkOptions, writer_options
from connectors.errors import UnsupportedLocationError
from connectors.table_location import ENV_KEYS, TableLocation


def test_typed_values_round_trip_through_the_sinks_options(tmp_path):
    opts = SinkOptions(writer_options(str(tmp_path / "t"), "app", partition_by=["topic", "day"], merge_schema=True,
                                      generation=2, checkpoint=str(tmp_path / "ckpt"), batch_id=7, read_version=4,
                                      offsets={("b", 1): 5, ("a", 0): 23}, start_offsets={("b", 1): 1, ("a", 0): 20},
                                      topic_ids={"a": "id-a"}))
    assert (str(opts.path), opts.app_id, opts.partition_by, opts.merge_schema) == (str(tmp_path / "t"), "app",
                                                                              ["topic", "day"], True)
    assert (opts.generation, opts.checkpoint, opts.batch_id, opts.read_version) == (2, str(tmp_path / "ckpt"), 7, 4)
    assert opts.offsets == {("a", 0): 23, ("b", 1): 5} and opts.topic_ids == {"a": "id-a"}
    assert opts.start_offsets == {("a", 0): 20, ("b", 1): 1}


def test_an_s3_tables_storage_options_travel_with_it_and_win_over_the_environment(monkeypatch):
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://env-store:9000")
    loc = TableLocation.of("s3a://bucket/tables/events/", {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"})
    opts = SinkOptions(writer_options(loc, "app"))
    assert opts.path == loc and opts.path.uri == "s3://bucket/tables/events"
    assert writer_options(loc, "app")["storage.aws_endpoint_url"] == "http://127.0.0.1:9000"
    resolved = opts.path.storage_options()
    assert resolved["aws_endpoint_url"] == "http://127.0.0.1:9000" and resolved["aws_region"] == "eu-west-1"
    # exactly-once on S3 needs its conditional writes, unless the user chose delta-rs's unsafe rename; its DynamoDB
    # locking is gone from delta-rs 1.x (it would log an error and commit with no safety): refused
    assert resolved["aws_conditional_put"] == "etag"
    renamed = TableLocation.of("s3://b/t", {"aws_s3_allow_unsafe_rename": "true"}).storage_options()
    assert "aws_conditional_put" not in renamed
    with pytest.raises(UnsupportedLocationError, match="no longer supports DynamoDB locking"):
        TableLocation.of("s3://b/t", {"aws_s3_locking_provider": "dynamodb"}).storage_options()
    assert TableLocation.of("/tmp/t").storage_options() == {}


def test_a_scheme_the_sink_cannot_write_is_named():
    with pytest.raises(UnsupportedLocationError, match="not gs://"):
        SinkOptions({"path": "gs://bucket/t"})
    with pytest.raises(UnsupportedLocationError, match="needs a bucket"):
        TableLocation.of("s3:///t")
    with pytest.raises(SinkOptionError, match="Unknown option 'storag.aws_region'"):
        SinkOptions({"path": "s3://b/t", "storag.aws_region": "x"})


def test_unset_values_are_left_out_and_offsets_are_sparks_json(tmp_path):
    assert writer_options("/t", "app") == {"path": "/t", "appId": "app", "mergeSchema": "false"}
    assert writer_options("/t", "app", offsets={("t", 1): 9, ("t", 0): 3})["offsets"] == '{"t":{"0":3,"1":9}}'
    assert SinkOptions(writer_options("/t", "app")).offsets is None


def test_offsets_that_are_not_sparks_offset_json_are_named():
    with pytest.raises(SinkOptionError, match="option 'offsets' must be JSON like"):
        SinkOptions({"path": "/t", "offsets": '{"t":{"0":"x"}}'})


def test_end_offsets_need_their_start_and_misspelt_options_are_named():
    with pytest.raises(SinkOptionError, match="'offsets' needs option 'startOffsets'"):
        SinkOptions({"path": "/t", "offsets": '{"t":{"0":3}}'})
    with pytest.raises(SinkOptionError, match="Unknown option 'appID2'.*did you mean 'appId'"):
        SinkOptions({"path": "/t", "appID2": "x"})


def test_hadoop_s3a_settings_name_the_same_store_for_the_tables_bucket_only(monkeypatch):
    for key in ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    conf = TableLocation.of("s3://lake/tables/t", {"aws_endpoint_url": "http://127.0.0.1:9000", "aws_access_key_id": "k",
                                                   "aws_secret_access_key": "s", "aws_allow_http": "true"}).hadoop_s3a_conf()
    assert conf == {"fs.s3a.bucket.lake.endpoint": "http://127.0.0.1:9000", "fs.s3a.bucket.lake.access.key": "k",
                    "fs.s3a.bucket.lake.secret.key": "s", "fs.s3a.bucket.lake.endpoint.region": "us-east-1",
                    "fs.s3a.bucket.lake.path.style.access": "true", "fs.s3a.bucket.lake.connection.ssl.enabled": "false"}
    # AWS itself, virtual-hosted, with a session token; credentials from the environment are S3A's own chain
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    conf = TableLocation.of("s3://b2/t", {"aws_virtual_hosted_style_request": "true", "aws_access_key_id": "k",
                                          "aws_secret_access_key": "s", "aws_session_token": "tok"}).hadoop_s3a_conf()
    assert conf["fs.s3a.bucket.b2.path.style.access"] == "false" and "fs.s3a.bucket.b2.endpoint" not in conf
    assert conf["fs.s3a.bucket.b2.endpoint.region"] == "eu-west-1" and conf["fs.s3a.bucket.b2.session.token"] == "tok"
    assert conf["fs.s3a.bucket.b2.aws.credentials.provider"].endswith("TemporaryAWSCredentialsProvider")
    assert not any("ssl" in k for k in conf)
    assert TableLocation.of("/tmp/t").hadoop_s3a_conf() == {}
