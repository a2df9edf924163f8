"""Build step of `pip install .` (pyproject.toml): liblowp.so into the lowp package.

CMake configures this checkout CPU-only without the test suites (-DLOWP_CUDA=OFF
-DLOWP_BUILD_TESTS=OFF; it needs the C toolchain, MPFR and jansson, as the README's build
does) and builds the shared library target `lowp` in build/python (or $LOWP_BUILD_DIR);
the library is copied into the package, where lowp/__init__.py looks first. With
LOWP_LIBRARY set, that library is copied and nothing is built."""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        lib = os.environ.get("LOWP_LIBRARY")
        if not lib:
            bdir = os.environ.get("LOWP_BUILD_DIR", os.path.join(HERE, "build", "python"))
            subprocess.check_call(["cmake", "-S", HERE, "-B", bdir, "-DLOWP_CUDA=OFF", "-DLOWP_BUILD_TESTS=OFF",
                                   "-DCMAKE_BUILD_TYPE=Release"])
            subprocess.check_call(["cmake", "--build", bdir, "--target", "lowp", "-j2"])
            lib = os.path.join(bdir, "ref", "liblowp.so")
        dst = os.path.join(self.build_lib, "lowp")
        os.makedirs(dst, exist_ok=True)
        shutil.copyfile(os.path.realpath(lib), os.path.join(dst, "liblowp.so"))


setup(cmdclass={"build_py": BuildWithLibrary})
