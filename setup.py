"""Cythonizes the kernels and lists the packages; all other metadata lives in pyproject.toml."""
from Cython.Build import cythonize
from setuptools import Extension, find_packages, setup


def kernel(name: str, openmp: bool = True) -> Extension:
    """pivot/<name>.pyx as C++17 at -O3, without -march=native: the wheel must run on any
    x86-64 machine. OpenMP for the kernels that thread over rows or sentences."""
    flags = ["-fopenmp"] if openmp else []
    return Extension(f"pivot.{name}", [f"pivot/{name}.pyx"], language="c++",
                     extra_compile_args=["-O3", "-std=c++17", *flags], extra_link_args=flags)


extensions = [kernel("_counts"), kernel("_align"), kernel("_lm", openmp=False), kernel("_export", openmp=False)]

# Every package under pivot/ (each folder with an __init__.py), found rather than listed, so that a
# new subpackage is in the wheel without anyone remembering to name it here; and pivot.recipes_data,
# which has no folder of its own (pyproject.toml maps it to recipes/).
packages = [*find_packages(include=["pivot", "pivot.*"]), "pivot.recipes_data"]

setup(packages=packages, ext_modules=cythonize(extensions, compiler_directives={"language_level": 3}))
