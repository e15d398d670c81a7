"""Only cythonizes the kernels; all metadata lives in pyproject.toml."""
from Cython.Build import cythonize
from setuptools import Extension, setup


def kernel(name: str, openmp: bool = True) -> Extension:
    """pivot/<name>.pyx as C++17 at -O3, without -march=native: the wheel must run on any
    x86-64 machine. OpenMP for the kernels that thread over rows or sentences."""
    flags = ["-fopenmp"] if openmp else []
    return Extension(f"pivot.{name}", [f"pivot/{name}.pyx"], language="c++",
                     extra_compile_args=["-O3", "-std=c++17", *flags], extra_link_args=flags)


extensions = [kernel("_counts"), kernel("_align"), kernel("_lm", openmp=False), kernel("_export", openmp=False)]

setup(ext_modules=cythonize(extensions, compiler_directives={"language_level": 3}))
