"""Archive a job dir and its audit reports to S3, resumably and verifiably.

Layout under s3://bucket/prefix/: the job's files at their relative paths (so the prefix can be
audited like a job dir), the reports under `_audit/` (with the run's provenance manifest,
`_audit/provenance.json`, when there is one), and `_audit/manifest.json` holding the
sha256 and size of every other file. Each object carries its sha256 in metadata and is sent
with Content-MD5, so the store rejects a corrupted upload. A file whose object already has the
same sha256 is skipped, which makes a second run finish an interrupted one. After uploading,
every object is checked (size, and ETag = MD5, or else the sha256 metadata) before the
manifest is written: a manifest therefore means "complete and verified".
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit.read.provenance import FILE_NAME as PROVENANCE_FILE
from audit.read.provenance import dumps as provenance_dumps
from audit.read.s3 import S3Uri

log = logging.getLogger(__name__)

REPORT_DIR = "_audit"
MANIFEST = f"{REPORT_DIR}/manifest.json"
SHA_META = "sha256"
_CHUNK = 1024 * 1024


class ArchiveError(RuntimeError):
    """The archive could not be completed or verified; the message says which file."""


@dataclass(frozen=True)
class Item:
    key_rel: str
    path: Path | None
    data: bytes | None
    size: int
    sha256: str
    md5: str

    @classmethod
    def from_file(cls, rel: str, path: Path) -> Item:
        sha, md5, size = hashlib.sha256(), hashlib.md5(usedforsecurity=False), 0
        with path.open("rb") as fh:
            while block := fh.read(_CHUNK):
                sha.update(block)
                md5.update(block)
                size += len(block)
        return cls(rel, path, None, size, sha.hexdigest(), md5.hexdigest())

    @classmethod
    def from_bytes(cls, rel: str, data: bytes) -> Item:
        return cls(
            rel,
            None,
            data,
            len(data),
            hashlib.sha256(data).hexdigest(),
            hashlib.md5(data, usedforsecurity=False).hexdigest(),
        )


@dataclass(frozen=True)
class ArchiveResult:
    destination: str
    files: int
    uploaded: int
    skipped: int
    verified: int
    bytes_uploaded: int
    manifest: str

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def archive_job(
    job_dir: Path,
    dest: S3Uri,
    client: Any,
    reports: dict[str, bytes],
    workers: int = 8,
    provenance: dict | None = None,
) -> ArchiveResult:
    """Upload job_dir and `reports` ({file name: bytes}) to dest, verify, write the manifest.

    `provenance` (the run's manifest) is stored beside the reports as provenance.json."""
    job_dir = Path(job_dir)
    if provenance is not None:
        reports = {**reports, PROVENANCE_FILE: provenance_dumps(provenance).encode()}
    if not job_dir.is_dir():
        raise ArchiveError(f"job dir {job_dir} does not exist or is not a directory")
    _check_bucket(client, dest)
    items = [
        Item.from_file(p.relative_to(job_dir).as_posix(), p)
        for p in sorted(job_dir.rglob("*"))
        if p.is_file() and not p.relative_to(job_dir).as_posix().startswith(f"{REPORT_DIR}/")
    ]
    items += [Item.from_bytes(f"{REPORT_DIR}/{name}", data) for name, data in reports.items()]

    # One listing answers "is it there with the same content?" for most files (ETag is the MD5
    # of a single-part upload); only objects whose ETag differs (e.g. SSE-KMS buckets) cost a
    # HEAD to compare the sha256 we stored in their metadata.
    with ThreadPoolExecutor(max_workers=workers) as pool:
        index = _list(client, dest)
        present = list(pool.map(lambda it: _has_same(client, dest, it, index), items))
        todo = [it for it, same in zip(items, present, strict=True) if not same]
        log.info(
            "archive: %d files, %d already there, %d to upload",
            len(items),
            len(items) - len(todo),
            len(todo),
        )
        list(pool.map(lambda it: _put(client, dest, it), todo))
        index = _list(client, dest)
        bad = [msg for msg in pool.map(lambda it: _verify(client, dest, it, index), items) if msg]
    if bad:
        raise ArchiveError(f"verification failed for {len(bad)} file(s), first: {bad[0]}")

    manifest = {
        "job": job_dir.name,
        "files": {it.key_rel: {"sha256": it.sha256, "size": it.size} for it in items},
    }
    body = json.dumps(manifest, indent=1, sort_keys=True).encode()
    man = Item.from_bytes(MANIFEST, body)
    if not _has_same(client, dest, man, index):
        _put(client, dest, man)
    if msg := _verify(client, dest, man, None):
        raise ArchiveError(f"verification failed for the manifest: {msg}")
    return ArchiveResult(
        destination=str(dest),
        files=len(items),
        uploaded=len(todo),
        skipped=len(items) - len(todo),
        verified=len(items),
        bytes_uploaded=sum(it.size for it in todo),
        manifest=f"s3://{dest.bucket}/{dest.key(MANIFEST)}",
    )


def _check_bucket(client: Any, dest: S3Uri) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        client.head_bucket(Bucket=dest.bucket)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        raise ArchiveError(
            f"bucket {dest.bucket!r} is not usable ({code or exc}): create it or fix the "
            "s3:// URI and credentials"
        ) from exc
    except BotoCoreError as exc:
        raise ArchiveError(f"cannot reach S3 for bucket {dest.bucket!r}: {exc}") from exc


def _head(client: Any, dest: S3Uri, item: Item) -> dict | None:
    from botocore.exceptions import ClientError

    try:
        return client.head_object(Bucket=dest.bucket, Key=dest.key(item.key_rel))
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return None
        raise


def _list(client: Any, dest: S3Uri) -> dict[str, tuple[int, str]]:
    """{relative key: (size, ETag)} of everything under the destination prefix."""
    base = f"{dest.prefix}/" if dest.prefix else ""
    out: dict[str, tuple[int, str]] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=dest.bucket, Prefix=base):
        for obj in page.get("Contents", []):
            out[obj["Key"][len(base) :]] = (obj["Size"], str(obj.get("ETag", "")).strip('"'))
    return out


