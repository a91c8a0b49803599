"""Other Kafka-protocol servers started beside pylog by the tests and the benchmarks (not the product).

`peers.kafka.KafkaBroker` runs Apache Kafka itself (KRaft, one node) from the jars `make` fetches, and
`peers.kafka.kafka_zk_cluster` N Kafka brokers in ZooKeeper mode (`peers.zk_cluster.ZkCluster`: a local
ZooKeeper plus brokers of any kind, pylog's included, with stop/kill/restart and leader lookup);
`peers.tansu.TansuProcess` runs Tansu, the Rust broker the benchmarks compare against. All build on
the product's launcher base, `pylog.launch.process.ServerProcess`. The product never imports this package
(tests/unit/test_layers.py), and it is not part of the distribution.
"""
