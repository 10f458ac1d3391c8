"""Objects in one S3 bucket: :class:`sluice.ports.ObjectStore` (key layout: ``sluice.domain.layout``)."""

from __future__ import annotations

import io
from typing import Any

from botocore.exceptions import ClientError

from sluice.adapters.aws.clients import client
from sluice.adapters.aws.errors import aws_errors, code, of_kind
from sluice.domain.errors import Denied, Missing

PART_BYTES = 16 * 1024 * 1024
"""Multipart upload parts: S3 wants at least 5 MiB but the last; memory stays bounded either way."""


@aws_errors
class S3Objects:
    """:class:`sluice.ports.ObjectStore` on one bucket.

    A missing key reads as None. S3 answers a missing key with 404 only to a role that may list
    the bucket; to one that may not it is 403 AccessDenied. The stack grants each function listing
    only on the prefixes it reads (an ``s3:prefix`` condition, which a GET does not carry), so a 403
    is asked again as a listing of that one key: absent, it is missing; present (or the listing
    refused too), the 403 is a real refusal and is raised (:class:`~sluice.domain.errors.Denied`). A ranged
    read of a key that is not there raises :class:`~sluice.domain.errors.Missing`.
    """

    def __init__(self, bucket: str) -> None:
        self.bucket = bucket
        self._s3 = client("s3")

    def put(self, key: str, body: bytes, content_type: str) -> None:
        self._s3.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType=content_type)

    def put_new(self, key: str, body: bytes, content_type: str) -> bool:
        try:
            self._s3.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType=content_type, IfNoneMatch="*")
        except ClientError as exc:
            if code(exc) in ("PreconditionFailed", "ConditionalRequestConflict"):
                return False
            raise
        return True

    def delete(self, key: str) -> None:
        self._s3.delete_object(Bucket=self.bucket, Key=key)

    def get(self, key: str) -> bytes | None:
        try:
            body: bytes = self._s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError as exc:
            if self._missing(key, exc):
                return None
            raise
        return body

    def size(self, key: str) -> int | None:
        try:
            head = self._s3.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if self._missing(key, exc):
                return None
            raise
        return int(head["ContentLength"])

    def _missing(self, key: str, exc: ClientError) -> bool:
        """Whether a refused read means the key is not there (see the class doc)."""
        if of_kind(exc, Missing):
            return True
        if not of_kind(exc, Denied):
            return False
        try:
            listed = self._s3.list_objects_v2(Bucket=self.bucket, Prefix=key, MaxKeys=1)
        except ClientError:
            return False  # no listing either: the refusal stands
        return not any(entry["Key"] == key for entry in listed.get("Contents", []))

    def get_range(self, key: str, start: int, length: int) -> bytes:
        if length <= 0:
            return b""
        try:
            answer = self._s3.get_object(Bucket=self.bucket, Key=key, Range=f"bytes={start}-{start + length - 1}")
        except ClientError as exc:
            if self._missing(key, exc):
                raise Missing(f"S3Objects.get_range: {self.location(key)} is not there ({code(exc)})") from exc
            raise
        body: bytes = answer["Body"].read()
        return body

    def writer(self, key: str, content_type: str) -> MultipartWriter:
        return MultipartWriter(self._s3, self.bucket, key, content_type)

    def location(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"


@aws_errors
class MultipartWriter:
    """A streaming upload: one PUT when small, parts of bounded size when large; visible only once closed."""

    def __init__(self, s3: Any, bucket: str, key: str, content_type: str) -> None:
        self._s3, self._bucket, self._key, self._type = s3, bucket, key, content_type
        self._buffer = io.BytesIO()
        self._upload_id: str | None = None
        self._parts: list[dict[str, Any]] = []
        self._size = 0

    @property
    def size(self) -> int:
        return self._size

    def write(self, data: bytes) -> None:
        self._buffer.write(data)
        self._size += len(data)
        if self._buffer.tell() >= PART_BYTES:
            self._flush_part()

    def _flush_part(self) -> None:
        if self._upload_id is None:
            self._upload_id = self._s3.create_multipart_upload(
                Bucket=self._bucket, Key=self._key, ContentType=self._type
            )["UploadId"]
        number = len(self._parts) + 1
        answer = self._s3.upload_part(
            Bucket=self._bucket,
            Key=self._key,
            UploadId=self._upload_id,
            PartNumber=number,
            Body=self._buffer.getvalue(),
        )
        self._parts.append({"ETag": answer["ETag"], "PartNumber": number})
        self._buffer = io.BytesIO()

    def close(self) -> None:
        if self._upload_id is None:
            self._s3.put_object(
                Bucket=self._bucket, Key=self._key, Body=self._buffer.getvalue(), ContentType=self._type
            )
            return
        if self._buffer.tell():
            self._flush_part()
        self._s3.complete_multipart_upload(
            Bucket=self._bucket, Key=self._key, UploadId=self._upload_id, MultipartUpload={"Parts": self._parts}
        )

    def abort(self) -> None:
        if self._upload_id is not None:
            self._s3.abort_multipart_upload(Bucket=self._bucket, Key=self._key, UploadId=self._upload_id)
