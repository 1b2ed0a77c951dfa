"""Ships the repository's examples/ inside the package, so `resumable examples` finds them.

Everything else about the build is in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithExamples(build_py):  # type: ignore[misc]
    def run(self) -> None:
        super().run()
        source = Path(__file__).parent / "examples"
        if source.is_dir():
            shutil.copytree(
                source,
                Path(self.build_lib) / "resumable" / "examples",
                dirs_exist_ok=True,
                ignore=shutil.ignore_patterns(
                    "__pycache__", "*.pyc", ".resumable", "*ledger*.txt", "*.db*"
                ),
            )


setup(cmdclass={"build_py": BuildWithExamples})
