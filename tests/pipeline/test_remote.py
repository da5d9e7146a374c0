"""`dvc push` / `dvc pull` carry the embeddings: machine A computes them, a fresh clone B with an empty store
pulls them from a real S3 server on 127.0.0.1 (moto's, tests/s3_server.py) and reproduces A's matrices byte
for byte without running an encoder; `dvc exp push` / `dvc exp pull` carry an experiment the same way and
`dvc gc` with the experiment flags keeps it; faults on the remote end in DVC's error and lose nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.helpers import ROOT, dvc_params, make_project, only, run, tiny_params

CACHE_TYPE = "reflink,hardlink,symlink,copy"  # what the repository's .dvc/config sets


def s3_remote(repo: Path, endpoint: str, bucket: str, name: str = "storage") -> None:
    """The S3 remote of docs/how-to/dvc-remote.md: the bucket and endpoint committed in .dvc/config, the keys
    from the environment."""
    run(["dvc", "remote", "add", "-d", name, f"s3://{bucket}/dvc"], repo)
    run(["dvc", "remote", "modify", name, "endpointurl", endpoint], repo)


def matrices(repo: Path) -> dict:
    return {
        p.relative_to(repo).as_posix(): p.read_bytes() for p in sorted((repo / "data/eval").rglob("*.json"))
    }


def tree(repo: Path, folder: str) -> dict:
    """Every file under repo/folder by relative path, as bytes."""
    return {
        p.relative_to(repo).as_posix(): p.read_bytes()
        for p in sorted((repo / folder).rglob("*"))
        if p.is_file()
    }


def embed_metrics(repo: Path) -> dict:
    return json.loads((repo / ".drift/runs/embed/sotu-minilm-l6.json").read_text())


def stages_run(output: str) -> list[str]:
    return [line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage '")]


@pytest.fixture(scope="module")
def machine_a(tmp_path_factory, s3_store):
    """Machine A, built once for this file: the tiny sotu project ran `dvc repro` (the encoder ran),
    committed, pushed its git history to a bare repository (`origin`) and its outputs to the S3 remote. Yields
    (A, origin). A test that changes A's workspace puts it back (`git checkout .` + `dvc checkout`)."""
    from tests.s3_server import BUCKET

    root = tmp_path_factory.mktemp("machines")
    params = dvc_params("sotu")  # three decades, references baseline-prior and baseline-linear
    params["train"]["models"] = {"sotu": ["ffn-s", "probe-minilm"]}  # 4 matrices
    a = make_project(root / "a", params, Path(".drift/cache"))  # each clone's own store, empty at first
    assert "hardlink" in (ROOT / ".dvc/config").read_text()
    run(["dvc", "config", "cache.type", CACHE_TYPE], a)
    s3_remote(a, s3_store, BUCKET)
    run(["dvc", "repro"], a)
    assert embed_metrics(a)["computed"] > 0
    run(["git", "add", "-A"], a)
    run(["git", "commit", "-qm", "run on A"], a)
    pushed = run(["dvc", "push"], a).stdout
    assert "pushed" in pushed, pushed
    origin = root / "origin.git"
    run(["git", "init", "-q", "--bare", str(origin)], root)
    run(["git", "remote", "add", "origin", str(origin)], a)
    run(["git", "push", "-q", "origin", "HEAD"], a)
    yield a, origin


