"""The files of all-MiniLM-L6-v2 (Apache-2.0, by the Sentence Transformers team; see NOTICE).

A package with no code beyond this path and no dependencies, so that installing mdsearch brings
its model the way it brings any library: nothing is downloaded at run time, and no installer
needs a special step (the model's earlier package declared sentence-transformers, hence torch).
"""

from pathlib import Path

MODEL_DIR = Path(__file__).resolve().parent / "model"
"""A sentence-transformers model folder: ``model.safetensors``, ``tokenizer.json``, configs."""
