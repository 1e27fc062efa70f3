"""mdsearch: local semantic search for markdown notes, inside the editor.

Telemetry is switched off here, before anything can import a library that sends it: every
front end (CLI, language server, MCP server) and every library user imports this package first.
ONNX Runtime 1.32 writes a device id and an event queue under ``~/.cache/Microsoft/`` and looks
up its telemetry host in any process that imports it, unless ``ORT_DISABLE_TELEMETRY`` is set
before the import (``onnxruntime.disable_telemetry_events()`` afterwards does not stop it);
Chroma reads ``ANONYMIZED_TELEMETRY``. Both are forced, not defaulted: mdsearch promises no
network call and no telemetry, whatever the environment says.
"""

import os as _os

_os.environ["ORT_DISABLE_TELEMETRY"] = "1"
_os.environ["ANONYMIZED_TELEMETRY"] = "False"

__version__ = "0.1.0"