def test_push_on_a_pull_and_repro_on_b_runs_no_encoder(tmp_path, machine_a):
    a, _ = machine_a
    # B: git clone, dvc pull, dvc repro; nothing of A's store or DVC cache is reachable
    b = tmp_path / "b"
    run(["git", "clone", "-q", str(a), str(b)], tmp_path)
    assert not (b / ".drift").exists() and not (b / "data/features").exists()
    run(["dvc", "pull"], b)
    assert (b / "data/features/sotu/minilm-l6/pooled.npy").read_bytes() == (
        a / "data/features/sotu/minilm-l6/pooled.npy"
    ).read_bytes()
    status = run(["dvc", "status"], b).stdout
    assert "embed@sotu" not in status and "train@sotu" not in status and "evaluate@sotu" not in status, status
    out = run(["dvc", "repro"], b).stdout
    assert out.count("Running stage") == 1 and "Running stage 'check'" in out, out
    assert matrices(b) == matrices(a) and len(matrices(a)) == 4
    assert not list((b / ".drift/cache").glob("*.lance")) if (b / ".drift/cache").exists() else True

    # an embed param that leaves the fingerprint as it is: the stage runs, fills B's store from the pulled
    # files and computes nothing; train and evaluate stay up to date
    out = run(["dvc", "exp", "run", "-S", "embed.batch_size=16"], b).stdout
    assert "Running stage 'embed@sotu'" in out and "Running stage 'train@sotu'" not in out, out
    metrics = embed_metrics(b)
    assert metrics["computed"] == 0 and metrics["seeded"] == metrics["unique"] > 0, metrics
    assert list((b / ".drift/cache").glob("minilm-l6-*.lance"))
    run(["git", "checkout", "params.yaml", "dvc.lock"], b)

    # a training param on B trains and scores only (the report's shift matrix reads the pulled features)
    out = run(["dvc", "exp", "run", "-S", "train.epochs=2"], b).stdout
    assert "Running stage 'train@sotu'" in out and "Running stage 'report@sotu'" in out, out
    assert "Running stage 'embed@sotu'" not in out
    run(["git", "checkout", "params.yaml", "dvc.lock"], b)

    # dvc gc keeps what the workspace needs: after it, a checkout from B's cache restores the features
    run(["dvc", "gc", "-w", "-f"], b)
    shutil.rmtree(b / "data/features")
    run(["dvc", "checkout", "data/features/sotu"], b)
    assert (b / "data/features/sotu/minilm-l6/pooled.npy").read_bytes() == (
        a / "data/features/sotu/minilm-l6/pooled.npy"
    ).read_bytes()


def test_an_experiment_travels_by_exp_push_and_pull_and_gc_keeps_it(tmp_path, machine_a):
    """A runs `dvc exp run -S train.epochs=2` and `dvc exp push origin <exp>` (the git refs to origin, the
    outputs to the S3 remote); a fresh clone B does `dvc exp pull` + `dvc exp apply` and has the experiment's
    metrics and models without running a stage. Then `dvc gc -w -a -T --all-experiments` on A drops only
    garbage: `dvc checkout` and `dvc exp apply` restore the workspace and the experiment from the cache."""
    a, origin = machine_a
    baseline_models = tree(a, "data/models")
    out = run(["dvc", "exp", "run", "-n", "epochs2", "-S", "train.epochs=2"], a).stdout
    assert "train@sotu" in stages_run(out) and "embed@sotu" not in stages_run(out), out
    exp_metrics, exp_models, exp_matrices = tree(a, "metrics"), tree(a, "data/models"), matrices(a)
    assert exp_models != baseline_models  # two epochs train other weights
    pushed = run(["dvc", "exp", "push", "origin", "epochs2"], a).stdout
    assert "epochs2" in pushed, pushed

    b = tmp_path / "b"
    run(["git", "clone", "-q", str(origin), str(b)], tmp_path)
    assert not (b / "data/models").exists() and not (b / ".dvc/cache").exists()
    run(["dvc", "exp", "pull", "origin", "epochs2"], b)
    assert "epochs2" in run(["dvc", "exp", "list", "--name-only"], b).stdout
    run(["dvc", "exp", "apply", "epochs2"], b)
    assert tree(b, "metrics") == exp_metrics and tree(b, "data/models") == exp_models
    assert matrices(b) == exp_matrices
    shown = json.loads(run(["dvc", "metrics", "show", "--json"], b).stdout)
    assert shown == json.loads(run(["dvc", "metrics", "show", "--json"], a).stdout)
    status = run(["dvc", "status"], b).stdout
    assert not any(f"{stage}@sotu" in status for stage in ("embed", "train", "evaluate", "report")), status
    assert stages_run(run(["dvc", "repro"], b).stdout) == ["check"]  # no encoder, no training on B
    assert not (b / ".drift/cache").exists() or not list((b / ".drift/cache").glob("*.lance"))

    # back to A's baseline workspace; the experiment lives only in its ref. Plant garbage: a file added to DVC
    # and dropped again leaves an object no revision uses.
    run(["git", "checkout", "--", "."], a)
    run(["dvc", "checkout", "--force"], a)
    assert tree(a, "data/models") == baseline_models
    (a / "scratch.bin").write_bytes(b"garbage no revision uses\n" * 100)
    run(["dvc", "add", "-q", "scratch.bin"], a)
    md5 = yaml.safe_load((a / "scratch.bin.dvc").read_text())["outs"][0]["md5"]
    run(["dvc", "remove", "scratch.bin.dvc"], a)
    (a / "scratch.bin").unlink()
    garbage_object = a / ".dvc/cache/files/md5" / md5[:2] / md5[2:]
    assert garbage_object.exists()

    run(["dvc", "gc", "-w", "-a", "-T", "--all-experiments", "-f"], a)
    assert not garbage_object.exists()
    shutil.rmtree(a / "data/models")
    shutil.rmtree(a / "data/features")
    run(["dvc", "checkout"], a)
    assert tree(a, "data/models") == baseline_models
    status = run(["dvc", "status"], a).stdout
    assert not any(f"{stage}@sotu" in status for stage in ("embed", "train", "evaluate", "report")), status
    run(["dvc", "exp", "apply", "epochs2"], a)
    assert tree(a, "data/models") == exp_models and tree(a, "metrics") == exp_metrics
    status = run(["dvc", "status"], a).stdout
    assert not any(f"{stage}@sotu" in status for stage in ("embed", "train", "evaluate", "report")), status
    run(["git", "checkout", "--", "."], a)
    run(["dvc", "checkout", "--force"], a)


