"""Master/slave replication and controller-mode failover (docs/replication.md)."""
