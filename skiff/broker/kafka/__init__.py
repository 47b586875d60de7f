"""The broker's Kafka door: a listener speaking Kafka's wire protocol (`listener`), and
adapters from Kafka's requests to the broker's operations (`service`, `produce`, `fetch`,
`groups`, `idempotence`). docs/kafka.md describes the mapping."""