def test_pulled_feature_files_fill_an_empty_store_and_a_damaged_one_is_computed(tmp_path, capfd):
    """In process (the store is the subject): B has A's feature files (as `dvc pull` leaves them) and an empty
    store; its embed stage copies their rows into the store and computes none. A damaged file is named in one
    line and its rows computed; either way the rebuilt files equal A's byte for byte."""
    from tests.helpers import repro_in_process

    params = only(tiny_params(), "sotu")
    a = make_project(tmp_path / "a", params, Path(".drift/cache"))
    repro_in_process(a, "sotu", stages=("ingest", "slice", "embed"))
    features = a / "data/features/sotu/minilm-l6"
    original = {p.name: p.read_bytes() for p in features.iterdir()}

    for name, damage in (("b", None), ("c", "pooled.npy")):
        repo = make_project(tmp_path / name, only(tiny_params(), "sotu"), Path(".drift/cache"))
        shutil.copytree(a / "data/features", repo / "data/features")
        if damage:
            target = repo / "data/features/sotu/minilm-l6" / damage
            data = bytearray(target.read_bytes())
            data[-5] ^= 0xFF
            target.write_bytes(bytes(data))
        capfd.readouterr()
        repro_in_process(repo, "sotu", stages=("ingest", "slice", "embed"))
        err = capfd.readouterr().err
        metrics = embed_metrics(repo)
        if damage:
            assert metrics["computed"] == metrics["unique"] > 0 and metrics["seeded"] == 0, metrics
            named = [
                line for line in err.splitlines() if "does not match its sha256" in line and damage in line
            ]
            assert len(named) >= 1, err
        else:
            assert metrics["computed"] == 0 and metrics["seeded"] == metrics["unique"] > 0, metrics
        rebuilt = {p.name: p.read_bytes() for p in (repo / "data/features/sotu/minilm-l6").iterdir()}
        assert rebuilt == original, name
        # later runs find every row in the store, like locally computed ones
        repro_in_process(repo, "sotu", stages=("embed",))
        again = embed_metrics(repo)
        assert again["computed"] == 0 and again["seeded"] == 0 and again["cache_hits"] == again["unique"]


# ---------------------------------------------------------------- faults on the remote


def data_repo(path: Path, server, bucket: str) -> Path:
    """A git + DVC repository holding one tracked folder of 4 random files, its S3 remote configured."""
    import os

    path.mkdir()
    run(["git", "init", "-q"], path)
    run(["dvc", "init", "-q"], path)
    (path / "d").mkdir()
    for i in range(4):
        (path / "d" / f"part{i}.npy").write_bytes(os.urandom(50_000))
    run(["dvc", "add", "-q", "d"], path)
    s3_remote(path, server.endpoint, bucket)
    # a pulled object is hashed before use
    run(["dvc", "remote", "modify", "storage", "verify", "true"], path)
    run(["git", "add", "-A"], path)
    run(["git", "commit", "-qm", "data"], path)
    return path


def transfer_error(action: str, repo: Path, env: dict | None = None) -> str:
    """The one line drift push / pull print for a failing remote (drift.run.remote.transfer in a subprocess)."""
    result = run(["python", "-m", "drift.run.remote", action], repo, check=False, env=env)
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "remote 'storage' (s3://" in lines[0], result.stderr
    return lines[0]


