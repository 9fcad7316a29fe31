#!/usr/bin/env bash
# Install the reference native engine (Dynamo 1.6.1: the Rust replay core plus its Python package)
# into the CURRENT Python environment, for parity tests and benchmarks only.
# Its declared dependencies (vLLM-sized) do not install here and are not needed: hence --no-deps.
set -euo pipefail
python=${PYTHON:-python}
"$python" -m pip install --no-deps "ai-dynamo-runtime==1.6.1" "ai-dynamo==1.6.1"
"$python" -m pip install "typing_extensions>=4.7"
DYN_LOG=error "$python" -c "import dynamo._core, dynamo.replay; print('reference engine installed')"
