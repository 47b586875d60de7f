"""Reads held to a visible end (a SYNC_MASTER's replicated offset, docs/reliability.md): a
record ending past it is not served, a pull there finds the queue's end, and the dispatch
listeners hear of a grown queue only once its records are visible."""

from skiff.store import GetStatus

from .conftest import message, records_of


def test_reads_stop_at_the_visible_end_and_listeners_wait_for_it(open_store):
    store = open_store()
    heard: list[list[tuple[str, int, int]]] = []
    store.add_dispatch_listener(heard.append)
    assert store.put_message(message(0)).ok
    first_end = store.commitlog.write_pos
    store.set_visible_end(first_end)
    assert store.put_message(message(1)).ok and store.put_message(message(2)).ok
    assert len(heard) == 1, "a queue grown past the visible end was announced"

    shown = store.get_messages("T", 0, 0, 32)
    assert [r.body for r in records_of(shown)] == [b"message 0"] and shown.next_begin_offset == 1
    beyond = store.get_messages("T", 0, 1, 32)
    assert beyond.status is GetStatus.OFFSET_OVERFLOW_ONE and beyond.next_begin_offset == 1

    store.set_visible_end(store.commitlog.write_pos)
    assert [t for batch in heard for t in batch] == [("T", 0, 1), ("T", 0, 2), ("T", 0, 3)]
    assert [r.body for r in records_of(store.get_messages("T", 0, 1, 32))] == [b"message 1", b"message 2"]

    assert store.put_message(message(3)).ok
    store.set_visible_end(None)
    assert len(heard) == 4 and store.get_messages("T", 0, 3, 32).message_count == 1