def _has_same(client: Any, dest: S3Uri, item: Item, index: dict[str, tuple[int, str]]) -> bool:
    if item.key_rel not in index:
        return False
    size, etag = index[item.key_rel]
    if size != item.size:
        return False
    if etag == item.md5:
        return True
    head = _head(client, dest, item)
    return head is not None and (head.get("Metadata") or {}).get(SHA_META) == item.sha256


def _put(client: Any, dest: S3Uri, item: Item) -> None:
    md5_b64 = base64.b64encode(bytes.fromhex(item.md5)).decode()
    kwargs = dict(
        Bucket=dest.bucket,
        Key=dest.key(item.key_rel),
        ContentMD5=md5_b64,
        ContentLength=item.size,
        Metadata={SHA_META: item.sha256},
    )
    if item.data is not None:
        client.put_object(Body=item.data, **kwargs)
        return
    with item.path.open("rb") as fh:  # type: ignore[union-attr]
        client.put_object(Body=fh, **kwargs)


def _verify(
    client: Any, dest: S3Uri, item: Item, index: dict[str, tuple[int, str]] | None
) -> str | None:
    """None when the stored object matches the local bytes, else what is wrong with it."""
    where = f"s3://{dest.bucket}/{dest.key(item.key_rel)}"
    if index is not None and item.key_rel in index:
        size, etag = index[item.key_rel]
        if size == item.size and etag == item.md5:
            return None
    head = _head(client, dest, item)
    if head is None:
        return f"{where} is missing after upload"
    if head.get("ContentLength") != item.size:
        return f"{where} has {head.get('ContentLength')} bytes, expected {item.size}"
    etag = str(head.get("ETag", "")).strip('"')
    if etag != item.md5 and (head.get("Metadata") or {}).get(SHA_META) != item.sha256:
        return f"{where} matches neither the local MD5 (ETag {etag}) nor its sha256"
    return None
