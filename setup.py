"""The optional compiled row printer (engine/_rowtext.c, CPython only): without a C compiler the
build goes on and kvreplay.engine.row_text prints every row in Python (the same bytes, slower)."""

import platform

from setuptools import Extension, setup

setup(ext_modules=[Extension("kvreplay.engine._rowtext", ["engine/_rowtext.c"], optional=True)]
      if platform.python_implementation() == "CPython" else [])
