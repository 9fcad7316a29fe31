"""The optional compiled row printer (engine/_rowtext.c): without a C compiler the build goes on
and kvreplay.engine.row_text prints every row in Python (the same bytes, slower)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("kvreplay.engine._rowtext", ["engine/_rowtext.c"], optional=True)])
