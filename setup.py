"""The optional compiled parts (CPython only): the row printer (engine/_rowtext.c) and the MTP
random stream (engine/_mtprng.c). Without a C compiler the build goes on: kvreplay.engine.row_text
prints every row in Python and kvreplay.engine.mtp_rng draws in Python (the same bytes, slower)."""

import platform

from setuptools import Extension, setup

setup(ext_modules=[Extension("kvreplay.engine._rowtext", ["engine/_rowtext.c"], optional=True),
                   Extension("kvreplay.engine._mtprng", ["engine/_mtprng.c"], optional=True)]
      if platform.python_implementation() == "CPython" else [])
