"""Import-only stand-in for ``sglang.srt.entrypoints.openai.encoding_dsv4``, which the sglang 0.5.23 wheel lacks.

miles' chat-template module imports it at import time for its DeepSeek-V4 family only; the miles-loop tests
never render with it (calling it raises). The setup script copies this file into the venv's sglang package."""


def encode_messages(*args, **kwargs):
    raise RuntimeError("encoding_dsv4 is a stand-in in the miles-loop test venv (tests/miles_loop/stubs)")
