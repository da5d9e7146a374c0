"""Object storage for the store and caches: `embed.cache_dir: s3://bucket/prefix`.

`ObjectPath` is the small part of pathlib.Path the caches use (`/`, name, parent, read/write, glob, stat,
unlink), on pyarrow's S3 filesystem. The standard environment variables reach the endpoint, as they do for
Lance, s3fs and DVC's S3 remote: AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION (and
AWS_ALLOW_HTTP=true for a plain-http endpoint, which Lance requires). The userinfo of an endpoint written
`http://key:secret@host` is never part of the host the client is given; nothing here stores a secret, and
every message is redacted (drift.core.secrets). An object is written by one PUT, so a reader sees the old
object or the new one, never part of one. `location(x)` is an ObjectPath for an s3:// URI and a Path
otherwise; `check_store` turns an endpoint that is down, refused credentials or a missing bucket into one
DriftError line.
"""

from __future__ import annotations

import fnmatch
import os
import socket
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlparse

from drift.core.errors import DriftError
from drift.core.secrets import redact

SCHEME = "s3://"
FIX = (
    "set AWS_ENDPOINT_URL (and AWS_ALLOW_HTTP=true for http), AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and "
    "AWS_REGION, or point embed.cache_dir at a local folder"
)


def is_object_store(where) -> bool:
    return isinstance(where, ObjectPath) or str(where).startswith(SCHEME)


def location(where):
    """An ObjectPath for an s3:// URI (or ObjectPath), else a pathlib.Path."""
    if isinstance(where, ObjectPath):
        return where
    text = str(where)
    return ObjectPath(text) if text.startswith(SCHEME) else Path(where)


def endpoint() -> str | None:
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


@cache
def _filesystem(endpoint_url: str | None, region: str | None, access_key_id: str | None):
    import pyarrow.fs as pafs  # lazy: only for a store on object storage

    options = {
        "region": region or "us-east-1",
        "connect_timeout": 5,
        "request_timeout": 30,
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=3),
    }
    if endpoint_url:
        parsed = urlparse(endpoint_url)
        host = parsed.netloc.rpartition("@")[2]  # the userinfo is credentials, never part of the host
        options.update(endpoint_override=host or parsed.path, scheme=parsed.scheme or "https")
    return pafs.S3FileSystem(
        **options
    )  # credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or the default chain


def filesystem():
    # keyed by the access key id too: other credentials, another client (the secret stays in the environment)
    return _filesystem(
        endpoint(),
        os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
        os.environ.get("AWS_ACCESS_KEY_ID"),
    )


