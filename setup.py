"""`pip install .` (pyproject.toml): builds the package's C++ module (_core) with CMake and puts it
beside python/polymargin/*.py in the wheel.

The CMake tree is build/pip/cmake (configured for this interpreter, without tests or benchmarks)
unless $POLYMARGIN_BUILD_DIR names an already configured tree (e.g. build, as `make` made it),
which is then only built. Whatever setuptools writes goes under build/pip too.
"""

import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(ROOT, "build", "pip")


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        return re.search(r"project\(polymargin VERSION ([0-9.]+)", f.read()).group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        tree = os.environ.get("POLYMARGIN_BUILD_DIR")
        if tree:
            tree = os.path.abspath(tree)
            if not os.path.isfile(os.path.join(tree, "CMakeCache.txt")):
                sys.exit(f"POLYMARGIN_BUILD_DIR={tree}: not a configured CMake tree")
        else:
            tree = os.path.join(WORK, "cmake")
            subprocess.run(["cmake", "-S", ROOT, "-B", tree, "-DCMAKE_BUILD_TYPE=Release",
                            "-DPOLYMARGIN_TESTS=OFF", "-DPOLYMARGIN_BENCH=OFF",
                            f"-DPython_EXECUTABLE={sys.executable}"], check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.run(["cmake", "--build", tree, "-j", jobs, "--target", "polymargin_python"],
                       check=True)
        built = os.path.join(tree, "python", "polymargin", self.get_ext_filename("_core"))
        if not os.path.isfile(built):
            sys.exit(f"{built}: not built (a tree for another Python, or without pybind11?)")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built, target)


os.makedirs(WORK, exist_ok=True)
setup(
    version=project_version(),
    packages=["polymargin"],
    package_dir={"": "python"},
    ext_modules=[Extension("polymargin._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": os.path.join(WORK, "setuptools")},
             "egg_info": {"egg_base": WORK}},
    zip_safe=False,
)
