"""Where a stage's heavy work runs: in the stage's own process, or as Ray tasks (params `compute`).

DVC stays the orchestrator: a stage hands independent items (a (model, seed) group of cutoffs to train, one to
evaluate) to `run_tasks` and gets the results back in the items' order, so it writes exactly what the local
executor writes. Every task writes atomically into the caches beside the embedding store, so a task Ray
retries finds what a dead attempt finished. Ray starts once per process: a local cluster sized to this machine
(no compute.address, no $RAY_ADDRESS) or the cluster there; `check_reachable` stats the repository's files and
the store from every node before any compute. With the store on object storage the workers need no shared
filesystem: the tasks' inputs travel through Ray's object store (`ships_inputs`)."""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

from drift.core.environment import pin_cpu_code_path
from drift.core.errors import DriftError
from drift.core.objectstore import check_store, is_object_store
from drift.core.params import ComputeParams

RETRIES = 3  # attempts after a worker died (a node lost, a process killed): each resumes from the caches
DRIFT = Path(__file__).resolve().parents[1]


def address(compute: ComputeParams) -> str | None:
    """The cluster to join: compute.address, else $RAY_ADDRESS; None starts a local one."""
    return compute.address or os.environ.get("RAY_ADDRESS") or None


def connect(compute: ComputeParams):
    """The `ray` module, initialised once per process; a one-line DriftError when the cluster cannot be
    joined."""
    import ray  # lazy: ray, only with compute.executor ray

    if ray.is_initialized():
        return ray
    where = address(compute)
    try:
        if where:
            reachable(where)
            # the driver's drift/ goes with the job: workers run the code that computed the cache keys
            # and the driver's CPU code path, set before a worker imports torch: the same numbers there
            ray.init(
                address=where,
                runtime_env={"py_modules": [str(DRIFT)], "env_vars": pin_cpu_code_path()},
                logging_level=logging.WARNING,
                log_to_driver=False,
            )
        else:
            ray.init(
                num_cpus=os.cpu_count(),
                include_dashboard=False,
                logging_level=logging.WARNING,
                runtime_env={"env_vars": pin_cpu_code_path()},
                log_to_driver=False,
            )  # the tasks' errors come back as exceptions; their progress bars stay out
    except Exception as e:  # ConnectionError, TimeoutError, RuntimeError, ValueError: Ray's choice varies
        reason = " ".join(str(e).split())[:200] or type(e).__name__
        raise DriftError(
            f"cannot join the Ray cluster at {where or 'a new local cluster'}: {reason}; start it with "
            "`ray start --head` there, or set compute.address (or $RAY_ADDRESS) to a running cluster, "
            "or null for a local one, or compute.executor: local"
        ) from None
    return ray


def reachable(where: str, timeout: float = 5.0) -> None:
    """A TCP connection to host:port (or ray://host:port) first: Ray itself retries an unreachable address for
    minutes. "auto" (the cluster `ray start` began on this machine) is left to Ray."""
    host, _, port = where.removeprefix("ray://").rpartition(":")
    if where == "auto" or not port.isdigit():
        return
    with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout):
        pass


