"""Running pylog's processes on this machine: a broker (`process.BrokerProcess`, what `make demo`, the
tests and the benchmarks start), a development ZooKeeper and a development cluster (`pylog cluster up`)."""
