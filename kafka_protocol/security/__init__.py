"""Kafka's security vocabulary, shared by the broker and the project's clients (the Spark source, the tools).

Sans-I/O like the rest of `kafka_protocol`: SASL mechanisms as state machines fed the bytes of each token
(`scram`, `plain`), the JAAS strings Kafka configures them with (`jaas`), principals and Kafka's mapping
rules for certificate names (`principal`), and TLS contexts built from Kafka's `ssl.*` setting names
(`tls`, which reads key and certificate files but opens no connection). Crypto is the standard library's
(hashlib, hmac, secrets, ssl); PKCS12 keystores are read with `cryptography`.
"""
