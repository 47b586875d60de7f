"""The writer's compiled kernel (skiff.broker._kernels.batch_inputs) gives exactly what its
pure-Python reference (skiff.broker.writer.batch_inputs_py) gives, on the same hypothesis
property strings (names the writer reads, refuses and passes, and malformed ones): the same
rows, of the same type, and the same declined batches.

Where the extension is not built (or SKIFF_NO_EXTENSIONS is set) the comparison is skipped,
and the reference alone is checked on the hand-written case."""

from __future__ import annotations

import gc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.broker.writer import batch_inputs_py
from skiff.common import kernels
from skiff.store.results import MessageInput
from tests.unit.kernel_twins import compiled_kernels

SETTINGS = settings(max_examples=60, deadline=None)
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
BROKER = "skiff.broker._kernels"


compiled = compiled_kernels(BROKER)


def test_batch_inputs_has_a_compiled_twin_when_built_and_only_there():
    if kernels.compiled("pack_records") is None:
        pytest.skip("the compiled kernels are not built here")
    assert callable(kernels.compiled("batch_inputs", BROKER))
    assert kernels.compiled("batch_inputs") is None  # not left in skiff.common._kernels as well


PROPERTY_NAME = st.sampled_from([b"TAGS", b"KEYS", b"UNIQ_KEY", b"WAIT", b"DELAY", b"TIMER_ID", b"", b"T\x01",
                                 b"\xff\xfe"])
PROPERTY_VALUE = st.one_of(TEXT.map(str.encode), st.binary(max_size=8))
"""Names the writer reads, refuses and passes, and malformed ones (empty, with a 0x01 inside,
not UTF-8); values of text or any bytes (invalid UTF-8 and separators included)."""
property_strings = st.lists(st.tuples(PROPERTY_NAME, PROPERTY_VALUE), max_size=6).flatmap(
    lambda pairs: st.tuples(st.just(pairs), st.booleans())).map(
    lambda drawn: b"\x02".join(n + b"\x01" + v for n, v in drawn[0]) + (b"\x02" if drawn[1] else b""))


@SETTINGS
@given(props=st.lists(property_strings, min_size=1, max_size=8), uniform=st.booleans(),
       refused=st.sampled_from([("DELAY", "TIMER_ID"), (), ("WAIT",)]))
def test_batch_inputs_are_identical_and_decline_the_same_batches(props, uniform, refused):
    """Batches with the same names in every message (the reference's column path) and mixed ones."""
    if uniform:
        props = [props[0]] * len(props)
    head = ("T", 3, 8, 1_700_000_000_000, bytes(8), 2)
    args = (MessageInput, head, list(range(len(props))), [b"b%d" % i for i in range(len(props))], props,
            ("TAGS", "KEYS", "UNIQ_KEY"), refused)
    got = compiled("batch_inputs")(*args)
    assert got == batch_inputs_py(*args)
    assert got is None or all(type(row) is MessageInput for row in got)
    assert got is None or not any(map(gc.is_tracked, got))  # rows of plain fields: never in a cycle


def test_batch_inputs_read_the_last_of_a_repeated_name_and_skip_malformed_pairs():
    props = b"TAGS\x01a\x02TAGS\x01b\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01u\x01x\x02\x01v\x02"
    for impl in filter(None, (kernels.compiled("batch_inputs", BROKER), batch_inputs_py)):
        (row,) = impl(MessageInput, ("T", 0, 0, 1, bytes(8), 0), [7], [b"body"], [props], ("TAGS", "KEYS", "UNIQ_KEY"),
                      ("DELAY",))
        assert (row.tags, row.keys, row.uniq_key, row.flag, row.body, row.properties) == ("b", "k1 k2", None, 7,
                                                                                         b"body", props)
        assert impl(MessageInput, ("T", 0, 0, 1, bytes(8), 0), [0], [b""], [b"DELAY\x013"], ("TAGS", "KEYS", "UNIQ_KEY"),
                    ("DELAY",)) is None
