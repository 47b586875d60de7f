"""The broker's side of tiered storage (docs/tiered-storage.md): the uploader of sealed
messages of topics with ``tiered.storage=true`` (only the master runs it), the hold it
puts on CommitLog retention (nothing not yet uploaded, or younger than the topic's
``retention.local.ms``, is deleted), the reads of offsets that are only in the tier,
and the admin status. The tier's format and backends are `skiff.tier`'s.
"""
