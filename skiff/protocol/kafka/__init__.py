"""Kafka's wire protocol, sans-IO: frames and headers, the schemas of the APIs Skiff serves
at the versions it advertises, and record batches v2. The broker's Kafka listener
(`skiff.broker.kafka`) is the only user; docs/kafka.md describes the mapping."""
