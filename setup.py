"""The build step a wheel needs beyond pyproject.toml: the pipeline's files that live outside drift/ (the stage
scripts, params.yaml and the presets in params/) copied into the wheel as drift/_pipeline/, so that `drift
rehearse` runs the pipeline from an installed package (drift/run/rehearse.py `pipeline_kit`). The checkout keeps
them where they are (dvc.yaml runs `python stages/<stage>.py`); an editable install reads them there."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

# drift/run/rehearse.py `pipeline_kit` reads these under drift/_pipeline/
KIT = ("stages/*.py", "params.yaml", "params/*.yaml")


class BuildPy(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install: the checkout holds them
            return
        for pattern in KIT:
            for source in sorted(Path().glob(pattern)):
                target = Path(self.build_lib, "drift", "_pipeline", source)
                self.mkpath(str(target.parent))
                self.copy_file(str(source), str(target))


setup(cmdclass={"build_py": BuildPy})