class ObjectPath:
    """An object (or a prefix) on S3-compatible storage: `s3://bucket/key`. A prefix is a directory when an
    object lies below it; mkdir is a no-op (prefixes need no creation)."""

    def __init__(self, uri: str):
        uri = str(uri)
        if not uri.startswith(SCHEME) or not uri[len(SCHEME) :].strip("/"):
            raise DriftError(f"{uri!r} is not an object-store location: write s3://bucket/prefix")
        self.uri = SCHEME + uri[len(SCHEME) :].strip("/")

    # -- names
    def __str__(self) -> str:
        return self.uri

    def __repr__(self) -> str:
        return f"ObjectPath({self.uri!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, ObjectPath) and other.uri == self.uri

    def __lt__(self, other) -> bool:
        return self.uri < other.uri

    def __hash__(self) -> int:
        return hash(self.uri)

    def __truediv__(self, part) -> ObjectPath:
        return ObjectPath(f"{self.uri}/{str(part).strip('/')}")

    def __rtruediv__(self, other) -> ObjectPath:
        return self  # `root / location`: an absolute location, as with pathlib

    @property
    def key(self) -> str:
        """bucket/key, as pyarrow names it."""
        return self.uri[len(SCHEME) :]

    @property
    def bucket(self) -> str:
        return self.key.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def stem(self) -> str:
        return self.name.rsplit(".", 1)[0] if "." in self.name.lstrip(".") else self.name

    @property
    def suffix(self) -> str:
        return "." + self.name.rsplit(".", 1)[1] if "." in self.name.lstrip(".") else ""

    @property
    def parent(self) -> ObjectPath:
        return ObjectPath(SCHEME + self.key.rsplit("/", 1)[0]) if "/" in self.key else self

    def with_name(self, name: str) -> ObjectPath:
        return self.parent / name

    def relative_to(self, other) -> Path:
        prefix = str(other).rstrip("/") + "/"
        if not self.uri.startswith(prefix):
            raise ValueError(f"{self} is not under {other}")
        return Path(self.uri[len(prefix) :])

    def expanduser(self) -> ObjectPath:
        return self

    def resolve(self) -> ObjectPath:
        return self

    def is_absolute(self) -> bool:
        return True

    # -- state
    def _info(self):
        return filesystem().get_file_info(self.key)

    def exists(self) -> bool:
        return self.is_file() or self.is_dir()

    def is_file(self) -> bool:
        import pyarrow.fs as pafs

        return self._info().type == pafs.FileType.File

    def is_dir(self) -> bool:
        import pyarrow.fs as pafs

        if "/" not in self.key:
            return self._info().type == pafs.FileType.Directory
        return bool(self._list(recursive=False, limit_one=True))

    def stat(self):
        info = self._info()
        if info.type.name == "NotFound":
            raise FileNotFoundError(self.uri)
        mtime = info.mtime.timestamp() if info.mtime is not None else 0.0
        return SimpleNamespace(st_size=info.size or 0, st_mtime=mtime)

    def _list(self, recursive: bool, limit_one: bool = False) -> list:
        import pyarrow.fs as pafs

        try:
            found = filesystem().get_file_info(
                pafs.FileSelector(self.key, recursive=recursive, allow_not_found=True)
            )
        except FileNotFoundError:
            return []
        return found[:1] if limit_one else found

    def objects(self) -> list[tuple[ObjectPath, int, float]]:
        """(object, size, mtime) of every object below this prefix, from one listing."""
        return [
            (ObjectPath(SCHEME + i.path), i.size or 0, i.mtime.timestamp() if i.mtime is not None else 0.0)
            for i in self._list(recursive=True)
            if i.type.name == "File"
        ]

    def iterdir(self):
        for info in self._list(recursive=False):
            yield ObjectPath(SCHEME + info.path)

    def glob(self, pattern: str):
        """Direct children whose name matches (no recursive patterns: use rglob)."""
        return [p for p in self.iterdir() if fnmatch.fnmatch(p.name, pattern)]

    def rglob(self, pattern: str):
        """Every object below this prefix whose name matches (objects only: prefixes are not directories
        here)."""
        return [
            ObjectPath(SCHEME + i.path)
            for i in self._list(recursive=True)
            if i.type.name == "File" and fnmatch.fnmatch(i.path.rsplit("/", 1)[-1], pattern)
        ]

    # -- contents
    def read_bytes(self) -> bytes:
        try:
            with filesystem().open_input_stream(self.key) as f:
                return f.read()
        except FileNotFoundError:
            raise
        except OSError as e:
            if "NoSuchKey" in str(e) or "not exist" in str(e).lower():
                raise FileNotFoundError(self.uri) from None
            raise

    def read_text(self) -> str:
        return self.read_bytes().decode()

    def write_bytes(self, data: bytes) -> int:
        """One PUT: the object appears whole or not at all."""
        with filesystem().open_output_stream(self.key, metadata={}) as f:
            f.write(data)
        return len(data)

    def write_text(self, text: str) -> int:
        return self.write_bytes(text.encode())

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        return None

    def unlink(self, missing_ok: bool = False) -> None:
        try:
            filesystem().delete_file(self.key)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def rmtree(self) -> None:
        """Delete every object below this prefix."""
        filesystem().delete_dir_contents(self.key, missing_dir_ok=True)
        try:
            filesystem().delete_dir(self.key)
        except (FileNotFoundError, OSError):
            pass


def _endpoint_up(url: str, timeout: float = 5.0) -> str | None:
    """None when a TCP connection to the endpoint opens, else the reason."""
    parsed = urlparse(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        socket.create_connection((parsed.hostname, port), timeout=timeout).close()
        return None
    except OSError as e:
        return type(e).__name__


def check_store(where) -> None:
    """One request before any work: the endpoint answers, the credentials are accepted, the bucket exists.
    Each failure is one DriftError line naming the store and the fix (redacted: never a credential)."""
    try:
        _check_store(where)
    except DriftError as e:
        raise DriftError(redact(str(e))) from None


def _check_store(where) -> None:
    import pyarrow.fs as pafs

    where = location(where)
    if not isinstance(where, ObjectPath):
        return
    url = endpoint()
    if url:
        down = _endpoint_up(url)
        if down:
            raise DriftError(
                f"the object store for {where} at {url} does not answer ({down}): start it, or {FIX}"
            )
        if url.startswith("http://") and os.environ.get("AWS_ALLOW_HTTP", "").lower() not in ("1", "true"):
            raise DriftError(
                f"the object store for {where} is plain http ({url}): set AWS_ALLOW_HTTP=true "
                "(Lance refuses http otherwise), or use an https endpoint"
            )
    try:
        info = filesystem().get_file_info(where.bucket)
    except OSError as e:
        text = str(e)
        if any(
            s in text
            for s in (
                "AccessDenied",
                "ACCESS_DENIED",
                "InvalidAccessKeyId",
                "SignatureDoesNotMatch",
                "Forbidden",
                "403",
                "credentials",
            )
        ):
            raise DriftError(
                f"the object store refused the credentials for {where}: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY to a key allowed to read and write the bucket"
            ) from None
        reason = " ".join(text.split())[:160]
        raise DriftError(f"cannot reach the object store for {where} ({reason}): {FIX}") from None
    if info.type == pafs.FileType.NotFound:
        raise DriftError(
            f"bucket {where.bucket} of embed.cache_dir {where} does not exist: create it "
            f"(`aws s3 mb s3://{where.bucket}`) or point embed.cache_dir at an existing one"
        )
