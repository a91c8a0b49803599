"""Other Kafka-protocol servers started beside pylog by the tests and the benchmarks (not the product).

`peers.kafka.KafkaBroker` runs Apache Kafka itself (KRaft, one node) from the jars `make` fetches;
`peers.tansu.TansuProcess` runs Tansu, the Rust broker the benchmarks compare against. Both build on
the product's launcher base, `broker.process.ServerProcess`. The product never imports this package
(tests/unit/test_layers.py), and it is not part of the distribution.
"""
