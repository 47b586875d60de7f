"""A slave and the tier, with real processes: a master and a slave of one broker group share a
filesystem tier; the master uploads a tiered topic, both delete the uploaded CommitLog files by
retention, and the slave, which never writes the tier, holds its files until the manifest it reads
from the tier lists their messages, then serves a pull of offsets only the tier holds (read-only,
as a consumer reading the slave while its master is down does). An upload asked of the slave is
refused and writes nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from skiff.common.message import Message
from skiff.protocol.bodies.tier import TopicTierBody
from skiff.protocol.codes import ResponseCode, SkiffRequestCode
from skiff.protocol.headers.compaction import CompactionRequestHeader
from skiff.testing.ha import GROUP, HAGroup
from skiff.testing.processes import run_skiff
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire
from skiff.tier.backends import FilesystemBackend
from skiff.tier.manifest import manifest_file
from skiff.tier.tier import Tier

pytestmark = pytest.mark.timeout(120)

BODY = "x" * 1000
EVERY_HOUR = ";".join(f"{h:02d}" for h in range(24))
SMALL_FILES = ["--mappedFileSizeCommitLog=65536", "--fileReservedTime=0", f"--deleteWhen={EVERY_HOUR}",
               "--cleanResourceInterval=200", "--flushIntervalCommitLog=50"]


def first_file(group: HAGroup, broker_id: int) -> int:
    """Where the broker's CommitLog starts on its disk (its first file's name)."""
    return min(int(p.name) for p in (group.store_dir(broker_id) / "commitlog").iterdir())


async def tier_state(wire: BrokerWire, topic: str, code: int = SkiffRequestCode.GET_TIER_STATUS) -> tuple[int, str,
                                                                                                    TopicTierBody | None]:
    resp = await wire.call(code, CompactionRequestHeader(topic).to_ext(), timeout_ms=30_000)
    body = TopicTierBody.from_json(resp.body) if resp.code == ResponseCode.SUCCESS else None
    return resp.code, resp.remark or "", body


def test_a_slave_holds_its_files_for_the_tier_serves_tiered_offsets_and_never_uploads(tmp_path: Path) -> None:
    tier_dir = tmp_path / "tier"
    tier_dir.mkdir()
    args = [f"--tierStorageUrl={tier_dir.as_uri()}", "--tierSealMs=1", "--slaveSyncInterval=300",
            "--tierFileDeleteDelayMs=0", *SMALL_FILES]
    tier = Tier(FilesystemBackend(str(tier_dir)))
    # the master uploads when asked (TIER_UPLOAD_NOW), the slave reads the manifest every 300 ms
    with HAGroup(tmp_path / "group", broker_args=args, master_args=["--tierUploadIntervalMs=3600000"],
                 slave_args=["--tierUploadIntervalMs=300"]) as group:
        for topic, attrs in (("Plain", []), ("Tiered", ["--attr", "tiered.storage=true"])):
            done = run_skiff(["topic", "create", "-t", topic, "-q", "1", "-n", group.namesrv_addr, *attrs])
            assert done.returncode == 0, done.stdout

        async def main() -> None:
            master, slave = BrokerWire(group.master_addr), BrokerWire(group.slave_addr(1))
            try:
                async def slave_has_topic() -> bool:
                    return (await tier_state(slave, "Tiered"))[0] == ResponseCode.SUCCESS

                await eventually(slave_has_topic, 30, "the slave copying the tiered topic from its master")
                await send(master, "Plain", 0, 100)  # a CommitLog file and more of Plain alone: retention takes it
                await send(master, "Tiered", 0, 300)  # about five files
                await send(master, "Plain", 100, 100)
                end = await master.max_offset()

                async def caught_up() -> bool:
                    return await slave.max_offset() == end

                await eventually(caught_up, 30, "the slave copying the master's CommitLog")
                first_tiered = (await master.pull_messages("G", "Tiered", 0, 0, max_nums=1))[0].commit_log_offset

                async def plain_trimmed() -> bool:
                    return first_file(group, 1) > 0

                await eventually(plain_trimmed, 30, "the slave's retention deleting Plain's first CommitLog file")
                # that pass would have deleted every file but the newest (ten a pass): the slave's hold, from the
                # manifest it reads from the tier (none yet), keeps every file from Tiered's first message on
                assert first_file(group, 1) <= first_tiered and tier.manifest("Tiered", GROUP).segments == ()

                code, remark, uploaded = await tier_state(master, "Tiered", SkiffRequestCode.TIER_UPLOAD_NOW)
                assert code == ResponseCode.SUCCESS and uploaded is not None, remark
                assert uploaded.queues[0].uploaded_to == 300 and uploaded.uploaded_files > 0

                async def slave_trimmed() -> bool:
                    return first_file(group, 1) > first_tiered

                await eventually(slave_trimmed, 30, "the slave's retention deleting the uploaded CommitLog files")
                got = await slave.pull_messages("G", "Tiered", 0, 0)  # 0 is only in the tier, as far as the slave goes
                assert [(m.queue_offset, m.body.decode()) for m in got] == [(i, f"t{i}-{BODY}") for i in range(300)]

                before = tier.backend.get(manifest_file("Tiered", GROUP))
                code, remark, _ = await tier_state(slave, "Tiered", SkiffRequestCode.TIER_UPLOAD_NOW)
                assert code == ResponseCode.SYSTEM_ERROR and "only its master uploads" in remark, remark
                code, _, state = await tier_state(slave, "Tiered")
                assert code == ResponseCode.SUCCESS and state is not None
                assert (state.uploaded_files, state.uploaded_bytes) == (0, 0)  # the slave uploaded nothing
                assert state.queues[0].uploaded_to == 300  # it reads the master's manifest
                assert tier.backend.get(manifest_file("Tiered", GROUP)) == before
            finally:
                await master.close()
                await slave.close()

        asyncio.run(main())


async def send(wire: BrokerWire, topic: str, first: int, n: int) -> None:
    """Messages ``first``.. of ``topic`` (body ``t<i>-`` and 1000 bytes), in batches of 50."""
    for at in range(first, first + n, 50):
        batch = [Message.of(topic, f"t{i}-{BODY}") for i in range(at, min(at + 50, first + n))]
        resp = await wire.send_batch(topic, batch)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
