"""Only cythonizes the kernels; all metadata lives in pyproject.toml."""
from Cython.Build import cythonize
from setuptools import Extension, setup

# -O3 without -march=native: the wheel must run on any x86-64 machine.
openmp = ["-fopenmp"]
extensions = [
    Extension(
        "pivot._counts",
        ["pivot/_counts.pyx"],
        language="c++",
        extra_compile_args=["-O3", "-std=c++17", *openmp],
        extra_link_args=openmp,
    ),
    Extension(
        "pivot._align",
        ["pivot/_align.pyx"],
        language="c++",
        extra_compile_args=["-O3", "-std=c++17", *openmp],
        extra_link_args=openmp,
    ),
    Extension(
        "pivot._lm",
        ["pivot/_lm.pyx"],
        language="c++",
        extra_compile_args=["-O3", "-std=c++17"],
    ),
]

setup(ext_modules=cythonize(extensions, compiler_directives={"language_level": 3}))