def workers(compute: ComputeParams) -> int:
    """How many tasks run at once: 1 locally, else as many as the cluster's CPUs (and GPUs) hold."""
    if compute.executor == "local":
        return 1
    total = connect(compute).cluster_resources()
    slots = total.get("CPU", 0) // compute.cpus_per_task
    if compute.gpus_per_task:
        slots = min(slots, total.get("GPU", 0) // compute.gpus_per_task)
    return max(1, int(slots))  # an autoscaling cluster may have none yet: it adds nodes for the waiting tasks


def resources(compute: ComputeParams) -> dict:
    return {"num_cpus": compute.cpus_per_task, "num_gpus": compute.gpus_per_task}


def run_tasks(fn, items, compute: ComputeParams) -> list:
    """[fn(item) for item in items]: in order in this process (executor local), or as Ray remote tasks holding
    compute.cpus_per_task / gpus_per_task each, retried when their worker dies, gathered in the items' order.
    `fn` must be a module-level function (workers import it) and each item picklable and small."""
    items = list(items)
    if compute.executor == "local" or not items:
        return [fn(item) for item in items]
    ray = connect(compute)
    remote = ray.remote(max_retries=RETRIES, **resources(compute))(fn)
    refs = [remote.remote(item) for item in items]
    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as e:
        cause = getattr(e, "cause", None)
        if isinstance(cause, DriftError):  # the task's own one-line error, as the local executor raises it
            raise DriftError(str(cause)) from None
        raise
    except ray.exceptions.WorkerCrashedError:
        raise DriftError(
            f"a Ray worker running {fn.__name__} died {RETRIES + 1} times: see the worker logs "
            "(`ray logs`); out of memory? raise compute.cpus_per_task to run fewer tasks per node"
        ) from None
    except BaseException:  # an interrupt (DVC stopped, Ctrl-C): no task left running on the cluster
        for ref in refs:
            ray.cancel(ref, force=True)
        raise


def map_actors(
    cls, args: tuple, calls: list[tuple], compute: ComputeParams, actors: int, on_result=None
) -> list:
    """cls(*args) built once in each of `actors` Ray actors (compute.cpus_per_task / gpus_per_task each), then
    its run(*call) for every call, each on the next free actor; results in the calls' order, on_result(result)
    as each is taken. A dead actor is restarted and its call retried."""
    from ray.util import ActorPool  # lazy: ray, only with compute.executor ray

    ray = connect(compute)
    actor = ray.remote(max_restarts=RETRIES, max_task_retries=RETRIES, **resources(compute))(cls)
    handles = [actor.remote(*args) for _ in range(max(1, min(actors, len(calls))))]
    results = []
    try:
        for result in ActorPool(handles).map(lambda a, call: a.run.remote(*call), calls):
            results.append(result)
            if on_result is not None:
                on_result(result)
    except ray.exceptions.RayTaskError as e:
        if isinstance(getattr(e, "cause", None), DriftError):
            raise DriftError(str(e.cause)) from None
        raise
    finally:
        for handle in handles:  # the encoders' memory goes back to the cluster
            ray.kill(handle)
    return results


def ships_inputs(compute: ComputeParams, store) -> bool:
    """Whether a stage sends its tasks' inputs through Ray's object store (SliceData.ship; checkpoints come
    from the cache by key): on Ray with the store and caches on object storage, where the workers are taken to
    share no filesystem with the stage, only the store's endpoint."""
    return compute.executor != "local" and is_object_store(store)


def _missing(paths: list[str]) -> list[str]:
    """On a worker: the paths it cannot stat, and each s3:// store whose endpoint, credentials or bucket fails
    (with the reason)."""
    missing = []
    for p in paths:
        if is_object_store(p):
            try:
                check_store(p)
            except DriftError as e:
                missing.append(f"{p} ({e})")
        elif not os.path.exists(p):
            missing.append(p)
    return missing


def check_reachable(paths, compute: ComputeParams) -> None:
    """Before compute on a cluster: every node with CPUs must see `paths` (the embedding store's directory,
    the stage's inputs) at the same place, and reach an s3:// store (its endpoint, credentials and bucket, not
    a path); one line naming the first path a node cannot see and what makes it visible."""
    if compute.executor == "local":
        return
    # lazy: ray, only with compute.executor ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ray = connect(compute)
    paths = [str(p) if is_object_store(p) else str(Path(p).resolve()) for p in paths]
    nodes = [n for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0]
    stat = ray.remote(num_cpus=0, max_retries=RETRIES)(_missing)
    found = ray.get(
        [
            stat.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(
                paths
            )
            for n in nodes
        ]
    )
    for node, missing in zip(nodes, found):
        if missing and is_object_store(missing[0]):
            raise DriftError(
                f"the store is not reachable from Ray node {node['NodeManagerAddress']}: {missing[0]}; "
                "give every node the AWS_* variables (or an instance role) that reach the endpoint"
            )
        if missing:
            raise DriftError(
                f"{missing[0]} is not visible from Ray node {node['NodeManagerAddress']}: every node must mount "
                "the same paths; put embed.cache_dir (the store and caches) and the repository checkout on a shared "
                "filesystem (NFS, Lustre, a ReadWriteMany volume on KubeRay) or run with compute.executor: local"
            )
