"""`skiff.bench.tier_manifest` on a small history: in parts the manifest object stays small and a
cold read gets every segment back (the bench asserts it); as one object it grows with the history."""

from __future__ import annotations

from skiff.bench.tier_manifest import main, run


def test_the_manifest_in_parts_stays_small_and_reads_back_whole() -> None:
    parted = run(segments=60, files=3, queues=2, row_groups=3, part_segments=8)
    whole = run(segments=60, files=3, queues=2, row_groups=3, part_segments=1_000)
    assert parted["segments"] == whole["segments"] == 63
    assert parted["parts"] == (63 - 8) // 8 and whole["parts"] == 0
    assert parted["manifest_bytes"] * 3 < whole["manifest_bytes"]  # 15 segments of its own and 6 parts, not 63
    assert isinstance(parted["cold_read_s"], float) and isinstance(whole["cold_read_s"], float)


def test_the_command_prints_both_ways(capsys) -> None:
    main(["--segments", "20", "--files", "2", "--queues", "2", "--row-groups", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all('"write_after_a_file_ms"' in line for line in lines)
