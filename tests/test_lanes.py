"""The lanes of `make test-fast`: tests/conftest.py marks a test `pipeline` or `compute` from its own source, the
functions of its module it calls and its fixtures; a test of pure functions stays unmarked."""
import subprocess


def _start_a_process():
    return subprocess.run(["true"], check=True)


def _trains():
    from drift.train.loop import train_one

    return train_one


def markers(request) -> set[str]:
    return {m.name for m in request.node.iter_markers()} & {"pipeline", "compute"}


def test_a_pure_test_is_unmarked(request):
    assert markers(request) == set()


def test_a_fixture_that_builds_a_dvc_repository_marks_pipeline(request, project):
    assert "pipeline" in markers(request)  # `project` is the factory of tests/conftest.py: nothing is built


def test_a_helper_of_the_module_that_starts_a_process_marks_pipeline(request):
    assert callable(_start_a_process)  # named in the test: its source counts, though it is not run here
    assert markers(request) == {"pipeline"}


def test_a_helper_that_trains_marks_compute(request):
    assert callable(_trains)
    assert markers(request) == {"compute"}
