"""`dvc push` / `dvc pull` with one line when the remote fails: which remote (name, URL, endpoint), what went
wrong (endpoint down, credentials refused, no bucket, objects missing or damaged) and the fix. DVC itself does
the transfer: it uploads each object whole, writes a download to a temporary file and moves it into the cache,
so a run killed midway loses nothing and the next run moves only what is missing. Every line is redacted
(drift.core.secrets): the remote's or endpoint's password and the AWS_* credentials show as `***`."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from drift.core.errors import DriftError
from drift.core.secrets import redact

# (what DVC or the S3 client says, in lower case; the cause; the fix, formatted with the remote's name and
# url)
CAUSES = [
    (
        (
            "could not connect to the endpoint",
            "connection refused",
            "connect timeout",
            "name or service not known",
        ),
        "the endpoint does not answer",
        "start it, or point the remote at the right one (`dvc remote modify {name} endpointurl URL`, or "
        "$AWS_ENDPOINT_URL)",
    ),
    (
        ("nosuchbucket", "bucket does not exist"),
        "the bucket does not exist",
        "create it (`aws s3 mb s3://{bucket}`), or point the remote at another (`dvc remote modify {name} url URL`)",
    ),
    (
        (
            "forbidden",
            "invalidaccesskeyid",
            "signaturedoesnotmatch",
            "access denied",
            "accessdenied",
            "(403)",
        ),
        "the credentials were refused",
        "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or `dvc remote modify --local {name} access_key_id ...`)",
    ),
    (
        ("checkout failed", "missing-files", "failed to transfer", "files failed to", "missing cache files"),
        "some objects are missing there or failed their hash check",
        "run it again (only what is missing moves); if they stay missing, `dvc push` them from the machine "
        "that computed them",
    ),
]


def _dvc(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["dvc", *args], cwd=cwd, capture_output=True, text=True)


def describe_remote(name: str | None, cwd: Path = Path(".")) -> tuple[str, str, str]:
    """(name, url, endpoint) of the named remote, or of the default one; '' where unset."""
    if not name:
        name = _dvc(["remote", "default"], cwd).stdout.strip()
    urls = dict(
        line.split(None, 1) for line in _dvc(["remote", "list"], cwd).stdout.splitlines() if line.strip()
    )
    endpoint = _dvc(["config", f"remote.{name}.endpointurl"], cwd).stdout.strip() if name else ""
    return name or "", urls.get(name, "").split()[0] if urls.get(name) else "", endpoint


def explain(action: str, output: str, name: str, url: str, endpoint: str) -> str:
    """One line for a failed `dvc <action>`: the remote, the cause and the fix (DVC's own first error line
    when the cause is none of CAUSES), redacted (the passwords of `url` and `endpoint` included)."""
    return redact(_explain(action, output, name, url, endpoint), (url, endpoint))


def _explain(action: str, output: str, name: str, url: str, endpoint: str) -> str:
    where = (
        f"remote '{name}' ({url}" + (f" at {endpoint}" if endpoint else "") + ")"
        if name
        else "the default remote"
    )
    lower = output.lower()
    bucket = url.split("://", 1)[-1].split("/", 1)[0] if "://" in url else url
    for needles, cause, fix in CAUSES:
        if any(n in lower for n in needles):
            return f"dvc {action} with {where}: {cause}: {fix.format(name=name or '<remote>', bucket=bucket)}"
    errors = [line.strip() for line in output.splitlines() if line.strip().startswith("ERROR")]
    first = errors[0] if errors else (output.strip().splitlines() or ["no output"])[-1]
    return f"dvc {action} with {where} failed: {first}"


def transfer(
    action: str, remote: str | None = None, cwd: Path = Path("."), targets: Sequence[str] = ()
) -> str:
    """Run `dvc push` or `dvc pull` (to `remote`, else the default); returns DVC's summary (its stdout).
    Raises DriftError with one line (explain) when it fails."""
    if action not in ("push", "pull", "fetch"):
        raise DriftError(f"unknown transfer {action!r}: push, pull or fetch")
    args = [action, *(["-r", remote] if remote else []), *targets]
    result = _dvc(args, Path(cwd))
    if result.returncode:
        raise DriftError(
            explain(action, result.stdout + "\n" + result.stderr, *describe_remote(remote, Path(cwd)))
        )
    return redact(result.stdout.strip())


if __name__ == "__main__":  # python -m drift.run.remote push|pull [remote]
    try:
        print(transfer(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
    except DriftError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
