"""A long history's manifest in parts: segments written out into objects of their own.

The manifest is the tier's one truth, rewritten whole by its uploader after each file it adds
or removes. Listed in it, every segment would cost each rewrite ~2.7 KB of JSON (its row
groups' ranges and digests): a topic taking 10,000 small messages a second adds ~8,600 files a
day, and its manifest would pass `TIER_MANIFEST_MAX_BYTES` within days, each rewrite taking
seconds of CPU. So once a manifest lists ``2 × part_segments`` segments of its own, the oldest
``part_segments`` of them go into a part (the same JSON as a manifest without parts, named by
its SHA-256, written once and never changed) which the manifest then names with its size and
digest. A rewrite writes the small manifest and, now and then, one new part.

A part holds only segments the manifest still lists unchanged (the same objects: comparing
segments by value would hash every field of every segment at each write, most of a write's
CPU in a long history); when one of them goes (retention expired it, a compacted rewrite or
`Tier.index_old` replaced it) the part is dissolved at the next write: its other segments are
listed again and parted anew with the newer ones (the same segments in the same order make the
same part, by name, so nothing is lost by dissolving an unchanged one), and the part's object
is retired as a replaced file is (deleted after ``tierFileDeleteDelayMs``, so a reader holding an older
manifest still finds it). A part is written before the manifest naming it: a crash in between
leaves an object no manifest names, collected as an orphan.

Sans-IO: `parted` decides, `skiff.tier.tier.Tier.write_manifest` writes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

from skiff.tier.manifest import Manifest, ManifestError, ManifestPart, Segment, broker_prefix

PART_DIR = "manifest-parts/"
PART_SUFFIX = ".segments.json"


class Parted(NamedTuple):
    manifest: Manifest
    """The manifest to write: its segments the parts' in order, then its own."""
    written: list[tuple[ManifestPart, bytes]]
    """New parts and their bytes, to write before the manifest."""
    dropped: list[ManifestPart]
    """Parts the manifest named and no longer does, to retire once it is written."""


def part_file(topic: str, broker: str, digest: str) -> str:
    return f"{broker_prefix(topic, broker)}{PART_DIR}{digest}{PART_SUFFIX}"


def parted(manifest: Manifest, part_segments: int) -> Parted:
    """``manifest`` with its parts still whole kept, the others dissolved, and its own segments
    parted, oldest first, while it would list ``2 × part_segments`` or more of them."""
    if part_segments < 1:
        raise ValueError(f"a manifest part holds 1 segment or more, not {part_segments}")
    listed = {id(s) for s in manifest.segments}  # by identity: a part's segments are the manifest's objects
    kept = [p for p in manifest.parts if all(id(s) in listed for s in p.segments)]
    in_parts = {id(s) for p in kept for s in p.segments}
    own = [s for s in manifest.segments if id(s) not in in_parts]
    written = []
    while len(own) >= 2 * part_segments:
        chunk, own = own[:part_segments], own[part_segments:]
        written.append(new_part(manifest.topic, manifest.broker, chunk))
    parts = tuple(kept) + tuple(p for p, _ in written)
    names = {p.file for p in parts}
    dropped = [p for p in manifest.parts if p.file not in names]
    segments = tuple(s for p in parts for s in p.segments) + tuple(own)
    return Parted(replace(manifest, segments=segments, parts=parts), written, dropped)


def new_part(topic: str, broker: str, segments: Sequence[Segment]) -> tuple[ManifestPart, bytes]:
    data = Manifest(topic, broker, tuple(segments)).to_bytes()
    digest = hashlib.sha256(data).hexdigest()
    return ManifestPart(part_file(topic, broker, digest), len(data), digest, tuple(segments)), data


def read_part(topic: str, broker: str, file: str, data: bytes, count: int) -> tuple[Segment, ...]:
    """The segments of part ``file`` from its bytes (checked against the manifest's digest before)."""
    m = Manifest.from_bytes(data)
    if (m.topic, m.broker) != (topic, broker) or m.parts or len(m.segments) != count:
        raise ManifestError(f"{file}: not a part of {topic!r} in {broker!r} holding {count} segments "
                            f"({m.topic!r} in {m.broker!r}, {len(m.segments)} segments)")
    return m.segments
