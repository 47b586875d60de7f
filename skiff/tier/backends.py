"""Where tiered files live: a filesystem path or an S3-compatible bucket.

A backend stores whole objects by key (``Orders/0/…parquet``, ``Orders/manifest.json``) and
reads them whole or a byte range at a time (`get_range`: a row group and a footer of a tiered
file, `skiff.tier.ranges`).
`put` is atomic for readers: a reader sees the old object or the new one, never part
of one (S3 gives that by itself; the filesystem backend writes a temporary file,
fsyncs it and renames it over the key). That and the manifest being written last make
a crash at any point leave a tier a reader can trust.

`backend_from_url` makes one from a broker's ``tierStorageUrl``:
``file:///var/skiff/tier`` or ``s3://bucket/prefix`` (with ``tierS3Endpoint`` for a
server that is not AWS, such as MinIO or moto; credentials come from boto3's usual
chain: environment, shared files, instance role).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any, Protocol
from urllib.parse import urlparse

from skiff.common.errors import SkiffError


class TierError(SkiffError):
    """A tier that cannot be reached, or an object that is missing or damaged."""


class TierBackend(Protocol):
    url: str

    def put(self, key: str, data: bytes) -> None:
        """Store ``data`` at ``key``, replacing what is there, atomically for readers."""

    def get(self, key: str) -> bytes:
        """The object at ``key``; `TierError` when there is none."""

    def get_range(self, key: str, start: int, length: int) -> bytes:
        """``length`` bytes of the object at ``key`` from byte ``start`` (fewer where it ends
        sooner: the caller's checksum tells); `TierError` when there is none."""

    def exists(self, key: str) -> bool: ...

    def list(self, prefix: str) -> Iterator[str]:
        """Keys starting with ``prefix``."""

    def delete(self, key: str) -> None:
        """Remove ``key`` (no error when it is absent)."""


class FilesystemBackend:
    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.url = f"file://{self.root}"
        os.makedirs(self.root, exist_ok=True)

    def _path(self, key: str) -> str:
        path = os.path.normpath(os.path.join(self.root, key))
        if not path.startswith(self.root + os.sep):
            raise TierError(f"tier key {key!r} leaves the tier's directory")
        return path

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fd = os.open(os.path.dirname(path), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def get(self, key: str) -> bytes:
        try:
            with open(self._path(key), "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise TierError(f"{self.url}/{key} does not exist") from None

    def get_range(self, key: str, start: int, length: int) -> bytes:
        _check_range(start, length)
        try:
            with open(self._path(key), "rb") as f:
                f.seek(start)
                return f.read(length)
        except FileNotFoundError:
            raise TierError(f"{self.url}/{key} does not exist") from None

    def exists(self, key: str) -> bool:
        return os.path.isfile(self._path(key))

    def list(self, prefix: str) -> Iterator[str]:
        for dirpath, _, names in os.walk(self.root):
            for name in names:
                if name.endswith(".tmp"):
                    continue
                key = os.path.relpath(os.path.join(dirpath, name), self.root).replace(os.sep, "/")
                if key.startswith(prefix):
                    yield key

    def delete(self, key: str) -> None:
        try:
            os.remove(self._path(key))
        except FileNotFoundError:
            pass


class S3Backend:
    """A bucket through boto3 (the ``tier`` extra). One client per backend: boto3's clients are
    thread-safe, the broker's uploader and its readers share it."""

    def __init__(self, bucket: str, prefix: str = "", *, endpoint_url: str | None = None,
                 region: str | None = None, client: Any = None) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.url = f"s3://{bucket}/{self.prefix}".rstrip("/")
        if client is None:
            try:
                import boto3
            except ImportError:
                raise TierError("an s3:// tier needs boto3: pip install 'skiffmq[tier]'") from None
            client = boto3.client("s3", endpoint_url=endpoint_url or None, region_name=region or None)
        self.client = client

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _fail(self, what: str, key: str, exc: Exception) -> TierError:
        return TierError(f"{what} {self.url}/{key} failed: {exc}")

    def put(self, key: str, data: bytes) -> None:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)
        except Exception as exc:  # botocore's errors, not imported without the extra
            raise self._fail("writing", key, exc) from exc

    def get(self, key: str) -> bytes:
        try:
            return bytes(self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read())
        except Exception as exc:
            raise self._fail("reading", key, exc) from exc

    def get_range(self, key: str, start: int, length: int) -> bytes:
        _check_range(start, length)
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self._key(key),
                                            Range=f"bytes={start}-{start + length - 1}")
            return bytes(answer["Body"].read())
        except Exception as exc:
            raise self._fail(f"reading bytes {start}+{length} of", key, exc) from exc

    def exists(self, key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
            return True
        except Exception as exc:
            if getattr(exc, "response", {}).get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise self._fail("looking up", key, exc) from exc

    def list(self, prefix: str) -> Iterator[str]:
        strip = len(self.prefix) + 1 if self.prefix else 0
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket,
                                                                          Prefix=self._key(prefix))
            for page in pages:
                for obj in page.get("Contents", ()):
                    yield obj["Key"][strip:]
        except Exception as exc:
            raise self._fail("listing", prefix, exc) from exc

    def delete(self, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
        except Exception as exc:
            raise self._fail("deleting", key, exc) from exc


def _check_range(start: int, length: int) -> None:
    if start < 0 or length <= 0:
        raise ValueError(f"a ranged read starts at 0 or more and reads 1 byte or more, not {start}+{length}")


def backend_from_url(url: str, *, endpoint_url: str | None = None, region: str | None = None) -> TierBackend:
    """The backend of ``file:///path`` or ``s3://bucket/prefix``."""
    parsed = urlparse(url)
    if parsed.scheme == "file" and parsed.path:
        return FilesystemBackend(parsed.path)
    if parsed.scheme == "s3" and parsed.netloc:
        return S3Backend(parsed.netloc, parsed.path, endpoint_url=endpoint_url, region=region)
    raise TierError(f"tier url {url!r}: write file:///a/directory or s3://bucket/prefix")
