"""The broker's security (issue 28): listeners, TLS, SASL logins and SCRAM credentials.

`listeners` reads Kafka's listener settings into the broker's listeners; `authenticator` is one
connection's login (SaslHandshake, SaslAuthenticate, KIP-368 re-authentication), sans-I/O;
`credentials` keeps SCRAM users as Kafka keeps them; `transport` builds each listener's TLS
context and reloads it. The wire codecs and the mechanisms themselves are in kafka_protocol.security,
which the project's clients share.
"""