def test_remote_faults_are_one_line_and_a_rerun_completes(tmp_path, s3_server):
    import json as _json

    import boto3
    from moto import settings
    from moto.core.responses import ActionAuthenticatorMixin

    env = {"PYTHONPATH": str(ROOT)}
    a = data_repo(tmp_path / "a", s3_server, "drift-faults")

    # the bucket is missing: nothing pushed; once it exists, the push completes
    line = transfer_error("push", a, env)
    assert "the bucket does not exist: create it (`aws s3 mb s3://drift-faults`)" in line, line
    from tests.helpers import drift_cli

    cli = drift_cli("push", cwd=a)  # the command users type: the same line, exit status 2
    assert cli.returncode == 2 and "the bucket does not exist" in cli.stderr and "'storage'" in cli.stderr, (
        cli
    )
    s3_server.bucket("drift-faults")

    # the endpoint is down (nothing listens there)
    from tests.s3_server import free_port

    run(
        ["dvc", "remote", "modify", "--local", "storage", "endpointurl", f"http://127.0.0.1:{free_port()}"], a
    )
    line = transfer_error("push", a, env)
    assert "the endpoint does not answer" in line and "endpointurl" in line, line
    run(["dvc", "remote", "modify", "--local", "--unset", "storage", "endpointurl"], a)

    # wrong credentials, with the server checking them (an IAM user's keys are the valid ones)
    iam = boto3.client("iam", endpoint_url=s3_server.endpoint, region_name="us-east-1")
    iam.create_user(UserName="drift")
    iam.put_user_policy(
        UserName="drift",
        PolicyName="all",
        PolicyDocument=_json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        ),
    )
    key = iam.create_access_key(UserName="drift")["AccessKey"]
    previous = settings.INITIAL_NO_AUTH_ACTION_COUNT
    settings.INITIAL_NO_AUTH_ACTION_COUNT, ActionAuthenticatorMixin.request_count = 0, 0
    try:
        line = transfer_error("push", a, env)
        assert "the credentials were refused: set AWS_ACCESS_KEY_ID" in line, line
        good = {
            **env,
            "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
            "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
        }
        assert "5 files pushed" in run(["dvc", "push"], a, env=good).stdout
    finally:
        settings.INITIAL_NO_AUTH_ACTION_COUNT = previous

    # a pull killed midway (some objects arrived, some not: DVC moves each into the cache only when whole):
    # the re-run fetches only what is missing
    b = tmp_path / "b"
    run(["git", "clone", "-q", str(a), str(b)], tmp_path)
    run(["dvc", "fetch"], b)
    objects = sorted(p for p in (b / ".dvc/cache/files/md5").rglob("*") if p.is_file() and p.suffix != ".dir")
    for p in objects[:2]:
        p.unlink()
    out = run(["dvc", "pull"], b).stdout
    assert "2 files fetched" in out, out
    assert all((b / "d" / p.name).read_bytes() == p.read_bytes() for p in (a / "d").iterdir())

    # a half-written object on the remote: the pull refuses it (hash check), names it, serves nothing
    client = s3_server.client()
    keys = [
        o["Key"]
        for o in client.list_objects_v2(Bucket="drift-faults")["Contents"]
        if not o["Key"].endswith(".dir")
    ]
    body = client.get_object(Bucket="drift-faults", Key=keys[0])["Body"].read()
    client.put_object(Bucket="drift-faults", Key=keys[0], Body=body[: len(body) // 2])
    c = tmp_path / "c"
    run(["git", "clone", "-q", str(a), str(c)], tmp_path)
    line = transfer_error("pull", c, env)
    assert "some objects are missing there or failed their hash check" in line, line
    assert "not in cache" in run(["dvc", "status"], c).stdout  # dvc status tells the truth
    # pushed again from A (the machine that has them), the next pull completes
    # (DVC takes a folder's listing on the remote as proof that all its files are there: both go)
    listings = [
        o["Key"]
        for o in client.list_objects_v2(Bucket="drift-faults")["Contents"]
        if o["Key"].endswith(".dir")
    ]
    for key in [keys[0], *listings]:
        client.delete_object(Bucket="drift-faults", Key=key)
    assert "files pushed" in run(["dvc", "push"], a).stdout
    run(["dvc", "pull"], c)
    assert all((c / "d" / p.name).read_bytes() == p.read_bytes() for p in (a / "d").iterdir())
